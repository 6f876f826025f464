"""The audit log filtered by the actor's email (resolved server-side; an unknown address matches
nothing), rows carrying the actor's email; import jobs listed for their creator
(``GET /api/import-jobs``) and, without file names, for the tenant's administrators
(``GET /api/admin/import-jobs``)."""

from __future__ import annotations

from tests.api.helpers import login, make_login_user
from tests.importing import files


def test_audit_actor_filter_takes_an_email(live_server, committed):
    admin, pending = make_login_user(committed, role="tenant_admin"), make_login_user(committed, status="suspended")
    with login(live_server, admin.email) as a:
        assert a.post(f"/api/admin/users/{pending.user_id}/activate").status_code == 200
        for actor in (admin.email.upper(), str(admin.user_id)):
            r = a.get("/api/admin/audit-logs", params={"actor": actor})
            assert r.status_code == 200, r.text
            items = r.json()["items"]
            assert items and {i["actor_user_id"] for i in items} == {str(admin.user_id)}
            assert {i["actor_email"] for i in items} == {admin.email}
            assert "user.activated" in {i["action"] for i in items}
        r = a.get("/api/admin/audit-logs", params={"actor": "nobody-here@example.com"})
        assert r.status_code == 200 and r.json() == {"items": [], "total": 0, "next_offset": None}


def test_import_jobs_listed_for_creator_and_admin(w):
    admin = make_login_user(w.committed, w.tenant, role="tenant_admin")
    blob = files.zip_of({"secret-plans/Quarterly.md": b"# Quarterly\n\nPrivate.\n"})
    r = w.c["owner"].post(
        "/api/import-jobs", data={"knowledge_base_id": w.kb["id"]}, files=[("file", ("plans.zip", blob))]
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]

    mine = w.c["owner"].get("/api/import-jobs")
    assert mine.status_code == 200, mine.text
    assert job_id in {j["id"] for j in mine.json()["items"]}
    assert job_id not in {j["id"] for j in w.c["member"].get("/api/import-jobs").json()["items"]}
    assert w.c["member"].get("/api/admin/import-jobs").status_code == 403

    with login(w.base, admin.email) as a:
        r = a.get("/api/admin/import-jobs", params={"limit": 5})
        assert r.status_code == 200, r.text
        row = next(j for j in r.json()["items"] if j["id"] == job_id)
        assert row["status"] in ("pending", "running", "succeeded") and row["knowledge_base_id"] == w.kb["id"]
        assert row["created_by"] == str(w.users["owner"]) and row["created_by_email"]
        assert "secret-plans" not in r.text and "plans.zip" not in r.text  # no file names for operators
        assert a.get("/api/admin/import-jobs", params={"status": "bogus"}).status_code == 422
