"""Access defects found over HTTP, each pinned by a test: who may list collaborators, restores
from the trash, reverts of creations, an archived knowledge base's trash, counts and titles that
named what the caller cannot read, and invitation landing pages (docs/permissions.md)."""

from __future__ import annotations


def _emails(items: list[dict]) -> set:
    return {c.get("subject_email") for c in items} - {None}


def test_collaborators_are_listed_with_emails_for_managers_only(w):
    """docs/permissions.md#collaborators: managing collaborators is for managers. Readers of a
    public knowledge base (anonymous, another tenant), a guest collaborator and a plain reader are
    refused; an editor who may create share links (the share dialog lists the collaborators)
    gets names without emails."""
    o = w.c["owner"]
    kb = w.new_kb(visibility="public")
    base = f"/api/objects/knowledge_base/{kb['id']}/collaborators"
    for name, role in (("admin", "editor"), ("guest", "viewer")):
        r = o.post(base, json={"subject_id": str(w.users[name]), "role": role})
        assert r.status_code == 201, r.text
    page = w.doc("Open", kb=kb, markdown="o\n")
    assert w.anon.get(f"/api/documents/{page['id']}").status_code == 200  # public: anyone reads it

    full = o.get(base)
    assert full.status_code == 200 and len(_emails(full.json()["items"])) == 3, full.text
    for name in ("anon", "other_tenant", "guest", "member"):
        for path in (base, f"/api/objects/document/{page['id']}/collaborators"):
            r = w.by_name(name).get(path)
            assert r.status_code in (403, 404), (name, path, r.status_code, r.text)
            assert "@" not in r.text, (name, path, r.text)

    # an editor without the share capability is refused too; with it, names only
    assert w.c["admin"].get(base).status_code == 403
    r = o.put(f"/api/knowledge-bases/{kb['id']}", json={"settings": {"editor_can_create_share_links": True}})
    assert r.status_code == 200, r.text
    r = w.c["admin"].get(base)
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert len(items) == 3 and _emails(items) == set() and "@" not in r.text
    assert {c["subject_id"] for c in items} == {str(w.users[n]) for n in ("owner", "admin", "guest")}
    assert all(c["subject_name"] for c in items)


def _folder_managed_by_member(w, kb=None):
    """A private custom folder in the workspace-visible knowledge base (or ``kb``), managed by the
    member (who at most reads the knowledge base itself), with a page inside."""
    o = w.c["owner"]
    folder = w.doc("Board room", type="folder", kb=kb)
    r = o.put(f"/api/documents/{folder['id']}", json={"permission_mode": "custom", "visibility": "private"})
    assert r.status_code == 200, r.text
    r = o.post(
        f"/api/objects/document/{folder['id']}/collaborators",
        json={"subject_id": str(w.users["member"]), "role": "manager"},
    )
    assert r.status_code == 201, r.text
    # by the owner: in a private knowledge base the member, who cannot open it, creates nothing
    page = w.doc("Salaries", kb=kb, parent_id=folder["id"], markdown="secret\n")
    return folder, page


def test_restoring_under_a_trashed_folder_needs_the_create_right_at_the_root(w):
    """docs/permissions.md#capability-matrix: a move needs the right to create at the target. A
    restore whose folder is still in the trash would move the page to the root: a folder manager
    who may not create there gets 409 DOCUMENT_IN_TRASH naming the folder, and the page stays in
    the trash, unseen by the workspace."""
    m = w.c["member"]
    folder, page = _folder_managed_by_member(w)
    assert m.delete(f"/api/documents/{page['id']}").status_code == 204
    assert m.delete(f"/api/documents/{folder['id']}").status_code == 204
    r = m.post(f"/api/trash/{page['id']}/restore")
    assert r.status_code == 409 and r.json()["error"] == "DOCUMENT_IN_TRASH", r.text
    assert "Board room" in r.json()["detail"]
    assert w.c["admin"].get(f"/api/documents/{page['id']}").status_code == 404  # still private
    assert page["id"] in {i["id"] for i in m.get(f"/api/knowledge-bases/{w.kb['id']}/trash").json()["items"]}
    # restoring the folder first, then the page, keeps it where it was
    assert m.post(f"/api/trash/{folder['id']}/restore").status_code == 200
    r = m.post(f"/api/trash/{page['id']}/restore")
    assert r.status_code == 200 and r.json()["parent_id"] == folder["id"], r.text
    # the knowledge base's owner may create at the root: there the page goes
    o = w.c["owner"]
    assert o.delete(f"/api/documents/{page['id']}").status_code == 204
    assert o.delete(f"/api/documents/{folder['id']}").status_code == 204
    r = o.post(f"/api/trash/{page['id']}/restore")
    assert r.status_code == 200 and r.json()["parent_id"] is None, r.text


def test_restoring_where_the_restorer_cannot_read_the_root_is_refused_plainly(w):
    """In a private knowledge base the folder's manager cannot even open the root: the restore is
    the same 409 naming the folder, not a restore rolled back into a 404 by the read after it."""
    m = w.c["member"]
    kb = w.new_kb(visibility="private")
    folder, page = _folder_managed_by_member(w, kb)
    assert m.get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
    assert m.delete(f"/api/documents/{page['id']}").status_code == 204
    assert m.delete(f"/api/documents/{folder['id']}").status_code == 204
    r = m.post(f"/api/trash/{page['id']}/restore")
    assert r.status_code == 409 and r.json()["error"] == "DOCUMENT_IN_TRASH", r.text
    assert "Board room" in r.json()["detail"]


def test_reverting_a_creation_needs_the_delete_right(w):
    """docs/api.md: a revert runs through the same services with the same permission checks.
    Undoing a creation removes the page for good, so it needs what DELETE /api/documents/{id}
    needs: an editor of a knowledge base without editor_can_delete may not."""
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    w.grant(kb, "member", "editor")
    m = w.c["member"]
    page = w.doc("Mine", kb=kb, who="member", markdown="m\n")
    assert m.delete(f"/api/documents/{page['id']}").status_code == 403  # editor_can_delete is false
    created = next(c for c in m.get("/api/changes").json()["items"] if c["object_id"] == page["id"])
    assert created["op"] == "document.create"
    r = m.post("/api/changes/revert", json={"change_id": created["id"]})
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED", r.text
    assert o.get(f"/api/documents/{page['id']}").status_code == 200
    # once editors may delete, the revert works
    r = o.put(f"/api/knowledge-bases/{kb['id']}", json={"settings": {"editor_can_delete": True}})
    assert r.status_code == 200, r.text
    r = m.post("/api/changes/revert", json={"change_id": created["id"]})
    assert r.status_code == 200 and len(r.json()["reverted"]) == 1, r.text
    assert o.get(f"/api/documents/{page['id']}").status_code == 404


def test_an_archived_knowledge_base_keeps_its_trash_as_it_is(w):
    """docs/permissions.md#status: an archived knowledge base is read-only. Purge and restore are
    refused as any other write there; the trash still lists what it holds."""
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    kept = w.doc("Kept", kb=kb, markdown="k\n")
    binned = w.doc("Binned", kb=kb, markdown="b\n")
    assert o.delete(f"/api/documents/{binned['id']}").status_code == 204
    r = o.put(f"/api/knowledge-bases/{kb['id']}", json={"status": "archived"})
    assert r.status_code == 200, r.text
    edit = o.put(f"/api/documents/{kept['id']}", json={"title": "x"})
    assert edit.status_code == 403, edit.text  # what any write in an archived knowledge base gets
    for r in (o.post(f"/api/trash/{binned['id']}/restore"), o.delete(f"/api/trash/{binned['id']}")):
        assert (r.status_code, r.json()["error"]) == (edit.status_code, edit.json()["error"]), r.text
    assert [i["id"] for i in o.get(f"/api/knowledge-bases/{kb['id']}/trash").json()["items"]] == [binned["id"]]
    # once active again, the trash works
    assert o.put(f"/api/knowledge-bases/{kb['id']}", json={"status": "active"}).status_code == 200
    assert o.post(f"/api/trash/{binned['id']}/restore").status_code == 200


def test_document_count_counts_what_the_caller_can_read(w):
    """GET /api/knowledge-bases/{id}: document_count leaves out drafts, private pages and pages
    under a folder in the trash the caller cannot read (docs/permissions.md#outsiders-get-404:
    lists leave out what the caller cannot read; a count is a list's length)."""
    o = w.c["owner"]
    kb = w.new_kb(visibility="workspace")
    w.doc("Open", kb=kb, markdown="a\n")
    w.doc("Draft", kb=kb, markdown="d\n", status="draft")
    private = w.doc("Private", kb=kb, markdown="p\n")
    assert (
        o.put(
            f"/api/documents/{private['id']}", json={"permission_mode": "custom", "visibility": "private"}
        ).status_code
        == 200
    )
    binned = w.doc("Binned", kb=kb, type="folder")
    w.doc("Inside", kb=kb, parent_id=binned["id"], markdown="i\n")
    assert o.delete(f"/api/documents/{binned['id']}").status_code == 204
    assert o.get(f"/api/knowledge-bases/{kb['id']}").json()["document_count"] == 3  # not the page in the trash
    r = w.c["member"].get(f"/api/knowledge-bases/{kb['id']}")
    assert r.status_code == 200 and r.json()["document_count"] == 1, r.text
    tree = w.c["member"].get(f"/api/knowledge-bases/{kb['id']}/tree").json()["items"]
    assert len(tree) == 1


def test_home_lists_do_not_name_a_knowledge_base_the_caller_cannot_open(w):
    """A custom page shared from a private knowledge base: the member reads and edits the page,
    but the knowledge base answers 404, so its title is null in the recent and shared lists."""
    o = w.c["owner"]
    kb = w.new_kb(visibility="private", title="Mergers and acquisitions")
    page = w.doc("Shared page", kb=kb, markdown="s\n")
    assert o.put(f"/api/documents/{page['id']}", json={"permission_mode": "custom"}).status_code == 200
    r = o.post(
        f"/api/objects/document/{page['id']}/collaborators",
        json={"subject_id": str(w.users["member"]), "role": "editor"},
    )
    assert r.status_code == 201, r.text
    m = w.c["member"]
    assert m.get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
    assert w.save(page, "edited\n", who="member").status_code in (200, 201)
    recent = m.get("/api/me/recent-documents")
    shared = m.get("/api/me/shared-documents")
    for r in (recent, shared):
        assert r.status_code == 200, r.text
        items = [d for d in r.json()["items"] if d["id"] == page["id"]]
        assert len(items) == 1 and items[0]["knowledge_base_title"] is None, r.text
        assert "Mergers" not in r.text
    # the owner (whose creation was a save too) opens the knowledge base: its title is there
    mine = o.get("/api/me/recent-documents").json()["items"]
    assert [d["knowledge_base_title"] for d in mine if d["id"] == page["id"]] == ["Mergers and acquisitions"]


def test_duplicating_under_a_hidden_parent_is_the_same_404_as_under_a_missing_one(w):
    """docs/permissions.md#outsiders-get-404: a parent the caller cannot see answers exactly as
    one that does not exist (the reply once said "knowledge base not found" for it)."""
    import uuid

    hidden_kb = w.new_kb(visibility="private")
    hidden = w.doc("Hidden", kb=hidden_kb, type="folder")
    page = w.doc("Readable", markdown="m\n")  # the member reads it (workspace-visible)
    m = w.c["member"]
    missing = m.post(f"/api/documents/{page['id']}/duplicate", json={"parent_id": str(uuid.uuid4())})
    got = m.post(f"/api/documents/{page['id']}/duplicate", json={"parent_id": hidden["id"]})
    assert missing.status_code == got.status_code == 404, (missing.text, got.text)
    assert missing.json() == got.json()


def test_a_used_or_expired_invitation_no_longer_names_its_object(w, committed):
    """GET /api/invitations/{token} (anonymous): a forwarded link of an invitation that can no
    longer be accepted (a targeted one accepted, or one past its expiry) does not tell whoever holds
    it what it was for; the page still loads (status) so the invitee can sign in and be told."""
    from datetime import UTC, datetime, timedelta

    from openkb.models import Invitation

    o = w.c["owner"]
    kb = w.new_kb(visibility="private", title="Project Falcon")
    base = f"/api/objects/knowledge_base/{kb['id']}/invitations"
    targeted = o.post(base, json={"role": "viewer", "user_id": str(w.users["member"])}).json()
    link = o.post(base, json={"role": "viewer"}).json()
    for inv in (targeted, link):
        view = w.anon.get(f"/api/invitations/{inv['token']}").json()
        assert view["object_title"] == "Project Falcon", view
    r = w.c["member"].post(f"/api/invitations/{targeted['token']}/accept")
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    with committed() as s:
        row = s.get(Invitation, link["id"])
        row.expires_at = datetime.now(UTC) - timedelta(minutes=1)
        s.add(row)
        s.commit()
    for inv, status in ((targeted, "accepted"), (link, "pending")):
        r = w.anon.get(f"/api/invitations/{inv['token']}")
        assert r.status_code == 200 and r.json()["status"] == status, r.text
        assert r.json()["object_title"] is None and "Falcon" not in r.text, r.text
    # the invitee who follows the link again is told it is theirs already
    r = w.c["member"].post(f"/api/invitations/{targeted['token']}/accept")
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text


def test_a_grant_never_demotes_a_stronger_role(w):
    """docs/permissions.md#collaborators: a grant (POST .../collaborators, what the share panel's
    picker and invitations do) raises a role or leaves it; lowering one is a role change
    (PUT /api/collaborators/{id}, the panel's role select)."""
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    base = f"/api/objects/knowledge_base/{kb['id']}/collaborators"
    first = o.post(base, json={"subject_id": str(w.users["member"]), "role": "manager"})
    assert first.status_code == 201, first.text
    r = o.post(base, json={"subject_id": str(w.users["member"]), "role": "viewer"})
    assert r.status_code == 201 and r.json()["role"] == "manager", r.text
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").json()["role"] == "manager"
    r = o.post(base, json={"subject_id": str(w.users["guest"]), "role": "viewer"})
    r = o.post(base, json={"subject_id": str(w.users["guest"]), "role": "editor"})  # raising is a grant
    assert r.status_code == 201 and r.json()["role"] == "editor", r.text
    r = o.put(f"/api/collaborators/{first.json()['id']}", json={"role": "viewer"})
    assert r.status_code == 200 and r.json()["role"] == "viewer", r.text
