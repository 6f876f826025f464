"""What a share-link visitor sees: the linked document (with its visible subtree) or the
knowledge base with its tree, read as the link's principal.

Opening a link (token, expiry, login/membership conditions, password, rate limit, audit) is
``openkb.permissions.share_links.open_share_link``; this module only adds the stateless
share-access token (``share_access``) as a stand-in for the password on later reads.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session

from openkb.audit import record_audit
from openkb.content import share_access, tree
from openkb.content.documents import get_document
from openkb.errors import NotFound
from openkb.models import KnowledgeBase, ShareLink
from openkb.permissions import Principal
from openkb.permissions.share_links import ShareLinkAccess, open_share_link


def open_link(
    session: Session,
    token: str,
    *,
    viewer: Principal | None,
    secret: str,
    access_token: str | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> ShareLinkAccess:
    """Open a link; a valid share-access token counts as the password. ``raise_for_status()``
    on the result gives the visitor (failures were recorded and raised by ``open_share_link``)."""
    acc = open_share_link(session, token, password=None, viewer=viewer, ip=ip, user_agent=user_agent)
    if acc.status == "password_required" and share_access.verify(secret, access_token, acc.link.id):
        user_id = viewer.user_id if viewer is not None and viewer.kind == "user" else None
        principal = Principal.share_link(acc.link, user_id=user_id)
        record_audit(
            session,
            tenant_id=acc.link.tenant_id,
            actor=principal,
            action="share_link.open",
            object_type=acc.link.object_type,
            object_id=acc.link.object_id,
            ip=ip,
            user_agent=user_agent,
            metadata={"share_link_id": acc.link.id, "via": "share_access_token"},
        )
        return ShareLinkAccess("ok", acc.link, principal)
    return acc


def link_out(link: ShareLink) -> dict[str, Any]:
    return {
        "id": link.id,
        "object_type": link.object_type,
        "object_id": link.object_id,
        "permission": link.permission,
        "has_password": link.password_hash is not None,
        "require_login": link.require_login,
        "restrict_to_workspace_members": link.restrict_to_workspace_members,
        "expires_at": link.expires_at,
        "revoked_at": link.revoked_at,
        "created_by": link.created_by,
        "created_at": link.created_at,
    }


def _public_doc(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("capabilities", "created_by", "updated_by", "index_error")}


def shared_object(session: Session, principal: Principal, link: ShareLink) -> dict[str, Any]:
    out: dict[str, Any] = {"link": link_out(link), "document": None, "knowledge_base": None, "tree": []}
    if link.object_type == "knowledge_base":
        kb = session.get(KnowledgeBase, link.object_id)
        if kb is None:
            raise NotFound("share link not found")
        out["knowledge_base"] = {"id": kb.id, "title": kb.title, "description": kb.description}
        out["tree"] = tree.get_tree(session, principal, kb.id)
    else:
        out["document"] = _public_doc(get_document(session, principal, link.object_id))
        out["tree"] = tree.get_subtree(session, principal, link.object_id)
    return out


def shared_document(session: Session, principal: Principal, doc_id: uuid.UUID) -> dict[str, Any]:
    """A document inside the shared subtree (404 for anything the link does not open)."""
    return _public_doc(get_document(session, principal, doc_id))
