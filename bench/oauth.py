"""OAuth access-token check cost (docs/oauth.md#tokens): what /mcp pays per call for an OAuth token.

    python bench/oauth.py [--grants 5000] [--checks 2000]

Builds ``--grants`` users, each with a grant and a live access token (the index a real
deployment searches), mints one more through the real flow (register, consent, code, PKCE
exchange), then times ``verify_access_token`` in its own unit of work (``session_scope``, as the
/mcp gate runs it), interleaved with unknown tokens (the refusal path). Reports p50/p95 in ms and
the statements per check (target: one; p95 <= 2 ms). The last line is a JSON object. Uses
``DATABASE_URL`` if set (a scratch database is created there), else starts pgserver in a
temporary OPENKB_HOME.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


# The scratch-database setup and percentile of the permission benchmark, not a copy of them.
from bench.permissions import _percentile, _start_database  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grants", type=int, default=5000, help="users with a grant and a live token")
    ap.add_argument("--checks", type=int, default=2000, help="token checks to time")
    args = ap.parse_args()
    url, svc = _start_database()
    try:
        from sqlalchemy import event, insert
        from sqlmodel import Session

        from openkb.bootstrap import ensure_instance
        from openkb.config import Settings
        from openkb.db import get_engine, session_scope
        from openkb.errors import Unauthenticated
        from openkb.models import McpOAuthAccessToken, McpOAuthGrant, TenantMembership, User
        from openkb.models._base import utcnow
        from openkb.oauth import clients, grants
        from openkb.oauth.tokens import verify_access_token
        from openkb.permissions.principal import Principal
        from openkb.security import hash_token

        settings = Settings()
        resource = "https://kb.example.com/mcp"
        engine = get_engine(url)
        with Session(engine) as s:
            tenant = ensure_instance(s).tenant
            s.commit()
            client, _ = clients.register_client(
                s, {"client_name": "bench", "redirect_uris": ["http://127.0.0.1/cb"]}, tenant_id=tenant.id
            )
            users = [
                {
                    "id": uuid.uuid4(),
                    "email": f"b{i}-{uuid.uuid4().hex[:6]}@bench.example",
                    "display_name": f"B{i}",
                    "status": "active",
                }
                for i in range(args.grants + 1)
            ]
            s.execute(insert(User), users)
            s.execute(
                insert(TenantMembership),
                [{"id": uuid.uuid4(), "tenant_id": tenant.id, "user_id": u["id"], "role": "member"} for u in users],
            )
            filler = [
                {
                    "id": uuid.uuid4(),
                    "tenant_id": tenant.id,
                    "user_id": u["id"],
                    "client_id": client.id,
                    "scopes": ["kb:read"],
                    "status": "active",
                }
                for u in users[1:]
            ]
            s.execute(insert(McpOAuthGrant), filler)
            later = utcnow() + timedelta(hours=1)
            s.execute(
                insert(McpOAuthAccessToken),
                [
                    {
                        "id": uuid.uuid4(),
                        "tenant_id": tenant.id,
                        "grant_id": g["id"],
                        "scopes": ["kb:read"],
                        "token_hash": hash_token(f"kbat_{secrets.token_urlsafe(32)}"),
                        "resource": resource,
                        "expires_at": later,
                    }
                    for g in filler
                ],
            )
            s.commit()
            # the measured token: minted through the real flow
            principal = Principal.user(users[0]["id"], tenant.id)
            grant = grants.consent(
                s, principal, client, list(clients.DEFAULT_SCOPES), redirect_uri="http://127.0.0.1/cb"
            )
            verifier = secrets.token_urlsafe(48)
            code = grants.issue_code(
                s,
                grant,
                redirect_uri="http://127.0.0.1/cb",
                scopes=list(clients.DEFAULT_SCOPES),
                code_challenge=grants.s256(verifier),
                resource=resource,
            )
            token = grants.exchange_code(
                s,
                settings,
                code=code,
                client_id=client.client_id,
                redirect_uri="http://127.0.0.1/cb",
                code_verifier=verifier,
                resource=resource,
            ).access_token
            s.commit()

        statements: list[int] = []

        def count(*_a: object, **_k: object) -> None:
            statements[-1] += 1

        event.listen(engine, "before_cursor_execute", count)
        ok_ms: list[float] = []
        refused_ms: list[float] = []
        for i in range(args.checks * 2):
            statements.append(0)
            unknown = i % 2 == 1
            t = time.perf_counter()
            with session_scope(engine) as s:
                try:
                    verify_access_token(s, f"kbat_{secrets.token_urlsafe(32)}" if unknown else token, resource=resource)
                except Unauthenticated:
                    pass
            (refused_ms if unknown else ok_ms).append((time.perf_counter() - t) * 1000)
        event.remove(engine, "before_cursor_execute", count)
        result = {
            "bench": "oauth_token_check",
            "grants": args.grants,
            "checks": args.checks,
            "check_p50_ms": round(_percentile(ok_ms, 0.5), 3),
            "check_p95_ms": round(_percentile(ok_ms, 0.95), 3),
            "refused_p50_ms": round(_percentile(refused_ms, 0.5), 3),
            "refused_p95_ms": round(_percentile(refused_ms, 0.95), 3),
            "statements_per_check": max(statements),
            "target_p95_ms": 2.0,
        }
        print(
            f"token check (live): p50 {result['check_p50_ms']} ms, p95 {result['check_p95_ms']} ms; "
            f"unknown token: p50 {result['refused_p50_ms']} ms, p95 {result['refused_p95_ms']} ms; "
            f"{result['statements_per_check']} statement(s) per check"
        )
        print(json.dumps(result))
    finally:
        if svc is not None:
            svc.stop()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
