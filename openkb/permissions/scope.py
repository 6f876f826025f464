"""Search-side permission data: each chunk's access fields and each principal's readable scope.

Two forms, both derived here and nowhere else:

* ``access_principals`` / ``resolve_readable_principals_for_milvus`` — the token form of
  docs/permissions.md#search-scope. A chunk carries tokens naming *who may read it* in terms of objects
  (``kb:<id>:viewer``, ``doc:<custom id>:editor``, ``workspace:<id>:member``, ``public``); a
  principal's tokens name what it holds. Readable candidates = chunks sharing a token.
  Collaborator and membership changes therefore never require re-indexing; moves, permission
  mode / visibility / status changes of a document or an ancestor, and KB visibility do.
* ``ReadableScope.filter`` — the same decision over indexed scalar fields (``scope_kb``,
  ``scope_doc``, ``visibility_eff``, ``workspace_id``, ``doc_status``, ``document_id``), which is
  what should run in Milvus: ARRAY filters are unindexed on Milvus Lite.

Both are prefilters: they may admit extra candidates (gates of outer custom folders, archived
knowledge bases, cross-tenant tokens...), never miss a readable one. The final answer is always
``filter_readable_documents(..., for_search=True)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import UUID
from sqlmodel import Session

from openkb.errors import ValidationError
from openkb.models import Document
from openkb.models.enums import CONTENT_ROLES
from openkb.permissions import filters as F
from openkb.permissions import rules
from openkb.permissions.loader import load_snapshot
from openkb.permissions.principal import Principal

_ROLES_UP = tuple(reversed(CONTENT_ROLES))  # viewer, editor, manager, owner


def _roles_upto(role: str) -> list[str]:
    return [r for r in _ROLES_UP if rules.rank(r) <= rules.rank(role)]


# -- chunks -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChunkAccess:
    """The access fields every Milvus row of one document carries.

    ``doc_status`` is the *effective* status (a draft folder makes its pages draft here); store
    it in the row's ``doc_status``. ``scope_doc`` is the nearest custom-mode ancestor-or-self
    document id, or "" when the document inherits from its knowledge base.
    """

    access_principals: list[str]
    scope_doc: str
    visibility_eff: str
    scope_kb: str = ""
    workspace_id: str = ""
    tenant_id: str = ""
    doc_status: str = ""

    def row(self, document_id: uuid.UUID | str) -> dict[str, str]:
        """The scalar fields as a Milvus row would hold them (used to evaluate filters)."""
        return {
            F.TENANT: self.tenant_id,
            F.WORKSPACE: self.workspace_id,
            F.SCOPE_KB: self.scope_kb,
            F.SCOPE_DOC: self.scope_doc,
            F.VISIBILITY: self.visibility_eff,
            F.STATUS: self.doc_status,
            F.DOCUMENT: str(document_id),
        }


def _chunk_access(pl: rules.Placement) -> ChunkAccess:
    kb = pl.kb
    vis = pl.visibility
    tokens: list[str] = []
    if pl.status in ("published", "draft"):
        need = "viewer" if pl.status == "published" else "editor"
        if pl.customs:
            tokens.append(f"doc:{pl.customs[0].id}:{need}")
            tokens.append(f"kb:{kb.id}:manager")
            tokens.extend(f"doc:{c.id}:manager" for c in pl.customs[1:])
        else:
            tokens.append(f"kb:{kb.id}:{need}")
        if pl.status == "published":
            if vis == "public":
                tokens.append("public")
            elif vis == "workspace":
                tokens.append(f"workspace:{kb.workspace_id}:member")
    return ChunkAccess(
        access_principals=tokens,
        scope_doc=pl.customs[0].id if pl.customs else "",
        visibility_eff=vis,
        scope_kb=kb.id,
        workspace_id=kb.workspace_id,
        tenant_id=kb.tenant_id,
        doc_status=pl.status,
    )


def chunk_access_many(session: Session, doc_ids: Iterable[uuid.UUID | str]) -> dict[uuid.UUID, ChunkAccess]:
    """Access fields for many documents in one query; missing/broken documents are left out."""
    ids = list(dict.fromkeys(str(d) for d in doc_ids))
    snap = load_snapshot(session, Principal.system(), doc_ids=ids)
    out: dict[uuid.UUID, ChunkAccess] = {}
    for d in ids:
        pl = rules.place(snap, d)
        if pl is not None:
            out[uuid.UUID(d)] = _chunk_access(pl)
    return out


def chunk_access(session: Session, document: Document | uuid.UUID | str) -> ChunkAccess:
    did = document.id if isinstance(document, Document) else document
    got = chunk_access_many(session, [did])
    if not got:
        # Unplaceable (no such document, broken tree): searchable by nobody.
        return ChunkAccess(access_principals=[], scope_doc="", visibility_eff="private", doc_status="deleted")
    return next(iter(got.values()))


# -- principals ---------------------------------------------------------------------------------

_SCOPE_SQL = text(
    """
WITH RECURSIVE my_groups AS (
    SELECT gm.group_id FROM group_members gm JOIN groups g ON g.id = gm.group_id
    WHERE gm.user_id = :user_id AND g.tenant_id = :tenant_id
),
grants AS (
    SELECT c.object_type, c.object_id, c.role FROM collaborators c
    WHERE c.tenant_id = :tenant_id
      AND ((c.subject_type = 'user' AND c.subject_id = :user_id)
           OR (c.subject_type = 'group' AND c.subject_id IN (SELECT group_id FROM my_groups)))
),
kb_grants AS (
    SELECT g.object_id AS id, g.role FROM grants g
    JOIN knowledge_bases k ON k.id = g.object_id AND k.tenant_id = :tenant_id
    WHERE g.object_type = 'knowledge_base'
),
doc_grants AS (
    SELECT g.object_id AS id, g.role, d.knowledge_base_id AS kb_id FROM grants g
    JOIN documents d ON d.id = g.object_id AND d.tenant_id = :tenant_id AND d.permission_mode = 'custom'
    WHERE g.object_type = 'document'
),
managed AS (
    SELECT d.id, d.knowledge_base_id AS kb_id, d.permission_mode AS mode FROM documents d
    WHERE d.id IN (SELECT id FROM doc_grants WHERE role IN ('owner', 'manager'))
    UNION
    SELECT c.id, c.knowledge_base_id, c.permission_mode FROM documents c
    JOIN managed m ON c.knowledge_base_id = m.kb_id AND c.parent_id = m.id
),
link AS (
    SELECT s.id, s.tenant_id, s.object_type, s.object_id,
           coalesce(lk.workspace_id, ld.workspace_id) AS workspace_id,
           (s.revoked_at IS NULL AND (s.expires_at IS NULL OR s.expires_at > now())) AS valid,
           s.require_login, s.restrict_to_workspace_members
    FROM share_links s
    LEFT JOIN knowledge_bases lk ON s.object_type = 'knowledge_base' AND lk.id = s.object_id
    LEFT JOIN documents ld ON s.object_type = 'document' AND ld.id = s.object_id
    WHERE s.id = :link_id
),
link_tree AS (
    SELECT d.id, d.knowledge_base_id AS kb_id FROM documents d
    JOIN link ON link.object_type = 'document' AND d.id = link.object_id
    UNION
    SELECT c.id, c.knowledge_base_id FROM documents c
    JOIN link_tree t ON c.knowledge_base_id = t.kb_id AND c.parent_id = t.id
    WHERE c.permission_mode <> 'custom'
),
link_up AS (
    SELECT d.id, d.parent_id, d.permission_mode AS mode, d.knowledge_base_id AS kb_id, 0 AS depth
    FROM documents d JOIN link ON link.object_type = 'document' AND d.id = link.object_id
    UNION ALL
    SELECT p.id, p.parent_id, p.permission_mode, p.knowledge_base_id, u.depth + 1
    FROM documents p JOIN link_up u ON p.id = u.parent_id WHERE u.depth < 10000
)
SELECT
    (SELECT u.status = 'active' FROM users u WHERE u.id = :user_id)
        AND EXISTS (SELECT 1 FROM tenant_memberships tm WHERE tm.tenant_id = :tenant_id AND tm.user_id = :user_id)
        AS user_active,
    (SELECT json_agg(json_build_array(wm.workspace_id, wm.role)) FROM workspace_members wm
      WHERE wm.user_id = :user_id AND wm.tenant_id = :tenant_id) AS ws_roles,
    (SELECT json_agg(group_id) FROM my_groups) AS groups,
    (SELECT json_agg(json_build_array(id, role)) FROM kb_grants) AS kb_grants,
    (SELECT json_agg(json_build_array(id, role)) FROM doc_grants) AS doc_grants,
    (SELECT json_agg(id) FROM managed WHERE mode = 'custom') AS managed_docs,
    (SELECT row_to_json(link) FROM link) AS link,
    (SELECT json_agg(id) FROM link_tree) AS link_docs,
    (SELECT json_build_object('kb', (SELECT kb_id FROM link_up WHERE depth = 0),
                              'custom', (SELECT id FROM link_up WHERE mode = 'custom' ORDER BY depth LIMIT 1)))
        AS link_region,
    (SELECT json_build_object('allowed', k.allowed_knowledge_base_ids,
                              'live', k.status = 'active' AND (k.expires_at IS NULL OR k.expires_at > now()))
       FROM dify_api_keys k WHERE k.id = :dify_id AND k.tenant_id = :tenant_id) AS dify
"""
).bindparams(*(bindparam(n, type_=UUID(as_uuid=False)) for n in ("user_id", "tenant_id", "link_id", "dify_id")))


@dataclass(frozen=True)
class ReadableScope:
    """Everything a principal may find in search, as id sets (a superset of the truth).

    A chunk matches when its tenant is ``tenant_id`` and
      - published and: ``visibility_eff`` public (if ``public``) / workspace in ``workspace_ids``
        / inherits from a KB in ``kb_read`` / lies in a custom region in ``doc_read`` /
        inherits from a KB in ``link_kb_ids`` / is one of ``link_doc_ids``; or
      - published or draft and: KB in ``kb_manage`` / region in ``doc_manage`` / inherits from a
        KB in ``kb_edit`` / region in ``doc_edit``.
    A Dify key (``dify_kb_ids`` set) instead matches published chunks of its KBs that inherit
    from the KB or are public.
    """

    tenant_id: str | None
    everything: bool = False
    public: bool = False
    workspace_ids: frozenset[str] = frozenset()
    kb_read: frozenset[str] = frozenset()
    kb_edit: frozenset[str] = frozenset()
    kb_manage: frozenset[str] = frozenset()
    doc_read: frozenset[str] = frozenset()
    doc_edit: frozenset[str] = frozenset()
    doc_manage: frozenset[str] = frozenset()
    link_kb_ids: frozenset[str] = frozenset()
    link_doc_ids: frozenset[str] = frozenset()
    dify_kb_ids: frozenset[str] | None = None
    principals: tuple[str, ...] = field(default=())

    @property
    def filter(self) -> F.Expr:
        if self.everything:
            return F.TRUE
        if not self.tenant_id:
            return F.FALSE
        tenant = F.Eq(F.TENANT, self.tenant_id)
        inherits = F.Eq(F.SCOPE_DOC, "")
        if self.dify_kb_ids is not None:
            return F.all_of(
                tenant,
                F.one_of(F.SCOPE_KB, self.dify_kb_ids),
                F.Eq(F.STATUS, "published"),
                F.any_of(inherits, F.Eq(F.VISIBILITY, "public")),
            )
        published = F.any_of(
            F.Eq(F.VISIBILITY, "public") if self.public else F.FALSE,
            F.all_of(F.Eq(F.VISIBILITY, "workspace"), F.one_of(F.WORKSPACE, self.workspace_ids)),
            F.all_of(inherits, F.one_of(F.SCOPE_KB, self.kb_read | self.link_kb_ids)),
            F.one_of(F.SCOPE_DOC, self.doc_read),
            F.one_of(F.DOCUMENT, self.link_doc_ids),
        )
        editable = F.any_of(
            F.one_of(F.SCOPE_KB, self.kb_manage),
            F.one_of(F.SCOPE_DOC, self.doc_manage | self.doc_edit),
            F.all_of(inherits, F.one_of(F.SCOPE_KB, self.kb_edit)),
        )
        return F.all_of(
            tenant,
            F.any_of(
                F.all_of(F.Eq(F.STATUS, "published"), published),
                F.all_of(F.one_of(F.STATUS, ("published", "draft")), editable),
            ),
        )

    def to_milvus_filter(self, fields: Mapping[str, str] | None = None) -> str:
        """Milvus boolean expression; "" means no filter (system scope only)."""
        return self.filter.to_milvus(fields)

    def matches(self, row: Mapping[str, Any]) -> bool:
        return self.filter.evaluate(row)


def _opt(v: uuid.UUID | None) -> str | None:
    return None if v is None else str(v)


def _grant_tokens(prefix: str, pairs: Iterable[tuple[str, str]]) -> set[str]:
    out: set[str] = set()
    for oid, role in pairs:
        out.update(f"{prefix}:{oid}:{r}" for r in _roles_upto(role))
    return out


def readable_scope(session: Session, principal: Principal) -> ReadableScope:
    """The principal's search scope and Milvus principal tokens, in one query."""
    p = principal
    if p.kind == "system":
        return ReadableScope(tenant_id=None, everything=True)
    tenant = _opt(p.tenant_id)
    if p.kind == "anonymous":
        return ReadableScope(tenant_id=tenant, public=True, principals=("public",))
    row = (
        session.execute(
            _SCOPE_SQL,
            {
                "user_id": _opt(p.user_id),
                "tenant_id": tenant,
                "link_id": _opt(p.share_link_id),
                "dify_id": _opt(p.dify_key_id),
            },
        )
        .mappings()
        .one()
    )
    if p.kind == "dify_key":
        d = row["dify"]
        if d is None or not d["live"]:
            return ReadableScope(tenant_id=tenant, dify_kb_ids=frozenset())
        kbs = frozenset(str(k) for k in d["allowed"] or ()) & frozenset(str(k) for k in p.allowed_kb_ids or ())
        tokens = sorted(f"kb:{k}:viewer" for k in kbs)
        return ReadableScope(tenant_id=tenant, dify_kb_ids=kbs, principals=tuple(tokens + ["public"] if kbs else ()))

    user_active = bool(row["user_active"]) and p.user_id is not None
    ws_roles = {w: r for w, r in row["ws_roles"] or ()} if user_active else {}
    user_part: dict[str, Any] = {}
    tokens: set[str] = set()
    if user_active and p.has_read_scope():
        kb_grants: dict[str, str] = {}
        for k, r in row["kb_grants"] or ():
            kb_grants[k] = rules.best_role(kb_grants.get(k), r) or r
        doc_grants: dict[str, str] = {}
        for d, r in row["doc_grants"] or ():
            doc_grants[d] = rules.best_role(doc_grants.get(d), r) or r
        member_ws = frozenset(w for w, r in ws_roles.items() if r in rules.MEMBER_ROLES)
        user_part = dict(
            public=True,
            workspace_ids=member_ws,
            kb_read=frozenset(kb_grants),
            kb_edit=frozenset(k for k, r in kb_grants.items() if rules.rank(r) >= 2),
            kb_manage=frozenset(k for k, r in kb_grants.items() if rules.rank(r) >= 3),
            doc_read=frozenset(doc_grants),
            doc_edit=frozenset(d for d, r in doc_grants.items() if rules.rank(r) >= 2),
            doc_manage=frozenset(str(d) for d in row["managed_docs"] or ()),
        )
        tokens |= {f"user:{p.user_id}", f"tenant:{tenant}:member", "public"}
        tokens |= {f"group:{g}" for g in row["groups"] or ()}
        tokens |= {f"workspace:{w}:member" for w in member_ws}
        tokens |= _grant_tokens("kb", kb_grants.items()) | _grant_tokens("doc", doc_grants.items())

    if p.kind == "user":
        return ReadableScope(tenant_id=tenant, principals=tuple(sorted(tokens)), **user_part)

    # share-link visitor (maybe also logged in): the link part, plus the user part above.
    link_part: dict[str, Any] = {}
    lk = row["link"]
    if lk is not None:
        facts = rules.LinkFacts(
            id=lk["id"],
            tenant_id=lk["tenant_id"],
            object_type=lk["object_type"],
            object_id=lk["object_id"],
            workspace_id=lk["workspace_id"],
            valid=bool(lk["valid"]),
            require_login=bool(lk["require_login"]),
            restrict_to_workspace_members=bool(lk["restrict_to_workspace_members"]),
        )
        viewer = rules.Viewer(principal=p, user_active=bool(row["user_active"]), ws_roles=ws_roles, link=facts)
        if rules.link_usable(viewer):
            if facts.object_type == "knowledge_base":
                link_part = {"link_kb_ids": frozenset({facts.object_id})}
                tokens.add(f"kb:{facts.object_id}:viewer")
            else:
                link_part = {"link_doc_ids": frozenset(str(d) for d in row["link_docs"] or ())}
                region = row["link_region"] or {}
                if region.get("custom"):
                    tokens.add(f"doc:{region['custom']}:viewer")
                elif region.get("kb"):
                    tokens.add(f"kb:{region['kb']}:viewer")
    return ReadableScope(tenant_id=tenant, principals=tuple(sorted(tokens)), **user_part, **link_part)


def resolve_readable_principals_for_milvus(session: Session, principal: Principal) -> list[str]:
    """docs/permissions.md#search-scope tokens of what ``principal`` holds; match against chunks' access_principals."""
    if principal.kind == "system":
        raise ValidationError("system jobs read everything and never search with principals")
    return list(readable_scope(session, principal).principals)
