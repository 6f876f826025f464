"""Every auth/admin operation documents its error responses with the one error shape."""

from __future__ import annotations

MINE = ("/api/auth/", "/api/me/", "/api/admin/users", "/api/admin/auth-settings", "/api/admin/audit-logs")


def test_error_responses_documented(http):
    spec = http.get("/api/openapi.json").json()
    assert "ErrorBody" in spec["components"]["schemas"]
    seen = 0
    for path, ops in spec["paths"].items():
        if not path.startswith(MINE):
            continue
        for method, op in ops.items():
            seen += 1
            errors = {code: r for code, r in op["responses"].items() if code[0] in "45"}
            assert errors, f"{method.upper()} {path} documents no error response"
            for code, r in errors.items():
                ref = r["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorBody"), (method, path, code, ref)
            if op.get("requestBody") or op.get("parameters"):
                assert "422" in errors, f"{method.upper()} {path} takes input but doesn't document 422"
    assert seen >= 19


def test_login_tenant_selection(http, committed):
    from tests.api.helpers import PASSWORD, make_login_user
    from tests.factories import make_tenant

    with committed() as s:
        t = make_tenant(s)
        s.commit()
    a = make_login_user(committed, t)
    r = http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD, "tenant": t.slug})
    assert r.status_code == 200 and r.json()["tenant_id"] == str(t.id)
    r = http.post("/api/auth/login", json={"email": a.email, "password": PASSWORD, "tenant": "default"})
    assert r.status_code == 401 and r.json()["error"] == "INVALID_CREDENTIALS"  # not a member there
