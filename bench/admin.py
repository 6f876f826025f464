"""The admin console's lists on a big tenant: 10,000 users and 100,000 audit rows.

    python bench/admin.py [--users 10000] [--audit 100000] [--samples 40]

(``bench/web.py --admin`` in the issue: the console's pages are these REST calls; the browser
adds nothing that depends on the tenant's size, so this bench drives the routes directly.)

Setup: a scratch database (``DATABASE_URL`` if set, else pgserver in a temporary OPENKB_HOME),
migrated; the real app (``server.app.create_app``) served by uvicorn on a loopback port, no
Milvus. Users, memberships and audit rows are written with ``INSERT ... SELECT
generate_series`` (statuses mixed, 200 distinct actors, 12 actions, 90 days), then VACUUM ANALYZE.
A tenant administrator signs in once (a session cookie, as the console).

For each list the console shows (first page, a deep page, search, status filter; audit: first
page, by actor email, by action prefix, since a date, a deep page) it times the HTTP call
(``--samples`` times after two warm-ups) and, next to it, the **raw SQL the route ran**: the
statements are captured from the app's engine during one call (the list's count and page, plus
the name lookups), and replayed on a raw DBAPI connection; authentication's own statements are
left out. The ratio is p95(route) / p95(raw SQL): what FastAPI, the session check, the service
and JSON add. Target: every route's p95 <= 300 ms. The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# not bench/ itself on the path: bench/mcp.py would shadow the mcp package the server imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from bench.permissions import _percentile, _start_database  # noqa: E402

PASSWORD = "bench password 123"
ACTIONS = [
    "user.activated",
    "user.suspended",
    "user.role_changed",
    "user.deleted",
    "auth.login",
    "auth.logout",
    "group.create",
    "group_member.add",
    "auth_settings.updated",
    "milvus.rebuild.start",
    "oauth.grant_revoked",
    "workspace.deleted",
]
# the statements a list route runs for the list itself (count, page, name lookups), as opposed to
# the session and administrator checks every admin route makes first
LIST_SQL = re.compile(r"count\(\*\)|\bOFFSET\b|users\.id IN|users\.email = ", re.IGNORECASE)


def seed(engine, tenant_id, n_users: int, n_audit: int) -> None:
    from sqlalchemy import text

    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO users (id, email, display_name, status, created_at, updated_at) "
                "SELECT gen_random_uuid(), 'user-' || g || '@bench.local', 'Bench User ' || g, "
                "CASE WHEN g % 10 = 0 THEN 'pending_activation' WHEN g % 25 = 0 THEN 'suspended' ELSE 'active' END, "
                "now() - g * interval '1 minute', now() FROM generate_series(1, :n) g"
            ),
            {"n": n_users},
        )
        c.execute(
            text(
                "INSERT INTO tenant_memberships (id, tenant_id, user_id, role, created_at) "
                "SELECT gen_random_uuid(), :t, id, 'member', created_at FROM users WHERE email LIKE 'user-%@bench.local'"
            ),
            {"t": tenant_id},
        )
        actors = [r[0] for r in c.execute(text("SELECT id FROM users ORDER BY email LIMIT 200")).all()]
        c.execute(
            text(
                "INSERT INTO audit_logs (id, tenant_id, actor_user_id, actor_type, action, object_type, object_id, "
                "metadata, created_at) "
                "SELECT gen_random_uuid(), :t, (CAST(:actors AS uuid[]))[1 + g % 200], 'user', "
                "(CAST(:actions AS text[]))[1 + (g * 7) % 12], 'user', gen_random_uuid(), "
                "jsonb_build_object('n', g), now() - g * interval '77 seconds' FROM generate_series(1, :m) g"
            ),
            {"t": tenant_id, "actors": actors, "actions": ACTIONS, "m": n_audit},
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        # the steady state autovacuum keeps: statistics, and a visibility map for index-only counts
        c.execute(text("VACUUM ANALYZE users, tenant_memberships, audit_logs"))


def serve(ctx) -> tuple[str, object]:
    from openkb.jobs import RecordingQueue
    from server.app import create_app

    return serve_app(create_app(ctx, queue=RecordingQueue(), warm=False))


def serve_app(app) -> tuple[str, object]:
    """``app`` served by uvicorn on a free loopback port in a thread, once /healthz answers."""
    import httpx
    import uvicorn

    from openkb.runtime.embedded import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    threading.Thread(target=server.run, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                return base, server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server did not start")


class Capture:
    """Statements the app's engine runs while ``on``."""

    def __init__(self, engine) -> None:
        from sqlalchemy import event

        self.on = False
        self.seen: list[tuple[str, object]] = []

        @event.listens_for(engine, "before_cursor_execute")
        def _grab(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001, ARG001
            if self.on:
                self.seen.append((statement, parameters))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--audit", type=int, default=100_000)
    ap.add_argument("--samples", type=int, default=40)
    args = ap.parse_args()

    import httpx
    from sqlmodel import Session

    from openkb.bootstrap import default_tenant
    from openkb.config import Settings
    from openkb.context import AppContext
    from openkb.models import TenantMembership, User
    from openkb.runtime.embedded import Endpoints
    from openkb.security import hash_password

    url, svc = _start_database()
    server = None
    try:
        home = Path(os.environ.get("OPENKB_HOME") or "/tmp")
        ctx = AppContext.build(
            Settings(),
            Endpoints(database_url=url, milvus_uri="", milvus_token=None, embedder_url=None, queue="", home=home),
        )
        with Session(ctx.engine) as s:
            tenant = default_tenant(s)
            admin = User(
                email="admin@bench.local", display_name="Admin", status="active", password_hash=hash_password(PASSWORD)
            )
            s.add(admin)
            s.flush()
            s.add(TenantMembership(tenant_id=tenant.id, user_id=admin.id, role="tenant_admin"))
            s.commit()
            tenant_id = tenant.id
        t0 = time.perf_counter()
        seed(ctx.engine, tenant_id, args.users, args.audit)
        print(f"seeded {args.users} users and {args.audit} audit rows in {time.perf_counter() - t0:.1f} s")
        actor_email = "user-10@bench.local"  # one of the 200 actors

        cases = [
            ("users: first page", "/api/admin/users", {"limit": 25}),
            ("users: page at offset 5000", "/api/admin/users", {"limit": 25, "offset": 5000}),
            ("users: search 'user-99'", "/api/admin/users", {"q": "user-99", "limit": 25}),
            ("users: status pending", "/api/admin/users", {"status": "pending_activation", "limit": 25}),
            ("audit: first page", "/api/admin/audit-logs", {"limit": 25}),
            ("audit: actor email", "/api/admin/audit-logs", {"actor": actor_email, "limit": 25}),
            ("audit: action prefix 'user.'", "/api/admin/audit-logs", {"action": "user.", "limit": 25}),
            ("audit: exact action", "/api/admin/audit-logs", {"action": "group.create", "limit": 25}),
            ("audit: page at offset 50000", "/api/admin/audit-logs", {"limit": 25, "offset": 50_000}),
        ]
        capture = Capture(ctx.engine)
        base, server = serve(ctx)
        results: dict[str, dict[str, float]] = {}
        with httpx.Client(base_url=base, timeout=60) as c:
            r = c.post("/api/auth/login", json={"email": "admin@bench.local", "password": PASSWORD})
            r.raise_for_status()
            print(f"{'list':<30} {'route p50':>10} {'route p95':>10} {'SQL p50':>9} {'SQL p95':>9} {'ratio':>6}  rows")
            for name, path, params in cases:
                for _ in range(2):  # warm-up
                    c.get(path, params=params).raise_for_status()
                capture.seen.clear()
                capture.on = True
                body = c.get(path, params=params).json()
                capture.on = False
                stmts = [(st, p) for st, p in capture.seen if LIST_SQL.search(st)]
                http_ms: list[float] = []
                for _ in range(args.samples):
                    t = time.perf_counter()
                    c.get(path, params=params).raise_for_status()
                    http_ms.append((time.perf_counter() - t) * 1000)
                sql_ms: list[float] = []
                raw = ctx.engine.raw_connection()
                try:
                    cur = raw.cursor()
                    for _ in range(args.samples):
                        t = time.perf_counter()
                        for st, p in stmts:
                            cur.execute(st, p)
                            cur.fetchall()
                        sql_ms.append((time.perf_counter() - t) * 1000)
                    raw.rollback()
                finally:
                    raw.close()
                h95, s95 = _percentile(http_ms, 0.95), _percentile(sql_ms, 0.95)
                results[name] = {
                    "route_p50_ms": round(statistics.median(http_ms), 2),
                    "route_p95_ms": round(h95, 2),
                    "sql_p50_ms": round(statistics.median(sql_ms), 2),
                    "sql_p95_ms": round(s95, 2),
                    "ratio_p95": round(h95 / s95, 2) if s95 else None,
                    "statements": len(stmts),
                    "total": body.get("total"),
                }
                print(
                    f"{name:<30} {statistics.median(http_ms):10.1f} {h95:10.1f} {statistics.median(sql_ms):9.1f} "
                    f"{s95:9.1f} {h95 / s95 if s95 else 0:6.2f}  {body.get('total')}"
                )
        worst = max(v["route_p95_ms"] for v in results.values())
        print(f"worst route p95: {worst:.1f} ms (target <= 300 ms)")
        print(
            json.dumps(
                {
                    "bench": "admin",
                    "users": args.users,
                    "audit_rows": args.audit,
                    "samples": args.samples,
                    "worst_route_p95_ms": worst,
                    "target_p95_ms": 300,
                    "ok": worst <= 300,
                    "lists": results,
                }
            )
        )
    finally:
        if server is not None:
            server.should_exit = True
        if svc is not None:
            svc.stop()


if __name__ == "__main__":
    main()
