"""The change log over HTTP: run ids (given or per request), own vs. managed, revert by run id."""

from __future__ import annotations

from tests.content.http_world import sha


def test_revert_by_run_id(w):
    o = w.c["owner"]
    kb = w.kb["id"]
    keep = w.doc("Keep", markdown="v1\n")
    run = {"X-Run-Id": "nightly-2026-09-29"}
    r = o.post(
        f"/api/documents/{keep['id']}/versions",
        headers=run,
        json={"base_version_id": keep["current_version_id"], "markdown": "v2\n", "markdown_hash": sha("v2\n")},
    )
    assert r.status_code == 201
    run_uuid = r.headers["x-run-id"]
    r2 = o.put(f"/api/knowledge-bases/{kb}/documents/by-key/new", headers=run, json={"title": "New", "markdown": "n\n"})
    assert r2.headers["x-run-id"] == run_uuid
    new_id = r2.json()["document_id"]
    o.put(f"/api/documents/{keep['id']}", headers=run, json={"title": "Renamed", "tags": ["x"]})
    listed = o.get("/api/changes", params={"run_id": "nightly-2026-09-29"}).json()["items"]
    assert len(listed) == 3 and {c["run_id"] for c in listed} == {run_uuid}
    assert [c["op"] for c in listed] == ["document.update", "document.create", "document.save"]
    assert o.get("/api/changes", params={"run_id": run_uuid}).json()["items"] == listed

    r = o.post("/api/changes/revert", json={"run_id": "nightly-2026-09-29"})
    assert r.status_code == 200, r.text
    rev = r.json()
    assert len(rev["reverted"]) == 3 and rev["run_id"] == r.headers["x-run-id"] != run_uuid
    doc = o.get(f"/api/documents/{keep['id']}").json()
    assert doc["title"] == "Keep" and doc["markdown"] == "v1\n" and doc["tags"] == [] and doc["version_no"] == 3
    assert o.get(f"/api/documents/{new_id}").status_code == 404
    assert all(c["status"] == "reverted" for c in o.get("/api/changes", params={"run_id": run_uuid}).json()["items"])
    # the revert is recorded too, and can itself be reverted
    mine = o.get("/api/changes", params={"run_id": rev["run_id"]}).json()["items"]
    assert mine and all(c["after"].get("reverts_change_id") for c in mine)
    again = o.post("/api/changes/revert", json={"run_id": run_uuid}).json()
    assert again["reverted"] == [] and len(again["skipped"]) == 3
    r = o.post("/api/changes/revert", json={"run_id": rev["run_id"]})
    assert r.status_code == 200
    assert o.get(f"/api/documents/{new_id}").json()["markdown"] == "n\n"


def test_change_visibility_and_conflict(w):
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    o.post(
        f"/api/objects/knowledge_base/{kb['id']}/collaborators",
        json={"subject_id": str(w.users["member"]), "role": "editor"},
    )
    mine = w.doc("By member", kb=kb, who="member", markdown="a\n")
    theirs = w.doc("By owner", kb=kb, markdown="b\n")
    member_view = w.c["member"].get("/api/changes").json()["items"]
    assert member_view and {c["actor_id"] for c in member_view} == {str(w.users["member"])}
    owner_view = o.get("/api/changes", params={"knowledge_base_id": kb["id"]}).json()["items"]
    assert {str(w.users["member"]), str(w.users["owner"])} <= {c["actor_id"] for c in owner_view}
    owner_change = next(c for c in owner_view if c["object_id"] == theirs["id"])
    assert w.c["member"].get(f"/api/changes/{owner_change['id']}").status_code == 404
    r = w.c["member"].post("/api/changes/revert", json={"change_id": owner_change["id"]})
    assert r.status_code == 404

    r = w.save(mine, "a2\n", who="member")
    first = r.headers["x-run-id"]
    w.save(mine, "a3\n", base=r.json()["version_id"], who="member")
    r = w.c["member"].post("/api/changes/revert", json={"run_id": first})
    assert r.status_code == 409 and r.json()["error"] == "REVERT_CONFLICT" and r.json()["blocking_change_ids"]
    r = w.c["member"].post("/api/changes/revert", json={})
    assert r.status_code == 422
    r = w.c["member"].post("/api/changes/revert", json={"run_id": "never-used"})
    assert r.status_code == 404


def test_permission_writes_are_recorded_and_revertible(w):
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    run = {"X-Run-Id": "grant-batch"}
    r = o.post(
        f"/api/objects/knowledge_base/{kb['id']}/collaborators",
        headers=run,
        json={"subject_id": str(w.users["member"]), "role": "viewer"},
    )
    assert r.status_code == 201
    link = o.post(f"/api/objects/knowledge_base/{kb['id']}/share-links", headers=run, json={}).json()
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").status_code == 200
    assert w.anon.get(f"/api/share/{link['token']}").status_code == 200
    ops = [c["op"] for c in o.get("/api/changes", params={"run_id": "grant-batch"}).json()["items"]]
    assert ops == ["share_link.create", "collaborator.add"]
    r = o.post("/api/changes/revert", json={"run_id": "grant-batch"})
    assert r.status_code == 200 and len(r.json()["reverted"]) == 2
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
    assert w.anon.get(f"/api/share/{link['token']}").status_code == 404
    undo_run = r.json()["run_id"]
    r = o.post("/api/changes/revert", json={"run_id": undo_run})  # the revoke of the link is final
    assert r.status_code == 422 and r.json()["error"] == "NOT_REVERTIBLE"
