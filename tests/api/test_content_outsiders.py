"""Every read route, for people who must see nothing: another tenant's user, a workspace guest,
a same-tenant user outside the workspace and an anonymous visitor get 404 or an empty list."""

from __future__ import annotations

import io

from tests.content.http_world import OUTSIDERS


def test_outsiders_see_nothing(w):
    o = w.c["owner"]
    kb = w.kb
    folder = w.doc("F", type="folder")
    page = w.doc("Secret plan", parent_id=folder["id"], markdown="# secret\n")
    keyed = o.put(f"/api/knowledge-bases/{kb['id']}/documents/by-key/k1", json={"title": "K", "markdown": "k\n"})
    assert keyed.status_code == 200
    trashed = w.doc("T")
    o.delete(f"/api/documents/{trashed['id']}")
    up = o.post(
        "/api/uploads",
        data={"document_id": page["id"]},
        files={"file": ("a.png", io.BytesIO(b"\x89PNG fake"), "image/png")},
    )
    assert up.status_code == 201, up.text
    asset = up.json()
    link = o.post(f"/api/objects/document/{page['id']}/share-links", json={"password": "s3cret-pass"}).json()
    vid = page["current_version_id"]
    ws_id = w.ws["id"]

    not_found = [
        f"/api/workspaces/{ws_id}",
        f"/api/workspaces/{ws_id}/members",
        f"/api/knowledge-bases/{kb['id']}",
        f"/api/knowledge-bases/{kb['id']}/tree",
        f"/api/knowledge-bases/{kb['id']}/trash",
        f"/api/knowledge-bases/{kb['id']}/documents/by-key/k1",
        f"/api/documents/{page['id']}",
        f"/api/documents/{folder['id']}",
        f"/api/documents/{trashed['id']}",
        f"/api/documents/{page['id']}/versions",
        f"/api/documents/{page['id']}/versions/{vid}",
        f"/api/documents/{page['id']}/diff",
        f"/api/assets/{asset['id']}",
        f"/api/assets/{asset['id']}/info",
        f"/api/objects/knowledge_base/{kb['id']}/collaborators",
        f"/api/objects/document/{page['id']}/share-links",
    ]
    changes = o.get("/api/changes", params={"knowledge_base_id": kb["id"]}).json()["items"]
    assert changes
    not_found.append(f"/api/changes/{changes[0]['id']}")
    for name in OUTSIDERS:
        c = w.by_name(name)
        for path in not_found:
            r = c.get(path)
            if name == "guest" and path.startswith(f"/api/workspaces/{ws_id}"):
                # a guest is a member of the workspace itself (not of its content): it sees the
                # workspace but not the member list
                assert r.status_code == (403 if path.endswith("/members") else 200), (path, r.text)
                continue
            if name == "anon" and path.endswith(("share-links",)):
                assert r.status_code == 401, (name, path, r.text)  # sign-in required before anything else
                continue
            assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", (name, path, r.status_code, r.text)
        assert kb["id"] not in [k["id"] for k in c.get("/api/knowledge-bases").json()["items"]], name
        assert (ws_id in [x["id"] for x in c.get("/api/workspaces").json()["items"]]) == (name == "guest"), name
        assert c.get("/api/changes", params={"knowledge_base_id": kb["id"]}).json()["items"] == [], name
        assert c.get("/api/changes").json()["items"] == [], name
        # share links without the token, or password links without the password, reveal nothing
        assert c.get("/api/share/kbshare_not-a-token").status_code == 404
        r = c.get(f"/api/share/{link['token']}")
        assert r.status_code == 401 and r.json()["error"] == "SHARE_PASSWORD_REQUIRED"
        assert "secret" not in r.text
        r = c.get(f"/api/share/{link['token']}/assets/{asset['id']}")
        assert r.status_code == 401


def test_write_routes_hide_existence_from_outsiders(w):
    page = w.doc("P", markdown="p\n")
    for name in ("other_tenant", "guest", "outsider"):
        c = w.c[name]
        assert c.put(f"/api/documents/{page['id']}", json={"title": "x"}).status_code == 404
        assert c.delete(f"/api/documents/{page['id']}").status_code == 404
        r = c.post(
            f"/api/documents/{page['id']}/versions",
            json={"base_version_id": page["current_version_id"], "markdown": "x", "markdown_hash": "0" * 64},
        )
        assert r.status_code == 404
        assert c.post(f"/api/documents/{page['id']}/restore/{page['current_version_id']}").status_code == 404
        assert c.post("/api/documents", json={"knowledge_base_id": w.kb["id"], "title": "x"}).status_code == 404
        assert c.put(f"/api/knowledge-bases/{w.kb['id']}", json={"title": "x"}).status_code == 404
        assert c.post(f"/api/objects/document/{page['id']}/share-links", json={}).status_code == 404
        assert c.post(f"/api/documents/{page['id']}/duplicate").status_code == 404
    r = w.anon.put(f"/api/documents/{page['id']}", json={"title": "x"})
    assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED"
    assert w.anon.post(f"/api/documents/{page['id']}/duplicate").status_code == 401
    # the owner's copy: right after it, same body; a reader of the knowledge base may not copy
    r = w.c["owner"].post(f"/api/documents/{page['id']}/duplicate", json={"title": "P, again"})
    assert r.status_code == 201 and r.json()["title"] == "P, again" and r.json()["markdown"] == "p\n", r.text
    r = w.c["member"].post(f"/api/documents/{page['id']}/duplicate")
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED", r.text
    # a folder is copied with what it holds, or not at all
    folder = w.doc("F", type="folder")
    w.doc("Inside", parent_id=folder["id"], markdown="i\n")
    r = w.c["owner"].post(f"/api/documents/{folder['id']}/duplicate")
    assert r.status_code == 422 and r.json()["field"] == "with_children", r.text
    for name in ("other_tenant", "guest", "outsider"):
        assert (
            w.c[name].post(f"/api/documents/{folder['id']}/duplicate", json={"with_children": True}).status_code == 404
        )
    r = w.c["owner"].post(f"/api/documents/{folder['id']}/duplicate", json={"with_children": True})
    assert r.status_code == 201 and (r.json()["title"], r.json()["type"]) == ("F (copy)", "folder"), r.text
    tree = w.c["owner"].get(f"/api/knowledge-bases/{w.kb['id']}/tree").json()["items"]
    assert [i["title"] for i in tree if i["parent_id"] == r.json()["id"]] == ["Inside"]
    # into another knowledge base: there, with its own title; a place an outsider cannot see is 404
    elsewhere = w.new_kb(visibility="private")
    r = w.c["owner"].post(f"/api/documents/{page['id']}/duplicate", json={"knowledge_base_id": elsewhere["id"]})
    assert r.status_code == 201 and (r.json()["knowledge_base_id"], r.json()["title"]) == (elsewhere["id"], "P"), r.text
    r = w.c["member"].post(f"/api/documents/{page['id']}/duplicate", json={"knowledge_base_id": elsewhere["id"]})
    assert r.status_code == 404, r.text
    # under a folder in the trash: named for the owner, who sees it there; 404 for a reader
    binned = w.doc("Binned", type="folder")
    assert w.c["owner"].delete(f"/api/documents/{binned['id']}").status_code == 204
    body = {"knowledge_base_id": w.kb["id"], "title": "x", "parent_id": binned["id"]}
    r = w.c["owner"].post("/api/documents", json=body)
    assert r.status_code == 409 and r.json()["error"] == "DOCUMENT_IN_TRASH" and "Binned" in r.json()["detail"], r.text
    assert w.c["member"].post("/api/documents", json=body).status_code == 404


def test_public_kb_is_readable_anonymously_but_drafts_are_not(w):
    pub = w.new_kb(visibility="public")
    published = w.doc("Open", kb=pub, markdown="# open\n")
    draft = w.doc("Draft", kb=pub, markdown="# wip\n", status="draft")
    ids = {i["id"] for i in w.anon.get(f"/api/knowledge-bases/{pub['id']}/tree").json()["items"]}
    assert published["id"] in ids and draft["id"] not in ids
    assert w.anon.get(f"/api/documents/{published['id']}").json()["markdown"] == "# open\n"
    assert w.anon.get(f"/api/documents/{draft['id']}").status_code == 404
    assert w.c["other_tenant"].get(f"/api/documents/{draft['id']}").status_code == 404


def test_a_shared_page_is_listed_for_the_one_it_was_shared_with_only(w):
    """GET /api/me/shared-documents: the member the owner shared a private page with finds it
    there; every outsider gets an empty list (the anonymous visitor: sign in first)."""
    o = w.c["owner"]
    page = w.doc("Shared plan", markdown="# plan\n")
    r = o.put(f"/api/documents/{page['id']}", json={"permission_mode": "custom", "visibility": "private"})
    assert r.status_code == 200, r.text
    r = o.post(
        f"/api/objects/document/{page['id']}/collaborators",
        json={"subject_id": str(w.users["member"]), "role": "viewer"},
    )
    assert r.status_code == 201, r.text
    got = w.c["member"].get("/api/me/shared-documents").json()["items"]
    assert [(d["id"], d["title"], d["role"]) for d in got] == [(page["id"], "Shared plan", "viewer")]
    assert got[0]["shared_by"]["id"] == str(w.users["owner"]) and got[0]["knowledge_base_id"] == w.kb["id"]
    for name in OUTSIDERS:
        r = w.by_name(name).get("/api/me/shared-documents")
        if name == "anon":
            assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED"
        else:
            assert r.status_code == 200 and r.json()["items"] == [], (name, r.text)
    assert o.get("/api/me/shared-documents").json()["items"] == []
    assert w.c["member"].get("/api/me/shared-documents", params={"limit": 0}).status_code == 422
