"""Collaborators, invitations (logged-in, through registration, approval, revoke) and read-only
share links (open, password, revoke, subtree, assets) over HTTP."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import httpx
from sqlmodel import select

from openkb.models import AuditLog
from tests.api.helpers import auth_settings_override, unique_email


def _audit_actions(committed, object_id):
    with committed() as s:
        return [a.action for a in s.exec(select(AuditLog).where(AuditLog.object_id == object_id)).all()]


def test_collaborators_and_owner_transfer(w, committed):
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    base = f"/api/objects/knowledge_base/{kb['id']}/collaborators"
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
    r = o.post(base, json={"subject_type": "user", "subject_id": str(w.users["member"]), "role": "editor"})
    assert r.status_code == 201 and r.json()["role"] == "editor"
    collab = r.json()
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").json()["role"] == "editor"
    page = w.doc("P", kb=kb, who="member", markdown="m\n")
    r = o.post(base, json={"subject_type": "user", "subject_id": str(w.users["guest"]), "role": "owner"})
    assert r.status_code == 422  # owner only by creation or transfer
    r = w.c["member"].post(base, json={"subject_id": str(w.users["guest"]), "role": "viewer"})
    assert r.status_code == 403  # an editor can see the KB but not manage collaborators
    listed = o.get(base).json()["items"]
    assert {c["role"] for c in listed} == {"owner", "editor"}
    r = o.put(f"/api/collaborators/{collab['id']}", json={"role": "viewer"})
    assert r.status_code == 200 and r.json()["role"] == "viewer"
    assert w.save(page, "edit\n", who="member").status_code == 403
    assert o.delete(f"/api/collaborators/{collab['id']}").status_code == 204
    assert w.c["member"].get(f"/api/documents/{page['id']}").status_code == 404  # removed -> no access
    actions = _audit_actions(committed, kb["id"])
    assert {"collaborator.add", "collaborator.update", "collaborator.remove"} <= set(actions)
    o.post(base, json={"subject_id": str(w.users["admin"]), "role": "viewer"})
    r = o.post(f"/api/objects/knowledge_base/{kb['id']}/transfer-owner", json={"user_id": str(w.users["admin"])})
    assert r.status_code == 204
    assert w.c["admin"].get(f"/api/knowledge-bases/{kb['id']}").json()["role"] == "owner"
    assert o.get(f"/api/knowledge-bases/{kb['id']}").json()["role"] == "manager"
    assert "owner.transfer" in _audit_actions(committed, kb["id"])


def test_invitation_accept_approve_revoke(w, committed):
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    r = o.post(f"/api/objects/knowledge_base/{kb['id']}/invitations", json={"role": "viewer"})
    assert r.status_code == 201, r.text
    inv = r.json()
    assert inv["token"] and inv["url"].endswith(inv["token"])
    view = w.anon.get(f"/api/invitations/{inv['token']}").json()
    assert view["object_id"] == kb["id"] and view["role"] == "viewer"
    r = w.anon.post(f"/api/invitations/{inv['token']}/accept")
    assert r.status_code == 401
    r = w.c["outsider"].post(f"/api/invitations/{inv['token']}/accept")
    assert r.status_code == 200 and r.json()["status"] == "accepted"
    assert w.c["outsider"].get(f"/api/knowledge-bases/{kb['id']}").json()["role"] == "viewer"

    r = o.post(f"/api/objects/knowledge_base/{kb['id']}/invitations", json={"role": "editor", "require_approval": True})
    gated = r.json()
    r = w.c["member"].post(f"/api/invitations/{gated['token']}/accept")
    assert r.json()["status"] == "awaiting_approval"
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
    reqs = o.get(f"/api/invitations/{gated['id']}/requests").json()["items"]
    assert [q["user_id"] for q in reqs] == [str(w.users["member"])]
    assert (
        w.c["member"]
        .post(f"/api/invitations/{gated['id']}/approve", json={"user_id": str(w.users["member"])})
        .status_code
        == 404
    )
    r = o.post(f"/api/invitations/{gated['id']}/approve", json={"user_id": str(w.users["member"])})
    assert r.status_code == 200 and r.json()["status"] == "accepted"
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").json()["role"] == "editor"

    r = o.post(f"/api/invitations/{inv['id']}/revoke")
    assert r.status_code == 200 and r.json()["status"] == "revoked"
    assert w.anon.get(f"/api/invitations/{inv['token']}").status_code == 404
    r = o.post(f"/api/objects/workspace/{w.ws['id']}/invitations", json={"role": "owner"})
    assert r.status_code == 422
    actions = _audit_actions(committed, kb["id"])
    assert {"invitation.create", "invitation.accept", "invitation.approve", "invitation.revoke"} <= set(actions)


def test_invitation_through_registration(w, committed, live_server):
    o = w.c["owner"]
    r = o.post(f"/api/objects/workspace/{w.ws['id']}/invitations", json={"role": "member"})
    token = r.json()["token"]
    email = unique_email("invitee")
    with auth_settings_override(committed, w.tenant, email_verification_required=False):
        r = w.anon.post(
            f"/api/invitations/{token}/accept",
            json={"account": {"email": email, "password": "correct horse battery staple", "display_name": "Invitee"}},
        )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "accepted"
    members = o.get(f"/api/workspaces/{w.ws['id']}/members").json()["items"]
    assert email in [m["email"] for m in members]


def test_share_links(w, committed):
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    folder = w.doc("Shared folder", kb=kb, type="folder")
    page = w.doc("Shared page", kb=kb, parent_id=folder["id"], markdown="# shared ![x](asset://a)\n")
    hidden = w.doc("Custom secret", kb=kb, parent_id=folder["id"], markdown="# hidden\n")
    o.put(f"/api/documents/{hidden['id']}", json={"permission_mode": "custom", "visibility": "private"})
    draft = w.doc("Draft", kb=kb, parent_id=folder["id"], status="draft")
    outside = w.doc("Outside", kb=kb, markdown="# outside\n")
    up = o.post(
        "/api/uploads",
        data={"document_id": page["id"]},
        files={"file": ("pic.png", io.BytesIO(b"\x89PNGdata"), "image/png")},
    ).json()

    r = o.post(f"/api/objects/document/{folder['id']}/share-links", json={"permission": "edit"})
    assert r.status_code == 422  # read-only links only
    r = w.c["member"].post(f"/api/objects/document/{folder['id']}/share-links", json={})
    assert r.status_code == 404
    r = o.post(f"/api/objects/document/{folder['id']}/share-links", json={})
    assert r.status_code == 201 and r.json()["permission"] == "view"
    link = r.json()
    shared = w.anon.get(f"/api/share/{link['token']}")
    assert shared.status_code == 200, shared.text
    body = shared.json()
    assert body["document"]["id"] == folder["id"]
    ids = {i["id"] for i in body["tree"]}
    assert ids == {folder["id"], page["id"]}  # custom and draft documents stay closed
    r = w.anon.get(f"/api/share/{link['token']}/documents/{page['id']}")
    assert r.status_code == 200 and r.json()["markdown"].startswith("# shared")
    for doc in (hidden, draft, outside):
        assert w.anon.get(f"/api/share/{link['token']}/documents/{doc['id']}").status_code == 404
    r = w.anon.get(f"/api/share/{link['token']}/assets/{up['id']}")
    assert r.status_code == 200 and r.content == b"\x89PNGdata"
    assert w.anon.get(f"/api/assets/{up['id']}").status_code == 404  # not without the link
    # the link never lets anyone write
    assert w.anon.put(f"/api/documents/{page['id']}", json={"title": "x"}).status_code == 401

    r = o.post(f"/api/share-links/{link['id']}/revoke")
    assert r.status_code == 200 and r.json()["revoked_at"]
    assert w.anon.get(f"/api/share/{link['token']}").status_code == 404
    assert {"share_link.create", "share_link.open", "share_link.revoke"} <= set(_audit_actions(committed, folder["id"]))


def test_share_link_password_and_kb_link(w):
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    page = w.doc("P", kb=kb, markdown="# p\n")
    link = o.post(
        f"/api/objects/knowledge_base/{kb['id']}/share-links",
        json={"password": "open sesame", "expires_at": (datetime.now(UTC) + timedelta(days=1)).isoformat()},
    ).json()
    assert link["has_password"] is True
    with httpx.Client(base_url=w.base, timeout=30) as visitor:
        r = visitor.get(f"/api/share/{link['token']}")
        assert r.status_code == 401 and r.json()["error"] == "SHARE_PASSWORD_REQUIRED"
        r = visitor.post(f"/api/share/{link['token']}/verify-password", json={"password": "wrong"})
        assert r.status_code == 403 and r.json()["error"] == "SHARE_PASSWORD_INCORRECT"
        r = visitor.post(f"/api/share/{link['token']}/verify-password", json={"password": "open sesame"})
        assert r.status_code == 200, r.text
        access = r.json()["access_token"]
        r = visitor.get(f"/api/share/{link['token']}")  # the cookie carries the share access
        assert r.status_code == 200 and r.json()["knowledge_base"]["id"] == kb["id"]
        assert page["id"] in {i["id"] for i in r.json()["tree"]}
    r = w.anon.get(f"/api/share/{link['token']}/documents/{page['id']}", headers={"X-Share-Access": access})
    assert r.status_code == 200 and r.json()["markdown"] == "# p\n"
    r = o.post(f"/api/objects/knowledge_base/{w.kb['id']}/share-links", json={"password": "abc"})
    assert r.status_code == 422 and r.json()["field"] == "password"  # three characters fall to guessing
    other = o.post(f"/api/objects/knowledge_base/{w.kb['id']}/share-links", json={"password": "four"}).json()
    r = w.anon.get(f"/api/share/{other['token']}", headers={"X-Share-Access": access})
    assert r.status_code == 401  # an access token opens only its own link


def test_parallel_wrong_share_passwords_check_at_most_the_limit(w):
    """A burst of guesses at once is held to the limit (5 per visitor): each attempt is counted
    before its password is checked. A right password gives its count back, so opening the link
    again and again never locks its visitor out."""
    from concurrent.futures import ThreadPoolExecutor

    from openkb.permissions.share_links import PASSWORD_FAILURES_PER_VISITOR

    limit = PASSWORD_FAILURES_PER_VISITOR[0]
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    link = o.post(f"/api/objects/knowledge_base/{kb['id']}/share-links", json={"password": "open sesame"}).json()
    url = f"/api/share/{link['token']}/verify-password"
    with httpx.Client(base_url=w.base, timeout=30) as visitor:
        for _ in range(limit + 2):
            assert visitor.post(url, json={"password": "open sesame"}).status_code == 200

        def guess(i: int) -> int:
            with httpx.Client(base_url=w.base, timeout=30) as c:
                return c.post(url, json={"password": f"wrong guess {i}"}).status_code

        with ThreadPoolExecutor(max_workers=20) as pool:
            codes = list(pool.map(guess, range(20)))
        assert codes.count(403) <= limit, codes
        assert set(codes) <= {403, 429} and codes.count(429) >= 20 - limit
        assert visitor.post(url, json={"password": "open sesame"}).status_code == 429
