"""Workspaces, knowledge bases, tree, documents and versions over HTTP on real PostgreSQL."""

from __future__ import annotations

from openkb.models import User
from tests.content.http_world import recording_queue, sha


def test_workspaces_and_members(w):
    o = w.c["owner"]
    listed = o.get("/api/workspaces").json()["items"]
    assert [x["id"] for x in listed] == [w.ws["id"]] and listed[0]["role"] == "owner"
    assert w.c["member"].get(f"/api/workspaces/{w.ws['id']}").json()["role"] == "member"
    r = w.c["member"].put(f"/api/workspaces/{w.ws['id']}", json={"name": "mine now"})
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED"
    r = w.c["admin"].put(f"/api/workspaces/{w.ws['id']}", json={"name": "Renamed", "slug": "renamed-space"})
    assert r.status_code == 200 and r.json()["name"] == "Renamed" and r.json()["slug"] == "renamed-space"
    r = o.post("/api/workspaces", json={"name": "dup", "slug": "renamed-space"})
    assert r.status_code == 409 and r.json()["error"] == "ALREADY_EXISTS"
    members = o.get(f"/api/workspaces/{w.ws['id']}/members").json()["items"]
    assert {m["role"] for m in members} == {"owner", "admin", "member", "guest"}
    r = o.post(f"/api/workspaces/{w.ws['id']}/members", json={"user_id": str(w.users["outsider"]), "role": "owner"})
    assert r.status_code == 422  # owner is never granted as a plain membership
    r = o.post(
        f"/api/workspaces/{w.ws['id']}/members", json={"user_id": str(w.users["other_tenant"]), "role": "member"}
    )
    assert r.status_code == 404  # another tenant's user does not exist here
    r = o.put(f"/api/workspaces/{w.ws['id']}/members/{w.users['guest']}", json={"role": "member"})
    assert r.status_code == 200 and r.json()["role"] == "member"
    assert o.delete(f"/api/workspaces/{w.ws['id']}/members/{w.users['guest']}").status_code == 204
    assert w.c["guest"].get(f"/api/workspaces/{w.ws['id']}").status_code == 404


def _audit_actions(committed, object_id):
    from sqlmodel import select

    from openkb.models import AuditLog

    with committed() as s:
        return {a.action for a in s.exec(select(AuditLog).where(AuditLog.object_id == object_id)).all()}


def test_knowledge_bases(w, committed):
    o = w.c["owner"]
    kb = w.kb
    assert kb["role"] == "owner" and "manage" in kb["capabilities"]
    ids = [k["id"] for k in w.c["member"].get("/api/knowledge-bases").json()["items"]]
    assert kb["id"] in ids
    assert kb["id"] not in [k["id"] for k in w.c["guest"].get("/api/knowledge-bases").json()["items"]]
    private = w.new_kb(visibility="private")
    assert private["id"] not in [k["id"] for k in w.c["admin"].get("/api/knowledge-bases").json()["items"]]
    assert w.c["admin"].get(f"/api/knowledge-bases/{private['id']}").status_code == 404  # admin != content reader
    r = w.c["member"].put(f"/api/knowledge-bases/{kb['id']}", json={"title": "x"})
    assert r.status_code == 403
    with recording_queue() as q:
        r = o.put(
            f"/api/knowledge-bases/{kb['id']}",
            json={"visibility": "private", "title": "Renamed KB", "settings": {"editor_can_delete": True}},
        )
        assert r.status_code == 200, r.text
    assert r.json()["visibility"] == "private" and r.json()["settings"]["editor_can_delete"] is True
    assert ("reindex_subtree", {"knowledge_base_id": kb["id"]}) in q.jobs
    assert "permission.knowledge_base.update" in _audit_actions(committed, kb["id"])
    r = o.put(f"/api/knowledge-bases/{kb['id']}", json={"settings": {"embedding_model": "x"}})
    assert r.status_code == 422 and r.json()["error"] == "MODEL_SETTINGS_FORBIDDEN"
    r = w.c["guest"].post("/api/knowledge-bases", json={"workspace_id": w.ws["id"], "title": "g"})
    assert r.status_code == 403
    r = w.c["outsider"].post("/api/knowledge-bases", json={"workspace_id": w.ws["id"], "title": "g"})
    assert r.status_code == 404


def test_model_settings_are_refused_at_any_depth(w):
    """Models and providers are instance-level (docs/permissions.md): a key nested in a dict
    or a list is refused like a top-level one, so no API key is stored and shown to readers."""
    o, kb = w.c["owner"], w.kb
    for settings in (
        {"index": {"embedding_model": "m", "api_key": "sk-123"}},
        {"extra": [{"Provider": "x"}]},
        {"a": {"b": [{"c": {"rerank": "on"}}]}},
    ):
        r = o.put(f"/api/knowledge-bases/{kb['id']}", json={"settings": settings})
        assert r.status_code == 422 and r.json()["error"] == "MODEL_SETTINGS_FORBIDDEN", (settings, r.text)
    assert "sk-123" not in o.get(f"/api/knowledge-bases/{kb['id']}").text


def test_document_permission_settings_are_audited(w, committed):
    page = w.doc("P", markdown="p\n")
    r = w.c["member"].put(f"/api/documents/{page['id']}", json={"permission_mode": "custom"})
    assert r.status_code == 403
    with recording_queue() as q:
        r = w.c["owner"].put(
            f"/api/documents/{page['id']}", json={"permission_mode": "custom", "visibility": "private"}
        )
    assert r.status_code == 200 and r.json()["permission_mode"] == "custom" and r.json()["visibility"] == "private"
    assert ("reindex_subtree", {"document_id": page["id"]}) in q.jobs
    assert "permission.document.update" in _audit_actions(committed, page["id"])
    assert w.c["member"].get(f"/api/documents/{page['id']}").status_code == 404
    r = w.c["owner"].put(f"/api/documents/{page['id']}", json={"status": None})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"


def test_document_crud_move_and_tree(w):
    o = w.c["owner"]
    folder = w.doc("Folder", type="folder")
    assert folder["markdown"] is None and folder["index_status"] == "indexed"
    with recording_queue() as q:
        page = w.doc(
            "页面 Page", parent_id=folder["id"], markdown="# 你好\n\nhello\n", metadata={"src": "test"}, tags=["t1"]
        )
    assert q.jobs == [("index_document", {"document_id": page["id"]})]
    assert page["version_no"] == 1 and page["index_status"] == "pending" and page["status"] == "published"
    assert page["path"] == [{"id": folder["id"], "title": "Folder", "type": "folder"}]
    got = w.c["member"].get(f"/api/documents/{page['id']}").json()
    for k in (
        "id",
        "knowledge_base_id",
        "parent_id",
        "type",
        "title",
        "status",
        "current_version_id",
        "version_no",
        "markdown",
        "metadata",
        "index_status",
        "tags",
        "path",
        "permission_mode",
        "visibility",
        "updated_at",
    ):
        assert k in got
    assert got["markdown"] == "# 你好\n\nhello\n" and got["metadata"] == {"src": "test"}

    second = w.doc("Second", parent_id=folder["id"])
    r = o.put(f"/api/documents/{second['id']}", json={"sort_order": 0})
    assert r.status_code == 200 and r.json()["sort_order"] == 0
    r = o.get(f"/api/knowledge-bases/{w.kb['id']}/tree")
    assert r.headers["content-type"] == "application/json"
    from server.routers.content import TreeOut

    TreeOut.model_validate(r.json())  # the pre-serialized body keeps the documented shape
    assert r.json()["knowledge_base_id"] == w.kb["id"]
    items = r.json()["items"]
    assert all(
        set(i)
        == {"id", "parent_id", "type", "title", "status", "sort_order", "permission_mode", "visibility", "external_key"}
        for i in items
    )
    kids = sorted((i for i in items if i["parent_id"] == folder["id"]), key=lambda i: i["sort_order"])
    assert [k["id"] for k in kids] == [second["id"], page["id"]] and [k["sort_order"] for k in kids] == [0, 1]

    with recording_queue() as q:
        r = o.put(f"/api/documents/{page['id']}", json={"parent_id": None, "title": "Moved"})
    assert r.status_code == 200 and r.json()["parent_id"] is None and r.json()["title"] == "Moved"
    assert ("reindex_subtree", {"document_id": page["id"]}) in q.jobs
    r = o.put(f"/api/documents/{folder['id']}", json={"parent_id": second["id"]})
    assert r.status_code == 422 and r.json()["error"] == "INVALID_MOVE"
    r = w.c["member"].put(f"/api/documents/{page['id']}", json={"title": "nope"})
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED"
    r = o.put(f"/api/documents/{page['id']}", json={"parent_id": "00000000-0000-0000-0000-000000000001"})
    assert r.status_code == 404


def test_save_conflict_identical_hash_and_dialect(w):
    page = w.doc("P", markdown="# v1\n")
    with recording_queue() as q:
        r = w.save(page, "# v2\n")
        assert r.status_code == 201, r.text
    v2 = r.json()
    assert v2["status"] == "created" and v2["version_no"] == 2
    assert q.jobs == [("index_document", {"document_id": page["id"]})]
    got = w.c["owner"].get(f"/api/documents/{page['id']}").json()
    assert got["index_status"] == "pending" and got["current_version_id"] == v2["version_id"]

    r = w.save(page, "# concurrent\n")  # base is still v1
    assert r.status_code == 409
    assert r.json()["error"] == "VERSION_CONFLICT" and r.json()["current_version_id"] == v2["version_id"]

    with recording_queue() as q:
        r = w.save(page, "# v2\n", base=v2["version_id"])
    assert r.status_code == 200 and r.json()["status"] == "unchanged" and r.json()["version_id"] == v2["version_id"]
    assert q.jobs == []
    versions = w.c["owner"].get(f"/api/documents/{page['id']}/versions").json()["items"]
    assert [v["version_no"] for v in versions] == [2, 1]
    # each with its author by display name (never an address) and its length, for the history
    with w.committed() as s:
        owner_name = s.get(User, w.users["owner"]).display_name
    assert [(v["created_by"], v["created_by_name"], v["chars"]) for v in versions] == [
        (str(w.users["owner"]), owner_name, 5),
        (str(w.users["owner"]), owner_name, 5),
    ]
    assert not any("@" in str(value) for v in versions for value in v.values())

    r = w.c["owner"].post(
        f"/api/documents/{page['id']}/versions",
        json={"base_version_id": v2["version_id"], "markdown": "# v3\n", "markdown_hash": sha("# v3 \n")},
    )
    assert r.status_code == 422 and r.json()["error"] == "MARKDOWN_HASH_MISMATCH"
    r = w.save(page, "<script>alert(1)</script>\n", base=v2["version_id"])
    assert r.status_code == 422 and r.json()["error"] == "MARKDOWN_DIALECT_ERROR" and r.json()["line"] == 1
    r = w.save(page, "x\n", base=v2["version_id"], who="member")
    assert r.status_code == 403
    folder = w.doc("F", type="folder")
    r = w.c["owner"].post(
        f"/api/documents/{folder['id']}/versions",
        json={"base_version_id": v2["version_id"], "markdown": "x\n", "markdown_hash": sha("x\n")},
    )
    assert r.status_code == 422 and r.json()["error"] == "NOT_A_PAGE"


def test_versions_get_and_restore(w):
    page = w.doc("P", markdown="# one\n")
    v1 = page["current_version_id"]
    v2 = w.save(page, "# two\n").json()
    one = w.c["member"].get(f"/api/documents/{page['id']}/versions/{v1}").json()
    assert one["markdown"] == "# one\n" and one["version_no"] == 1
    r = w.c["owner"].post(f"/api/documents/{page['id']}/restore/{v1}")
    assert r.status_code == 201 and r.json()["version_no"] == 3
    r = w.c["owner"].post(f"/api/documents/{page['id']}/restore/{v1}")
    assert r.status_code == 200 and r.json()["status"] == "unchanged"
    r = w.c["owner"].post(f"/api/documents/{page['id']}/restore/{v2['version_id']}", json={"base_version_id": v1})
    assert r.status_code == 409 and r.json()["error"] == "VERSION_CONFLICT"
    other = w.doc("Q")
    assert w.c["owner"].get(f"/api/documents/{other['id']}/versions/{v1}").status_code == 404


def test_trash_restore_purge(w):
    o = w.c["owner"]
    folder = w.doc("F", type="folder")
    child = w.doc("C", parent_id=folder["id"], markdown="child\n")
    r = w.c["member"].delete(f"/api/documents/{folder['id']}")
    assert r.status_code == 403
    with recording_queue() as q:
        assert o.delete(f"/api/documents/{folder['id']}").status_code == 204
    assert ("reindex_subtree", {"document_id": folder["id"]}) in q.jobs
    assert w.c["member"].get(f"/api/documents/{child['id']}").status_code == 404
    tree_ids = {i["id"] for i in o.get(f"/api/knowledge-bases/{w.kb['id']}/tree").json()["items"]}
    assert folder["id"] not in tree_ids and child["id"] not in tree_ids
    trash = o.get(f"/api/knowledge-bases/{w.kb['id']}/trash").json()["items"]
    assert [t["id"] for t in trash] == [folder["id"]]
    assert w.c["member"].get(f"/api/knowledge-bases/{w.kb['id']}/trash").json()["items"] == []
    r = o.post(f"/api/trash/{child['id']}/restore")
    assert r.status_code == 422 and r.json()["error"] == "NOT_IN_TRASH"
    r = o.post(f"/api/trash/{folder['id']}/restore")
    assert r.status_code == 200 and r.json()["status"] == "published"
    assert w.c["member"].get(f"/api/documents/{child['id']}").status_code == 200
    r = o.delete(f"/api/trash/{folder['id']}")
    assert r.status_code == 422 and r.json()["error"] == "NOT_IN_TRASH"
    o.delete(f"/api/documents/{folder['id']}")
    r = o.delete(f"/api/trash/{folder['id']}")
    assert r.status_code == 200 and set(r.json()["purged"]) == {folder["id"], child["id"]}
    assert o.get(f"/api/documents/{child['id']}").status_code == 404


def test_place_before_or_after_a_sibling(w):
    """An editor who does not see every sibling places a page by a sibling they see: a position
    counted in their tree would be off by the hidden one (docs/api.md#moving-and-reordering)."""
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    w.grant(kb, "member", "editor")
    folder = w.doc("Shelf", type="folder", kb=kb)
    a, hidden, b, c = (w.doc(t, kb=kb, parent_id=folder["id"], markdown=f"{t}\n") for t in ("A", "Hidden", "B", "C"))
    r = o.put(f"/api/documents/{hidden['id']}", json={"permission_mode": "custom", "visibility": "private"})
    assert r.status_code == 200, r.text
    ed = w.c["member"]

    def order(client) -> list[str]:
        items = client.get(f"/api/knowledge-bases/{kb['id']}/tree").json()["items"]
        by_id = {a["id"]: "A", hidden["id"]: "Hidden", b["id"]: "B", c["id"]: "C"}
        return [by_id[i["id"]] for i in sorted(items, key=lambda i: i["sort_order"]) if i["id"] in by_id]

    assert order(ed) == ["A", "B", "C"] and order(o) == ["A", "Hidden", "B", "C"]
    # C before B: the editor's tree says position 1, which is before Hidden; before_id is exact
    r = ed.put(f"/api/documents/{c['id']}", json={"before_id": b["id"]})
    assert r.status_code == 200, r.text
    assert order(o) == ["A", "Hidden", "C", "B"] and order(ed) == ["A", "C", "B"]
    r = ed.put(f"/api/documents/{a['id']}", json={"after_id": b["id"]})
    assert r.status_code == 200, r.text
    assert order(o) == ["Hidden", "C", "B", "A"]
    assert r.json()["sort_order"] == 3  # renumbered 0..n-1

    # a drop on its own place moves nothing and records no change
    def changes() -> int:
        return sum(len(o.get("/api/changes", params={"object_id": x["id"]}).json()["items"]) for x in (a, b))

    before = changes()
    r = ed.put(f"/api/documents/{a['id']}", json={"after_id": b["id"]})
    assert r.status_code == 200 and r.json()["sort_order"] == 3, r.text
    r = ed.put(f"/api/documents/{b['id']}", json={"before_id": a["id"]})
    assert r.status_code == 200 and order(o) == ["Hidden", "C", "B", "A"]
    assert changes() == before
    # into another parent, beside a page there
    other = w.doc("Other", type="folder", kb=kb)
    inside = w.doc("Inside", kb=kb, parent_id=other["id"], markdown="i\n")
    r = ed.put(f"/api/documents/{b['id']}", json={"parent_id": other["id"], "before_id": inside["id"]})
    assert r.status_code == 200, r.text
    kids = [i for i in o.get(f"/api/knowledge-bases/{kb['id']}/tree").json()["items"] if i["parent_id"] == other["id"]]
    assert [i["id"] for i in sorted(kids, key=lambda i: i["sort_order"])] == [b["id"], inside["id"]]

    # bad anchors: nothing moves
    before = order(o)
    for body, status, field in (
        ({"before_id": hidden["id"]}, 404, None),  # one they cannot read: as any unreadable document
        ({"after_id": inside["id"]}, 422, "after_id"),  # not under the parent it is placed in
        ({"before_id": c["id"]}, 422, "before_id"),  # itself
        ({"before_id": a["id"], "sort_order": 0}, 422, "before_id"),
        ({"before_id": a["id"], "after_id": a["id"]}, 422, "before_id"),
        ({"before_id": "00000000-0000-0000-0000-000000000000"}, 404, None),
    ):
        r = ed.put(f"/api/documents/{c['id']}", json=body)
        assert r.status_code == status, (body, r.text)
        if field:
            assert r.json()["error"] == "VALIDATION_ERROR" and r.json()["field"] == field, r.text
        assert "Hidden" not in r.text
    assert o.delete(f"/api/documents/{a['id']}").status_code == 204
    r = ed.put(f"/api/documents/{c['id']}", json={"after_id": a["id"]})
    assert r.status_code in (404, 422) and "Hidden" not in r.text  # one in the trash
    assert [x for x in order(o) if x != "A"] == [x for x in before if x != "A"]
    # an outsider learns nothing either way
    r = w.c["outsider"].put(f"/api/documents/{c['id']}", json={"before_id": b["id"]})
    assert r.status_code == 404
