"""What a public endpoint gets (issue 17, docs/api.md#body-limits): each abuse has its stable
error code, none a 5xx, none a traceback in the server log. Huge bodies (413) are in
tests/api/test_body_limit.py."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from urllib.parse import urlparse

import httpx
import pytest


@pytest.fixture()
def no_tracebacks(caplog):
    """The server runs in this process: every log record it writes during the test is here."""
    caplog.set_level(logging.WARNING)
    yield
    bad = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert bad == [], [r.getMessage()[:300] for r in bad]


def test_deeply_nested_json_is_refused_before_parsing(stack, no_tracebacks):
    c = stack.world.c["owner"]
    for depth in (65, 100_000):
        body = '{"query": "x", "filters": {"metadata": {"k": ' + "[" * depth + "]" * depth + "}}}"
        r = c.post("/api/search", content=body.encode(), headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "JSON_TOO_DEEP"
    # brackets inside strings are text, not nesting
    r = c.post("/api/search", json={"query": "[" * 1500})
    assert r.status_code == 200, r.text


def test_invalid_utf8_huge_top_k_and_long_queries_get_their_codes(stack, no_tracebacks):
    c = stack.world.c["owner"]
    r = c.post("/api/search", content=b'{"query": "\xff\xfe\xfa"}', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "INVALID_JSON"
    for top_k in (0, 101, 10**12, 10**40, -1, "many"):
        r = c.post("/api/search", json={"query": "x", "top_k": top_k})
        assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR", (top_k, r.text)
    r = c.post("/api/search", json={"query": "word " * 50_000})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
    r = c.post("/api/search", json={"query": "x", "knowledge_base_ids": ["../../etc/passwd"]})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
    # each named knowledge base goes into the index's filter: 100 at most (retrieval.MAX_SEARCH_KBS)
    many = [str(uuid.uuid4()) for _ in range(20_000)]
    r = c.post("/api/search", json={"query": "x", "knowledge_base_ids": many})
    assert r.status_code == 422 and r.json()["detail"].startswith("knowledge_base_ids: List should have at most 100")
    assert c.post("/api/search", json={"query": "x", "knowledge_base_ids": many[:100]}).status_code == 200


def test_numbers_too_long_to_convert_are_bad_input_on_every_json_endpoint(stack, no_tracebacks):
    """Python's JSON parser refuses integers past 4,300 digits with a ValueError that is not a
    syntax error: each endpoint must still answer with its own bad-input code and a message that
    names the cause (not "not UTF-8"), never a 500."""
    c = stack.world.c["owner"]
    huge = b"9" * 5000
    r = c.post(
        "/api/search", content=b'{"query": "x", "top_k": ' + huge + b"}", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["error"] == "INVALID_JSON", r.text
    assert "more than 4300 digits" in r.json()["detail"]
    r = c.post(
        "/api/auth/login",
        content=b'{"email": "a@example.com", "password": ' + huge + b"}",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"] == "INVALID_JSON", r.text
    # a string of digits is text, not a number: no limit there but the field's own
    r = c.post("/api/search", json={"query": "9" * 1900})
    assert r.status_code == 200, r.text
    # Dify's /retrieval parses its own body: tests/dify/test_retrieval_http.py has the same number


def test_path_tricks_in_ids_are_not_found_or_invalid(stack, no_tracebacks):
    c = stack.world.c["owner"]
    for path in (
        "/api/documents/..%2F..%2Fetc%2Fpasswd",
        "/api/documents/%00",
        "/api/documents/' OR 1=1 --",
        "/api/documents/" + "9" * 5000,
        "/api/knowledge-bases/%2e%2e/documents",
        "/api/documents/00000000-0000-0000-0000-000000000000/../../../../etc/passwd",
    ):
        r = c.get(path)
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])
        assert r.json()["error"] in ("NOT_FOUND", "VALIDATION_ERROR", "BAD_REQUEST", "METHOD_NOT_ALLOWED"), r.text


def test_a_slow_body_is_cut_off_with_408(stack, monkeypatch, no_tracebacks):
    import server.body_limit as bl

    monkeypatch.setattr(bl, "BODY_TIMEOUT_S", 1.0)
    u = urlparse(stack.base)
    with socket.create_connection((u.hostname, u.port), timeout=30) as sock:
        sock.sendall(
            b"POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"email": '
        )
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = sock.recv(4096)  # the server answers without waiting for the other 990 bytes
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), data[:300]
    assert json.loads(body)["error"] == "REQUEST_TIMEOUT"
    # a body that arrives in time still works
    assert httpx.post(stack.base + "/api/auth/login", json={"email": "a@b.c", "password": "x"}).status_code == 401


def _stalled(base: str, head: bytes) -> tuple[bytes, bytes]:
    """Send ``head`` (request line, headers and the first bytes of a body that claims more), then
    nothing; return the answer's head and body (the server must answer without the rest)."""
    u = urlparse(base)
    with socket.create_connection((u.hostname, u.port), timeout=30) as sock:
        sock.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    answer_head, _, body = data.partition(b"\r\n\r\n")
    return answer_head, body


def test_slow_bodies_of_routes_that_stream_their_body_are_cut_off_with_408(stack, monkeypatch, no_tracebacks):
    """/api/uploads and Dify's /retrieval read their body themselves (not buffered by the body
    guard); a trickling body still gets 408 REQUEST_TIMEOUT (Dify's path in Dify's shape too)."""
    import server.body_limit as bl

    monkeypatch.setattr(bl, "BODY_TIMEOUT_S", 1.0)
    token = stack.world.c["owner"].headers["authorization"].encode()
    head, body = _stalled(
        stack.base,
        b"POST /api/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: " + token + b"\r\n"
        b"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 100000\r\n\r\n"
        b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\n',
    )
    assert head.startswith(b"HTTP/1.1 408"), head + body[:300]
    assert json.loads(body)["error"] == "REQUEST_TIMEOUT"
    for path in (b"/retrieval", b"/retrieval/retrieval"):
        head, body = _stalled(
            stack.base,
            b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n" + b'{"knowledge_id": ',
        )
        assert head.startswith(b"HTTP/1.1 408"), head + body[:300]
        answer = json.loads(body)
        assert answer["error"] == "REQUEST_TIMEOUT" and answer["error_code"] == 2002 and answer["error_msg"]
    # bodies that arrive in time are read by the routes as before
    r = stack.world.c["owner"].post("/api/uploads", files={"file": ("a.txt", b"hello", "text/plain")})
    assert r.status_code in (201, 415), r.text  # stored, or refused for its type: read whole either way
    r = httpx.post(stack.base + "/retrieval", json={"knowledge_id": "k", "query": "q"}, headers={"Authorization": "x"})
    assert r.status_code == 403 and r.json()["error_code"] == 1001


def test_login_guessing_stays_limited_across_a_restart(stack, no_tracebacks):
    """The counters live in PostgreSQL (openkb/ratelimit.py): a second app instance over the same
    database (a restarted or another replica's API) refuses the same guesser."""
    from fastapi.testclient import TestClient
    from sqlmodel import Session

    from openkb import ratelimit
    from openkb.accounts.sessions import LOGIN_LIMIT_PER_ACCOUNT, LOGIN_WINDOW_SECONDS
    from server.app import create_app

    restarted = create_app(stack.ctx, queue=stack.queue, warm=False)
    # started once: an app's lifespan (its MCP session manager) runs once per instance, and a
    # second attempt entered it again
    with TestClient(restarted) as c:
        for _attempt in range(3):  # the window is a fixed minute: a boundary between steps resets it
            email = f"guess-{time.monotonic_ns()}@example.com"
            r = httpx.post(stack.base + "/api/auth/login", json={"email": email, "password": "wrong"})
            assert r.status_code == 401
            with Session(stack.ctx.engine) as s:  # the other guesses, counted as the API counts them
                for _ in range(LOGIN_LIMIT_PER_ACCOUNT - 1):
                    ratelimit.hit(s, f"login:acct:{email}", LOGIN_LIMIT_PER_ACCOUNT, LOGIN_WINDOW_SECONDS)
                s.commit()
            here = httpx.post(stack.base + "/api/auth/login", json={"email": email, "password": "wrong"})
            there = c.post("/api/auth/login", json={"email": email, "password": "wrong"})
            if here.status_code == 429 and there.status_code == 429:
                break
    assert here.status_code == 429 and there.status_code == 429, (here.text, there.text)
    assert there.json()["error"] == "RATE_LIMITED" and there.headers["retry-after"]


def test_sessions_per_user_are_capped_and_the_newest_survive(stack, no_tracebacks):
    from sqlalchemy import text
    from sqlmodel import Session

    from openkb.accounts.sessions import MAX_SESSIONS_PER_USER, open_session
    from openkb.bootstrap import default_tenant
    from openkb.models import User
    from tests.api.helpers import make_login_user

    acct = make_login_user(stack.committed)
    tokens = []
    with Session(stack.ctx.engine) as s:
        user = s.get(User, acct.user_id)
        tenant = default_tenant(s)
        for _ in range(MAX_SESSIONS_PER_USER + 5):
            tokens.append(open_session(s, stack.ctx, user=user, tenant_id=tenant.id).token)
            s.commit()
        live = s.execute(
            text("SELECT count(*) FROM user_sessions WHERE user_id = :u AND revoked_at IS NULL"), {"u": acct.user_id}
        ).scalar_one()
    assert live == MAX_SESSIONS_PER_USER
    newest = httpx.get(stack.base + "/api/me/sessions", cookies={"openkb_session": tokens[-1]})
    oldest = httpx.get(stack.base + "/api/me/sessions", cookies={"openkb_session": tokens[0]})
    assert oldest.status_code == 401
    assert newest.status_code == 200, newest.text
    assert len(newest.json()["items"]) == MAX_SESSIONS_PER_USER  # listed, so the user can end them
