"""Permission service figures: 10k documents, 1k users, mixed roles, on the embedded PostgreSQL.

    python bench/permissions.py [--docs 10000] [--users 1000] [--samples 300]

Prints p50/p95 for ``can_read_document`` on one document, for the batch check of 100
candidates (``filter_readable_documents``), for ``readable_scope`` and ``chunk_access_many``
(100), and for the fetch-then-authorize every REST call on one object makes
(``access_document`` / ``access_knowledge_base`` / ``access_workspace`` for random people, many
answered NotFound), with the number of SQL statements each issues. The last line is a JSON object.
Uses ``DATABASE_URL`` if set (a scratch database is created there), else starts pgserver in a
temporary OPENKB_HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def _start_database() -> tuple[str, object | None]:
    url = os.environ.get("DATABASE_URL")
    svc = None
    if not url:
        os.environ["OPENKB_HOME"] = tempfile.mkdtemp(prefix="openkb-bench-")
        os.environ["OPENKB_ENV"] = "test"
        from openkb.config import Settings, reset_settings_cache
        from openkb.runtime.embedded import EmbeddedServices

        reset_settings_cache()
        svc = EmbeddedServices(Settings(), components=("postgresql",))
        url = svc.start().database_url
    import psycopg

    from openkb.db import normalize_url

    dbname = f"openkb_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    head, _, query = url.partition("?")
    db_url = f"{head.rsplit('/', 1)[0]}/{dbname}" + (f"?{query}" if query else "")
    from openkb.migrate import upgrade

    upgrade(db_url)
    return normalize_url(db_url), svc


def build_world(session, n_docs: int, n_users: int, rng: random.Random) -> dict:
    from sqlalchemy import insert, text

    from openkb.models import (
        Collaborator,
        Document,
        Group,
        GroupMember,
        KnowledgeBase,
        Tenant,
        TenantMembership,
        User,
        Workspace,
        WorkspaceMember,
    )

    tid = uuid.uuid4()
    users = [uuid.uuid4() for _ in range(n_users)]
    n_ws, n_kb, n_groups = 10, 100, 50
    wss = [uuid.uuid4() for _ in range(n_ws)]
    kbs = [
        (uuid.uuid4(), rng.choice(wss), rng.choice(["private", "private", "workspace", "workspace", "public"]))
        for _ in range(n_kb)
    ]
    groups = [uuid.uuid4() for _ in range(n_groups)]
    rows: list[tuple] = [
        (Tenant, [{"id": tid, "name": "Bench", "slug": f"bench-{tid.hex[:6]}"}]),
        (
            User,
            [
                {
                    "id": u,
                    "email": f"{u.hex}@bench.example",
                    "display_name": u.hex[:8],
                    "status": "active" if i % 50 else "suspended",
                }
                for i, u in enumerate(users)
            ],
        ),
        (
            TenantMembership,
            [
                {"id": uuid.uuid4(), "tenant_id": tid, "user_id": u, "role": "tenant_admin" if i < 3 else "member"}
                for i, u in enumerate(users)
            ],
        ),
    ]
    rows.append(
        (Group, [{"id": g, "tenant_id": tid, "name": f"g{i}", "created_by": users[0]} for i, g in enumerate(groups)])
    )
    gm = {(g, u) for g in groups for u in rng.sample(users, min(30, len(users)))}
    rows.append((GroupMember, [{"id": uuid.uuid4(), "tenant_id": tid, "group_id": g, "user_id": u} for g, u in gm]))
    rows.append(
        (
            Workspace,
            [
                {"id": w, "tenant_id": tid, "name": f"w{i}", "slug": f"w{i}", "created_by": users[0]}
                for i, w in enumerate(wss)
            ],
        )
    )
    members = {}
    for u in users:
        for w in rng.sample(wss, rng.randint(1, 3)):
            members[(w, u)] = rng.choice(["admin", "member", "member", "member", "guest", "guest"])
    for w in wss:
        members[(w, rng.choice(users))] = "owner"
    rows.append(
        (
            WorkspaceMember,
            [
                {"id": uuid.uuid4(), "tenant_id": tid, "workspace_id": w, "user_id": u, "role": r}
                for (w, u), r in members.items()
            ],
        )
    )
    rows.append(
        (
            KnowledgeBase,
            [
                {
                    "id": k,
                    "tenant_id": tid,
                    "workspace_id": w,
                    "title": f"kb{i}",
                    "slug": f"kb{i}",
                    "visibility": v,
                    "status": "active",
                    "created_by": users[0],
                    "settings": {},
                }
                for i, (k, w, v) in enumerate(kbs)
            ],
        )
    )
    docs = []
    by_kb: dict[uuid.UUID, list[tuple[uuid.UUID, int]]] = {}
    for i in range(n_docs):
        k, w, _ = rng.choice(kbs)
        siblings = by_kb.setdefault(k, [])
        parents = [(d, depth) for d, depth in siblings[-30:] if depth < 5]
        parent, depth = rng.choice(parents) if parents and rng.random() < 0.8 else (None, 0)
        did = uuid.uuid4()
        siblings.append((did, depth + 1))
        custom = rng.random() < 0.08
        docs.append(
            {
                "id": did,
                "tenant_id": tid,
                "workspace_id": w,
                "knowledge_base_id": k,
                "parent_id": parent,
                "type": "folder" if rng.random() < 0.3 else "page",
                "title": f"d{i}",
                "slug": f"d{i}",
                "status": rng.choice(["published"] * 8 + ["draft", "archived"]),
                "permission_mode": "custom" if custom else "inherit",
                "visibility": rng.choice([None, "private", "workspace"]) if custom else None,
                "created_by": users[0],
                "updated_by": users[0],
            }
        )
    rows.append((Document, docs))
    collab = {}
    for k, _, _ in kbs:
        collab[("knowledge_base", k, "user", rng.choice(users))] = "owner"
        for u in rng.sample(users, 20):
            collab[("knowledge_base", k, "user", u)] = rng.choice(["manager", "editor", "viewer", "viewer"])
        for g in rng.sample(groups, 2):
            collab[("knowledge_base", k, "group", g)] = rng.choice(["editor", "viewer"])
    for d in docs:
        if d["permission_mode"] == "custom":
            for u in rng.sample(users, 5):
                collab[("document", d["id"], "user", u)] = rng.choice(["manager", "editor", "viewer"])
    rows.append(
        (
            Collaborator,
            [
                {
                    "id": uuid.uuid4(),
                    "tenant_id": tid,
                    "object_type": ot,
                    "object_id": oid,
                    "subject_type": st,
                    "subject_id": sid,
                    "role": r,
                    "source": "direct",
                }
                for (ot, oid, st, sid), r in collab.items()
            ],
        )
    )
    for model, data in rows:
        for i in range(0, len(data), 5000):
            session.execute(insert(model.__table__), data[i : i + 5000])
    session.commit()
    session.execute(text("ANALYZE"))
    session.commit()
    return {
        "tenant": tid,
        "users": users,
        "docs": [d["id"] for d in docs],
        "collaborators": len(collab),
        "workspace_members": len(members),
        "kbs": [k for k, _, _ in kbs],
        "workspaces": wss,
    }


def _explain(engine, world: dict, rng: random.Random) -> None:
    from openkb.permissions.loader import _SNAPSHOT_SQL

    compiled = _SNAPSHOT_SQL.compile(engine)
    params = {
        "doc_ids": [str(d) for d in rng.sample(world["docs"], 100)],
        "kb_ids": [],
        "ws_ids": [],
        "user_id": str(rng.choice(world["users"])),
        "tenant_id": str(world["tenant"]),
        "link_id": None,
        "dify_id": None,
    }
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        cur = raw.cursor()
        sql = str(compiled).replace("%(doc_ids)s", "%(doc_ids)s::uuid[]").replace("%(kb_ids)s", "%(kb_ids)s::uuid[]")
        sql = sql.replace("%(ws_ids)s", "%(ws_ids)s::uuid[]")
        for k in ("user_id", "tenant_id", "link_id", "dify_id"):
            sql = sql.replace(f"%({k})s", f"%({k})s::uuid")
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        for (line,) in cur.fetchall():
            print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--users", type=int, default=1_000)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of the batch statement")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    url, svc = _start_database()
    try:
        from sqlalchemy import event
        from sqlmodel import Session

        from openkb.db import get_engine
        from openkb.errors import NotFound, PermissionDenied
        from openkb.permissions import (
            Principal,
            access_document,
            access_knowledge_base,
            access_workspace,
            can_read_document,
            chunk_access_many,
            filter_readable_documents,
            readable_scope,
        )

        engine = get_engine(url)
        with Session(engine) as s:
            t0 = time.perf_counter()
            world = build_world(s, args.docs, args.users, rng)
            print(
                f"world: {len(world['docs'])} documents, {len(world['users'])} users, "
                f"{world['collaborators']} collaborator rows, {world['workspace_members']} workspace members "
                f"(built in {time.perf_counter() - t0:.1f} s)"
            )

        from openkb.runtime.memory import freeze_startup_heap

        freeze_startup_heap()  # as the API server does once started
        if args.explain:
            _explain(engine, world, rng)
        counter = {"n": 0}

        @event.listens_for(engine, "before_cursor_execute")
        def _count(*_a, **_k):  # noqa: ANN002
            counter["n"] += 1

        def measure(name: str, fn, samples: int) -> dict:
            times, queries = [], []
            with Session(engine) as s:
                for _ in range(10):  # warm connection, prepared statements and caches
                    fn(s)
                for _ in range(samples):
                    counter["n"] = 0
                    t = time.perf_counter()
                    fn(s)
                    times.append((time.perf_counter() - t) * 1000)
                    queries.append(counter["n"])
                s.rollback()
            out = {
                "p50_ms": round(statistics.median(times), 3),
                "p95_ms": round(_percentile(times, 0.95), 3),
                "queries": max(queries),
            }
            print(f"{name:34s} p50 {out['p50_ms']:7.2f} ms   p95 {out['p95_ms']:7.2f} ms   queries {out['queries']}")
            return out

        tenant = world["tenant"]
        users, docs = world["users"], world["docs"]

        def principal() -> Principal:
            return Principal.user(rng.choice(users), tenant)

        single = measure(
            "can_read_document (1 doc)", lambda s: can_read_document(s, principal(), rng.choice(docs)), args.samples
        )
        batch = measure(
            "filter_readable_documents (100)",
            lambda s: filter_readable_documents(s, principal(), rng.sample(docs, 100)),
            args.samples,
        )
        search = measure(
            "filter_readable_documents search",
            lambda s: filter_readable_documents(s, principal(), rng.sample(docs, 100), for_search=True),
            args.samples,
        )
        scope = measure("readable_scope", lambda s: readable_scope(s, principal()), args.samples)
        chunks = measure("chunk_access_many (100)", lambda s: chunk_access_many(s, rng.sample(docs, 100)), args.samples)

        def refused(fn):  # an access a random person may not have: NotFound/PermissionDenied is an answer
            def run(s):
                s.expunge_all()  # a request's session starts empty: the fetch is a real query
                try:
                    fn(s)
                except (NotFound, PermissionDenied):
                    pass

            return run

        acc_doc = measure(
            "access_document", refused(lambda s: access_document(s, principal(), rng.choice(docs))), args.samples
        )
        acc_kb = measure(
            "access_knowledge_base",
            refused(lambda s: access_knowledge_base(s, principal(), rng.choice(world["kbs"]))),
            args.samples,
        )
        acc_ws = measure(
            "access_workspace",
            refused(lambda s: access_workspace(s, principal(), rng.choice(world["workspaces"]))),
            args.samples,
        )
        figures = {
            "documents": len(docs),
            "users": len(users),
            "single_p50_ms": single["p50_ms"],
            "single_p95_ms": single["p95_ms"],
            "single_queries": single["queries"],
            "batch100_p50_ms": batch["p50_ms"],
            "batch100_p95_ms": batch["p95_ms"],
            "batch100_queries": batch["queries"],
            "search100_p95_ms": search["p95_ms"],
            "scope_p50_ms": scope["p50_ms"],
            "scope_p95_ms": scope["p95_ms"],
            "scope_queries": scope["queries"],
            "chunk_access100_p95_ms": chunks["p95_ms"],
            "chunk_access100_queries": chunks["queries"],
            "access_document_p95_ms": acc_doc["p95_ms"],
            "access_document_queries": acc_doc["queries"],
            "access_kb_p95_ms": acc_kb["p95_ms"],
            "access_kb_queries": acc_kb["queries"],
            "access_workspace_p95_ms": acc_ws["p95_ms"],
            "access_workspace_queries": acc_ws["queries"],
            # the machine's load while measuring: figures on a shared box are upper bounds
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
        }
        engine.dispose()
        print(json.dumps(figures))
    finally:
        if svc is not None:
            svc.stop()  # type: ignore[attr-defined]
            shutil.rmtree(os.environ["OPENKB_HOME"], ignore_errors=True)  # the one _start_database made


if __name__ == "__main__":
    main()
