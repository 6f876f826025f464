"""The signed-in user's own account over HTTP: profile, password change, sessions."""

from __future__ import annotations

from sqlmodel import select

from openkb.accounts.account import PASSWORD_CHANGE_FAILURES_PER_HOUR
from openkb.models import AuditLog
from tests.api.helpers import PASSWORD, bearer_client, login, make_login_user, make_user_with_pat


def _actions(committed, user_id) -> list[str]:
    with committed() as s:
        return [
            r.action
            for r in s.exec(select(AuditLog).where(AuditLog.object_id == user_id).order_by(AuditLog.created_at))
        ]


def test_profile_sessions_and_password_change(http, committed):
    a = make_login_user(committed)
    with login(http, a.email) as me, login(http, a.email) as other, login(http, a.email) as third:
        r = me.put("/api/me/profile", json={"display_name": "  New Name "})
        assert r.status_code == 200 and r.json()["display_name"] == "New Name"
        r = me.put("/api/me/profile", json={"display_name": "New Name", "time_zone": "Asia/Shanghai"})
        assert r.status_code == 200 and r.json()["time_zone"] == "Asia/Shanghai"
        assert me.put("/api/me/profile", json={"display_name": "New Name"}).json()["time_zone"] == "Asia/Shanghai"
        r = me.put("/api/me/profile", json={"display_name": "New Name", "time_zone": "Nowhere/Atlantis"})
        assert r.status_code == 422 and r.json()["field"] == "time_zone"

        listed = me.get("/api/me/sessions").json()["items"]
        assert len(listed) == 3 and sum(x["current"] for x in listed) == 1
        other_id = next(x["id"] for x in other.get("/api/me/sessions").json()["items"] if x["current"])

        # one session signed out by id; it fails on its next request
        assert me.delete(f"/api/me/sessions/{other_id}").status_code == 204
        assert other.get("/api/auth/me").status_code == 401
        assert me.delete(f"/api/me/sessions/{other_id}").status_code == 404

        # a wrong current password is a field error and changes nothing
        r = me.post("/api/me/password", json={"current_password": "wrong one!", "new_password": "another long pw"})
        assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
        assert third.get("/api/auth/me").status_code == 200

        r = me.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "another long pw"})
        assert r.status_code == 200 and r.json() == {"sessions_revoked": 1}
        assert third.get("/api/auth/me").status_code == 401  # everyone else is signed out
        assert me.get("/api/auth/me").status_code == 200  # the caller stays
        assert [x["current"] for x in me.get("/api/me/sessions").json()["items"]] == [True]
    with login(http, a.email, "another long pw") as again:
        assert again.post("/api/me/sessions/revoke-others").json() == {"sessions_revoked": 1}
    acts = _actions(committed, a.user_id)
    for action in ("user.profile_updated", "auth.session_revoked", "user.password_changed", "auth.sessions_revoked"):
        assert action in acts


def test_someone_elses_session_is_not_found(http, committed):
    a, b = make_login_user(committed), make_login_user(committed)
    with login(http, a.email) as ca, login(http, b.email) as cb:
        b_id = cb.get("/api/me/sessions").json()["items"][0]["id"]
        assert ca.delete(f"/api/me/sessions/{b_id}").status_code == 404
        assert cb.get("/api/auth/me").status_code == 200


def test_token_cannot_manage_password_or_sessions(live_server, committed):
    _, token = make_user_with_pat(committed)
    with bearer_client(live_server, token) as b:
        r = b.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "another long pw"})
        assert r.status_code == 403 and r.json()["error"] == "INSUFFICIENT_SCOPE"
        assert b.post("/api/me/sessions/revoke-others").status_code == 403
        assert b.put("/api/me/profile", json={"display_name": "Token"}).status_code == 403


def test_wrong_current_passwords_are_limited(http, committed):
    """The failure counter survives each refused request's rollback (record_then_refuse)."""
    a = make_login_user(committed)
    with login(http, a.email) as me:
        body = {"current_password": "not the password", "new_password": "another long pw"}
        for _ in range(PASSWORD_CHANGE_FAILURES_PER_HOUR):
            assert me.post("/api/me/password", json=body).status_code == 422
        r = me.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "another long pw"})
        assert r.status_code == 429 and r.json()["error"] == "RATE_LIMITED"


def test_parallel_wrong_current_passwords_check_at_most_the_limit(http, committed):
    """Booked before the check (docs/accounts.md#login-and-sessions): a burst of wrong current
    passwords sent at once gets at most the limit checked, the rest 429."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    a = make_login_user(committed)
    n = PASSWORD_CHANGE_FAILURES_PER_HOUR + 10
    body = {"current_password": "not the password", "new_password": "another long pw"}
    with login(http, a.email) as me:
        gate = threading.Barrier(n)

        def one(_i: int) -> int:
            gate.wait(timeout=30)
            return me.post("/api/me/password", json=body).status_code

        with ThreadPoolExecutor(max_workers=n) as pool:
            codes = list(pool.map(one, range(n)))
    assert sorted(set(codes)) == [422, 429], codes
    assert codes.count(422) <= PASSWORD_CHANGE_FAILURES_PER_HOUR, codes
