"""Login sessions over HTTP: cookie flags, CSRF, logout, suspension, expiry, throttling, reset."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlmodel import select

from openkb.accounts import sessions as sessions_svc
from openkb.models import UserSession
from openkb.models._base import utcnow
from tests.api.helpers import (
    PASSWORD,
    login,
    mailed_token,
    make_login_user,
    outbox_messages,
    unique_email,
)


@pytest.fixture(autouse=True)
def _fresh_ip_bucket(committed):
    """These tests fail logins on purpose; keep them from filling the loopback IP's bucket for
    whatever test runs next."""
    yield
    _clear_bucket(committed, "login:ip:127.0.0.1")


def _raw_cookie_client(base: str, cookie: str, csrf: str | None = None) -> httpx.Client:
    headers = {"Cookie": f"openkb_session={cookie}"}
    if csrf:
        headers["X-CSRF-Token"] = csrf
    return httpx.Client(base_url=base, timeout=30, headers=headers)


def _login_raw(http, email, password=PASSWORD):
    r = http.post("/api/auth/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    return r, r.cookies["openkb_session"], r.json()["csrf_token"]


def test_login_sets_strict_cookie(http, committed):
    a = make_login_user(committed)
    r = http.post("/api/auth/login", json={"email": a.email.upper(), "password": PASSWORD})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["user"]["email"] == a.email and body["csrf_token"]
    set_cookie = r.headers["set-cookie"]
    assert set_cookie.startswith("openkb_session=")
    flags = {p.strip().split("=")[0].lower(): p for p in set_cookie.split(";")}
    assert "httponly" in flags and "path" in flags and flags["path"].strip() == "Path=/"
    assert flags["samesite"].strip().lower() == "samesite=lax"
    assert "secure" not in flags  # APP_BASE_URL is http in tests
    assert "max-age" in flags
    with committed() as s:
        row = s.exec(select(UserSession).where(UserSession.user_id == a.user_id)).one()
        # only a hash of the cookie is stored
        assert row.token_hash != r.cookies["openkb_session"] and len(row.token_hash) == 64


def test_cookie_is_secure_over_https(http, committed, app_ctx, monkeypatch):
    a = make_login_user(committed)
    monkeypatch.setattr(app_ctx.settings, "app_base_url", "https://kb.example.com")
    r = http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD})
    assert r.status_code == 200
    assert "secure" in [p.strip().lower() for p in r.headers["set-cookie"].split(";")]


def test_wrong_password_and_unknown_email_look_the_same(http, committed):
    a = make_login_user(committed)
    r1 = http.post("/api/auth/login", json={"email": a.email, "password": "wrong password!"})
    r2 = http.post("/api/auth/login", json={"email": unique_email(), "password": "wrong password!"})
    assert r1.status_code == r2.status_code == 401
    assert r1.json() == r2.json() and r1.json()["error"] == "INVALID_CREDENTIALS"
    assert "set-cookie" not in r1.headers


@pytest.mark.parametrize(
    "status, code",
    [
        ("pending_email_verification", "EMAIL_NOT_VERIFIED"),
        ("pending_activation", "ACCOUNT_PENDING_ACTIVATION"),
        ("suspended", "ACCOUNT_SUSPENDED"),
        ("deleted", "INVALID_CREDENTIALS"),
    ],
)
def test_non_active_status_refused(http, committed, status, code):
    a = make_login_user(committed, status=status)
    r = http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD})
    assert r.json()["error"] == code
    assert r.status_code == (401 if code == "INVALID_CREDENTIALS" else 403)
    # with a wrong password the status is not revealed
    r = http.post("/api/auth/login", json={"email": a.email, "password": "not the password"})
    assert r.status_code == 401 and r.json()["error"] == "INVALID_CREDENTIALS"


def test_login_bad_input_is_422(http):
    for body in (
        {"email": "x@example.com"},
        {"password": "x"},
        {"email": "e" * 400, "password": "x"},
        {"email": "x@example.com", "password": "p" * 2000},
    ):
        r = http.post("/api/auth/login", json=body)
        assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR", r.text


def test_me_requires_credentials(http):
    r = http.get("/api/auth/me")
    assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED"
    assert r.headers["www-authenticate"] == "Bearer"


def test_me_shows_user_roles_and_csrf(http, committed):
    a = make_login_user(committed, role="tenant_admin")
    with login(http, a.email) as c:
        body = c.get("/api/auth/me").json()
    assert body["user"]["id"] == str(a.user_id) and body["auth_method"] == "session"
    assert body["tenant_roles"] == [{"tenant_id": body["tenant_id"], "tenant_slug": "default", "role": "tenant_admin"}]
    assert body["scopes"] is None and body["csrf_token"] == c.headers["X-CSRF-Token"]


def test_csrf_required_for_cookie_writes(live_server, http, committed):
    a = make_login_user(committed)
    _, cookie, csrf = _login_raw(http, a.email)
    with _raw_cookie_client(live_server, cookie) as c:
        assert c.get("/api/me/tokens").status_code == 200  # safe methods need no token
        r = c.post("/api/me/tokens", json={"name": "n", "scopes": ["kb:read"]})
        assert r.status_code == 403 and r.json()["error"] == "CSRF_FAILED"
        r = c.post("/api/me/tokens", json={"name": "n", "scopes": ["kb:read"]}, headers={"X-CSRF-Token": "nope"})
        assert r.status_code == 403 and r.json()["error"] == "CSRF_FAILED"
        r = c.post("/api/auth/logout")
        assert r.status_code == 403 and r.json()["error"] == "CSRF_FAILED"
    with _raw_cookie_client(live_server, cookie, csrf) as c:
        assert c.post("/api/me/tokens", json={"name": "n", "scopes": ["kb:read"]}).status_code == 201


def test_another_sessions_csrf_token_is_refused(live_server, http, committed):
    a = make_login_user(committed)
    _, cookie1, _ = _login_raw(http, a.email)
    _, _, csrf2 = _login_raw(http, a.email)
    with _raw_cookie_client(live_server, cookie1, csrf2) as c:
        r = c.post("/api/me/tokens", json={"name": "n", "scopes": ["kb:read"]})
        assert r.status_code == 403 and r.json()["error"] == "CSRF_FAILED"


def test_logout_takes_effect_on_next_request(live_server, http, committed):
    a = make_login_user(committed)
    _, cookie, csrf = _login_raw(http, a.email)
    _, other_cookie, _ = _login_raw(http, a.email)
    with _raw_cookie_client(live_server, cookie, csrf) as c:
        assert c.get("/api/auth/me").status_code == 200
        r = c.post("/api/auth/logout")
        assert r.status_code == 204
        assert "openkb_session=" in r.headers.get("set-cookie", "")  # cookie cleared
        r = c.get("/api/auth/me")
        assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED"
        assert c.post("/api/auth/logout").status_code == 204  # idempotent, now anonymous
    with _raw_cookie_client(live_server, other_cookie) as c:
        assert c.get("/api/auth/me").status_code == 200  # only that session ended
    with committed() as s:
        row = s.exec(select(UserSession).where(UserSession.token_hash == _hash(cookie))).one()
        assert row.revoked_at is not None


def _hash(token):
    from openkb.security import hash_token

    return hash_token(token)


def test_expired_session_is_anonymous(live_server, http, committed):
    a = make_login_user(committed)
    _, cookie, _ = _login_raw(http, a.email)
    with committed() as s:
        s.execute(
            text("UPDATE user_sessions SET expires_at = now() - interval '1 second' WHERE token_hash = :h"),
            {"h": _hash(cookie)},
        )
        s.commit()
    with _raw_cookie_client(live_server, cookie) as c:
        assert c.get("/api/auth/me").status_code == 401


def test_garbage_cookie_is_anonymous(live_server):
    with _raw_cookie_client(live_server, "x" * 5000) as c:
        assert c.get("/api/auth/me").status_code == 401
        # an unknown cookie is no credential, so a write isn't a CSRF failure either
        assert c.post("/api/auth/logout").status_code == 204


def test_suspension_takes_effect_on_next_request(live_server, http, committed):
    admin = make_login_user(committed, role="tenant_admin")
    a = make_login_user(committed)
    _, cookie, _ = _login_raw(http, a.email)
    with _raw_cookie_client(live_server, cookie) as uc, login(http, admin.email) as ac:
        assert uc.get("/api/auth/me").status_code == 200
        r = ac.post(f"/api/admin/users/{a.user_id}/suspend")
        assert r.status_code == 200 and r.json()["user"]["status"] == "suspended"
        assert uc.get("/api/auth/me").status_code == 401
        r = http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD})
        assert r.status_code == 403 and r.json()["error"] == "ACCOUNT_SUSPENDED"
        # re-activation does not resurrect the old session; a new login works
        assert ac.post(f"/api/admin/users/{a.user_id}/activate").status_code == 200
        assert uc.get("/api/auth/me").status_code == 401
    with login(http, a.email) as c:
        assert c.get("/api/auth/me").status_code == 200


def test_last_seen_is_throttled(live_server, http, committed):
    a = make_login_user(committed)
    _, cookie, _ = _login_raw(http, a.email)
    old = utcnow() - timedelta(minutes=5)
    with committed() as s:
        s.execute(
            text("UPDATE user_sessions SET last_seen_at = :t WHERE token_hash = :h"), {"t": old, "h": _hash(cookie)}
        )
        s.commit()
    with _raw_cookie_client(live_server, cookie) as c:
        c.get("/api/auth/me")
        with committed() as s:
            seen1 = s.exec(select(UserSession.last_seen_at).where(UserSession.token_hash == _hash(cookie))).one()
        c.get("/api/auth/me")
        with committed() as s:
            seen2 = s.exec(select(UserSession.last_seen_at).where(UserSession.token_hash == _hash(cookie))).one()
    assert seen1 > old + timedelta(minutes=4)
    assert seen2 == seen1  # not rewritten within the minute


# --- throttling ----------------------------------------------------------------------------------


def _clear_bucket(committed, key):
    with committed() as s:
        s.execute(text("DELETE FROM rate_limit_buckets WHERE key = :k"), {"k": key})
        s.commit()


def test_login_rate_limited_per_account(http, committed):
    import time as _time

    if _time.time() % sessions_svc.LOGIN_WINDOW_SECONDS > sessions_svc.LOGIN_WINDOW_SECONDS - 20:
        # fixed windows: keep the burst of failures inside one window
        _time.sleep(sessions_svc.LOGIN_WINDOW_SECONDS + 1 - _time.time() % sessions_svc.LOGIN_WINDOW_SECONDS)
    a = make_login_user(committed)
    key = f"login:acct:{a.email}"
    try:
        for _ in range(sessions_svc.LOGIN_LIMIT_PER_ACCOUNT):
            assert (
                http.post("/api/auth/login", json={"email": a.email, "password": "wrong password"}).status_code == 401
            )
        r = http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD})
        assert r.status_code == 429 and r.json()["error"] == "RATE_LIMITED"
        assert int(r.headers["retry-after"]) > 0
        # the counter lives in PostgreSQL (shared by every replica), not in process memory
        with committed() as s:
            n = s.execute(text("SELECT count FROM rate_limit_buckets WHERE key = :k"), {"k": key}).scalar_one()
        assert n >= sessions_svc.LOGIN_LIMIT_PER_ACCOUNT
    finally:
        _clear_bucket(committed, key)
        _clear_bucket(committed, "login:ip:127.0.0.1")
    assert http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD}).status_code == 200


def test_login_rate_limited_per_ip(http, committed, monkeypatch):
    a = make_login_user(committed)
    key = "login:ip:127.0.0.1"
    _clear_bucket(committed, key)
    monkeypatch.setattr(sessions_svc, "LOGIN_LIMIT_PER_IP", 3)  # the live server runs in this process
    try:
        for _ in range(3):  # failures spread over different accounts
            r = http.post("/api/auth/login", json={"email": unique_email(), "password": "wrong password"})
            assert r.status_code == 401
        r = http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD})
        assert r.status_code == 429 and r.json()["error"] == "RATE_LIMITED"
    finally:
        _clear_bucket(committed, key)


# --- password reset ------------------------------------------------------------------------------


def test_password_reset_flow(live_server, http, committed, test_home):
    a = make_login_user(committed)
    _, cookie, _ = _login_raw(http, a.email)

    unknown = unique_email()
    r = http.post("/api/auth/password-reset/request", json={"email": unknown})
    assert r.status_code == 202
    assert outbox_messages(test_home, unknown) == []

    r2 = http.post("/api/auth/password-reset/request", json={"email": a.email})
    assert r2.status_code == 202 and r2.json() == r.json()  # same answer: no account enumeration
    token = mailed_token(test_home, a.email, "/reset-password")

    r = http.post("/api/auth/password-reset/confirm", json={"token": token, "password": "short"})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
    # the account's own address as its password: refused, and the link still works after it
    own = a.email.split("@")[0] + "!"
    r = http.post("/api/auth/password-reset/confirm", json={"token": token, "password": own})
    assert r.status_code == 422 and r.json()["reason"] == "too_guessable", (own, r.text)
    new_pw = "a brand new password"
    r = http.post("/api/auth/password-reset/confirm", json={"token": token, "password": new_pw})
    assert r.status_code == 200, r.text

    with _raw_cookie_client(live_server, cookie) as c:
        assert c.get("/api/auth/me").status_code == 401  # other sessions killed
    assert http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD}).status_code == 401
    with login(http, a.email, new_pw) as c:
        assert c.get("/api/auth/me").status_code == 200
    r = http.post("/api/auth/password-reset/confirm", json={"token": token, "password": "yet another one"})
    assert r.status_code == 400 and r.json()["error"] == "INVALID_TOKEN"


def test_password_reset_only_latest_link_works(http, committed, test_home):
    a = make_login_user(committed)
    http.post("/api/auth/password-reset/request", json={"email": a.email})
    first = mailed_token(test_home, a.email, "/reset-password")
    http.post("/api/auth/password-reset/request", json={"email": a.email})
    second = mailed_token(test_home, a.email, "/reset-password")
    assert first != second
    r = http.post("/api/auth/password-reset/confirm", json={"token": first, "password": "new password 1"})
    assert r.status_code == 400 and r.json()["error"] == "INVALID_TOKEN"
    r = http.post("/api/auth/password-reset/confirm", json={"token": second, "password": "new password 2"})
    assert r.status_code == 200


def test_password_reset_bad_input(http):
    assert http.post("/api/auth/password-reset/request", json={}).status_code == 422
    r = http.post("/api/auth/password-reset/request", json={"email": "not-an-email"})
    assert r.status_code == 202  # same answer as for any address
    r = http.post("/api/auth/password-reset/confirm", json={"token": "kbreset_nope", "password": "long enough pw"})
    assert r.status_code == 400 and r.json()["error"] == "INVALID_TOKEN"


def test_a_remembered_default_tenant_that_does_not_exist_is_looked_up_again(committed):
    """The first request on a database without a default tenant creates it; a request that then
    fails rolls that back. The id remembered from it named no row: OAuth registrations failed
    with a foreign-key 500 and anonymous visitors read as a tenant that is not there."""
    import uuid

    from openkb.bootstrap import default_tenant
    from server import auth

    with committed() as s:
        real = default_tenant(s).id
        s.commit()
        key = str(s.get_bind().engine.url)
    saved = auth._default_tenant_ids.get(key)
    auth._default_tenant_ids[key] = uuid.uuid4()  # as left by a rolled-back creation
    try:
        with committed() as s:
            assert auth.default_tenant_id(s) == real
            assert auth.default_tenant_id(s) == real  # remembered again
    finally:
        if saved is not None:
            auth._default_tenant_ids[key] = saved


def _burst(n: int, call) -> list[int]:
    """``n`` calls at once from ``n`` threads (a barrier lines them up); their status codes."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    gate = threading.Barrier(n)

    def one(_i: int) -> int:
        gate.wait(timeout=30)
        return call()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def test_parallel_wrong_logins_check_at_most_the_limit(live_server, committed):
    """The attempt is booked before the password is checked (docs/accounts.md#login-and-sessions):
    25 wrong passwords sent at once must not all reach argon2 because none saw the others' count."""
    import time as _time

    window = sessions_svc.LOGIN_WINDOW_SECONDS
    if _time.time() % window > window - 20:  # keep the burst inside one fixed window
        _time.sleep(window + 1 - _time.time() % window)
    a = make_login_user(committed)
    key = f"login:acct:{a.email}"
    try:
        codes = _burst(
            25,
            lambda: (
                httpx.post(
                    live_server + "/api/auth/login", json={"email": a.email, "password": "wrong password"}, timeout=60
                ).status_code
            ),
        )
        assert sorted(set(codes)) == [401, 429], codes
        assert codes.count(401) <= sessions_svc.LOGIN_LIMIT_PER_ACCOUNT, codes
    finally:
        _clear_bucket(committed, key)
        _clear_bucket(committed, "login:ip:127.0.0.1")


def test_a_successful_login_gives_its_booked_attempt_back(http, committed):
    """Only failures count toward the limit: signing in more often than the limit is fine."""
    a = make_login_user(committed)
    key = f"login:acct:{a.email}"
    try:
        for _ in range(sessions_svc.LOGIN_LIMIT_PER_ACCOUNT + 2):
            assert http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD}).status_code == 200
    finally:
        _clear_bucket(committed, key)
