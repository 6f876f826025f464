"""One SQL statement that fetches every fact a batch of permission decisions needs.

Given candidate document ids (and optionally knowledge-base / workspace ids), it returns the
documents with their whole ancestor chain (recursive CTE over ``parent_id``), their knowledge
bases, and the principal's facts restricted to those objects: user status and tenant
membership, workspace roles, collaborator roles (user rows and group rows), the share link and
the Dify key. Deciding is then pure Python (``rules.py``): one round trip per batch, whatever
its size.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlmodel import Session

from openkb.permissions.principal import Principal
from openkb.permissions.rules import DocFacts, KbFacts, LinkFacts, Snapshot, Viewer, best_role

_UUIDS = ARRAY(UUID(as_uuid=False))

# The candidate documents and their whole ancestor chains (the batch form).
_NODES_BATCH = """
nodes AS (
    SELECT d.id, d.parent_id, d.knowledge_base_id AS kb_id, d.workspace_id, d.tenant_id, d.type, d.status,
           d.permission_mode AS mode, d.visibility
    FROM documents d
    WHERE d.id = ANY(:doc_ids || ARRAY(SELECT s.object_id FROM share_links s
                                        WHERE s.id = :link_id AND s.object_type = 'document'))
    UNION
    -- LIMIT 1 keeps this a per-row primary-key lookup (no hash join over the whole table)
    SELECT p.* FROM nodes n CROSS JOIN LATERAL (
        SELECT d.id, d.parent_id, d.knowledge_base_id AS kb_id, d.workspace_id, d.tenant_id, d.type, d.status,
               d.permission_mode AS mode, d.visibility
        FROM documents d WHERE d.id = n.parent_id LIMIT 1) p
)"""

# compact text rows (uuids, enum words and numbers only: ',' and ';' never occur in them)
_DOC_FIELDS = (
    "concat_ws(',', n.id, coalesce(n.parent_id::text, ''), n.kb_id, n.workspace_id, n.tenant_id, "
    "n.type, n.status, n.mode, coalesce(n.visibility, ''))"
)
_DOCS_BATCH = (
    f"(SELECT string_agg({_DOC_FIELDS}, ';') FROM nodes n) AS docs, NULL AS display, NULL AS display_json, "
    "NULL AS strays"
)

# The KB form: every document of one knowledge base, deleted ones included (their status still
# gates what is below them). A whole tree is closed under "parent of", so there is no recursion
# and no ``nodes`` CTE: the listing reads ``documents`` once, in tree order (siblings by
# sort_order, then age, then id: a total order), and also carries what a tree shows (sort order,
# key, title), so a tree is one statement in all. Both aggregates use the very same ORDER BY, so
# record i of one is record i of the other (PostgreSQL 16 sorts once for both). Both are flat
# lists decoded with a single ``split`` each (a 5,000-row tree is 35,000 fields): facts are
# comma-separated (uuids, enum words and numbers only), and free text travels in the second
# aggregate as ``key-or-GS, title`` pairs separated by US; if a title or key holds US, or a key
# is GS itself (``unsafe``), the JSON form is sent instead.
_TREE_ORDER = "ORDER BY n.sort_order, n.created_at, n.id"
# The knowledge base's own id, workspace and tenant are not repeated per row (that halves the
# statement's time); the rare document whose workspace or tenant differs from its knowledge
# base's (which the rules must still refuse) comes in ``strays``.
_KB_DOC_FIELDS = (
    "concat_ws(',', n.id, coalesce(n.parent_id::text, ''), n.type, n.status, n.permission_mode, "
    "coalesce(n.visibility, ''), n.sort_order)"
)
_KB_DOC_WIDTH = 7
_KB_LISTING = f"""
listing AS (
    SELECT string_agg({_KB_DOC_FIELDS}, ',' {_TREE_ORDER}) AS docs,
           string_agg(concat(coalesce(n.external_key, chr(29)), chr(31), n.title), chr(31) {_TREE_ORDER}) AS display,
           coalesce(bool_or(strpos(n.title, chr(31)) > 0 OR strpos(n.external_key, chr(31)) > 0
                            OR n.external_key = chr(29)), false) AS unsafe
    FROM documents n WHERE n.knowledge_base_id = :kb_id
)"""
_DOCS_KB = (
    "(SELECT docs FROM listing) AS docs, "
    "(SELECT CASE WHEN NOT unsafe THEN display END FROM listing) AS display, "
    "(SELECT CASE WHEN unsafe THEN (SELECT json_agg(json_build_array(n.external_key, n.title) "
    f"{_TREE_ORDER}) FROM documents n WHERE n.knowledge_base_id = :kb_id) END FROM listing) AS display_json, "
    "(SELECT string_agg(concat_ws(',', n.id, n.workspace_id, n.tenant_id), ';') "
    " FROM documents n JOIN knowledge_bases k ON k.id = n.knowledge_base_id WHERE n.knowledge_base_id = :kb_id "
    " AND (n.workspace_id <> k.workspace_id OR n.tenant_id <> k.tenant_id)) AS strays"
)

# Everything but the document part is shared by both forms, so the principal's facts (user,
# groups, workspace roles, grants, link, key) are loaded by the very same SQL.
_SNAPSHOT_TEMPLATE = """
WITH RECURSIVE {nodes},
kbs AS (
    SELECT k.id, k.workspace_id, k.tenant_id, k.visibility, k.status,
           -- only a JSON true enables a cell; anything else (missing, "yes", 1) is the default no
           coalesce(k.settings -> 'editor_can_delete' = 'true'::jsonb, false) AS editor_can_delete,
           coalesce(k.settings -> 'editor_can_create_share_links' = 'true'::jsonb, false) AS editor_can_share
    FROM knowledge_bases k
    WHERE {kb_filter}
),
link AS (
    SELECT s.id, s.tenant_id, s.object_type, s.object_id,
           coalesce((SELECT lk.workspace_id FROM knowledge_bases lk WHERE lk.id = s.object_id),
                    (SELECT ld.workspace_id FROM documents ld WHERE ld.id = s.object_id)) AS workspace_id,
           (s.revoked_at IS NULL AND (s.expires_at IS NULL OR s.expires_at > now())) AS valid,
           s.require_login, s.restrict_to_workspace_members
    FROM share_links s WHERE s.id = :link_id
),
subjects AS (
    SELECT 'user' AS t, u.id FROM users u WHERE u.id = :user_id
    UNION ALL
    SELECT 'group', gm.group_id FROM group_members gm JOIN groups g ON g.id = gm.group_id
    WHERE gm.user_id = :user_id AND g.tenant_id = :tenant_id
)
SELECT
    {docs},
    (SELECT json_agg(json_build_array(k.id, k.workspace_id, k.tenant_id, k.visibility, k.status,
                                      k.editor_can_delete, k.editor_can_share)) FROM kbs k) AS kbs,
    (SELECT u.status = 'active' FROM users u WHERE u.id = :user_id)
        AND EXISTS (SELECT 1 FROM tenant_memberships tm WHERE tm.tenant_id = :tenant_id AND tm.user_id = :user_id)
        AS user_active,
    (SELECT json_agg(json_build_array(wm.workspace_id, wm.role)) FROM workspace_members wm
      WHERE wm.user_id = :user_id AND wm.tenant_id = :tenant_id
        AND wm.workspace_id = ANY(ARRAY(SELECT workspace_id FROM kbs) || ARRAY(SELECT workspace_id FROM link)
                                  || :ws_ids)) AS ws_roles,
    (SELECT json_agg(json_build_array(c.object_type, c.object_id, c.role))
       FROM subjects su JOIN collaborators c ON c.subject_type = su.t AND c.subject_id = su.id
      WHERE c.tenant_id = :tenant_id
        AND ((c.object_type = 'knowledge_base' AND c.object_id = ANY(ARRAY(SELECT id FROM kbs)))
             OR (c.object_type = 'document' AND {grant_docs}))) AS grants,
    (SELECT row_to_json(link) FROM link) AS link,
    (SELECT json_build_object('allowed', k.allowed_knowledge_base_ids,
                              'live', k.status = 'active' AND (k.expires_at IS NULL OR k.expires_at > now()))
       FROM dify_api_keys k WHERE k.id = :dify_id AND k.tenant_id = :tenant_id) AS dify
"""

_COMMON_PARAMS = (
    bindparam("ws_ids", type_=_UUIDS),
    bindparam("user_id", type_=UUID(as_uuid=False)),
    bindparam("tenant_id", type_=UUID(as_uuid=False)),
    bindparam("link_id", type_=UUID(as_uuid=False)),
    bindparam("dify_id", type_=UUID(as_uuid=False)),
)

_SNAPSHOT_SQL = text(
    _SNAPSHOT_TEMPLATE.format(
        nodes=_NODES_BATCH,
        docs=_DOCS_BATCH,
        kb_filter="k.id = ANY(ARRAY(SELECT DISTINCT kb_id FROM nodes) || :kb_ids)",
        grant_docs="c.object_id = ANY(ARRAY(SELECT id FROM nodes))",
    )
).bindparams(bindparam("doc_ids", type_=_UUIDS), bindparam("kb_ids", type_=_UUIDS), *_COMMON_PARAMS)

_KB_SNAPSHOT_SQL = text(
    _SNAPSHOT_TEMPLATE.format(
        nodes=_KB_LISTING,
        docs=_DOCS_KB,
        kb_filter="k.id = :kb_id",
        grant_docs="c.object_id IN (SELECT d.id FROM documents d WHERE d.knowledge_base_id = :kb_id)",
    )
).bindparams(bindparam("kb_id", type_=UUID(as_uuid=False)), *_COMMON_PARAMS)


def _ids(values: Iterable[uuid.UUID | str] | None) -> list[str]:
    return [str(v) for v in values or ()]


def _opt(value: uuid.UUID | None) -> str:
    return _NIL if value is None else str(value)


def doc_facts(row: list[Any]) -> DocFacts:
    """From ``[id, parent_id, kb_id, workspace_id, tenant_id, type, status, mode, visibility]``."""
    return DocFacts(row[0], row[1] or None, row[2], row[3], row[4], row[5], row[6], row[7], row[8] or None)


def kb_facts(row: list[Any]) -> KbFacts:
    """From ``[id, workspace_id, tenant_id, visibility, status, editor_can_delete, editor_can_share]``."""
    return KbFacts(row[0], row[1], row[2], row[3], row[4], bool(row[5]), bool(row[6]))


# Absent ids are sent as the nil UUID, never NULL: a NULL parameter lets the planner fold whole
# branches away, which makes every custom plan look cheaper than the cached generic plan, so
# PostgreSQL would re-plan this statement on every call (~1 ms). No row has the nil id.
_NIL = "00000000-0000-0000-0000-000000000000"


def load_snapshot(
    session: Session,
    principal: Principal,
    *,
    doc_ids: Iterable[uuid.UUID | str] = (),
    kb_ids: Iterable[uuid.UUID | str] = (),
    ws_ids: Iterable[uuid.UUID | str] = (),
) -> Snapshot:
    return _load(
        session, principal, _SNAPSHOT_SQL, {"doc_ids": _ids(doc_ids), "kb_ids": _ids(kb_ids), "ws_ids": _ids(ws_ids)}
    )


def load_kb_snapshot(session: Session, principal: Principal, kb_id: uuid.UUID | str) -> Snapshot:
    """The same facts as ``load_snapshot``, for every document of one knowledge base (no
    ancestor walk: the knowledge base holds the whole chain of each of its documents) and the
    knowledge base itself, in one statement. Decide with ``rules.place_tree``."""
    return _load(
        session, principal, _KB_SNAPSHOT_SQL, {"kb_id": str(uuid.UUID(str(kb_id))), "ws_ids": []}, kb_form=True
    )


def _load(
    session: Session, principal: Principal, sql: Any, params: dict[str, Any], *, kb_form: bool = False
) -> Snapshot:
    p = principal
    row = (
        session.execute(
            sql,
            {
                **params,
                "user_id": _opt(p.user_id),
                "tenant_id": _opt(p.tenant_id),
                "link_id": _opt(p.share_link_id),
                "dify_id": _opt(p.dify_key_id),
            },
        )
        .mappings()
        .one()
    )
    kbs = {r[0]: kb_facts(r) for r in row["kbs"] or ()}
    display: list[tuple[str, int, str | None]] | None = None
    if not kb_form:
        docs = {r[0]: doc_facts(r) for r in (x.split(",") for x in (row["docs"] or "").split(";") if x)}
    else:
        docs, display = _kb_documents(row, kbs.get(params["kb_id"]))
    viewer = Viewer(principal=p, user_active=bool(row["user_active"]))
    if p.user_id is not None:
        viewer.ws_roles = {ws: role for ws, role in row["ws_roles"] or ()}
        grants: dict[tuple[str, str], str] = {}
        for otype, oid, role in row["grants"] or ():
            grants[(otype, oid)] = best_role(grants.get((otype, oid)), role) or role
        viewer.grants = grants
    if row["link"] is not None:
        lk = row["link"]
        viewer.link = LinkFacts(
            id=lk["id"],
            tenant_id=lk["tenant_id"],
            object_type=lk["object_type"],
            object_id=lk["object_id"],
            workspace_id=lk["workspace_id"],
            valid=bool(lk["valid"]),
            require_login=bool(lk["require_login"]),
            restrict_to_workspace_members=bool(lk["restrict_to_workspace_members"]),
        )
    if row["dify"] is not None and row["dify"]["live"]:
        allowed = {str(k) for k in row["dify"]["allowed"] or ()}
        if p.allowed_kb_ids is not None:
            allowed &= {str(k) for k in p.allowed_kb_ids}
        viewer.dify_kbs = frozenset(allowed)
    snap = snapshot_of(docs, kbs, viewer)
    snap.display = display
    return snap


def _kb_documents(row: Any, kb: KbFacts | None) -> tuple[dict[str, DocFacts], list[tuple[str, int, str | None]]]:
    """Decode the KB form's listing: the documents' facts in tree order, and per document
    ``(title, sort_order, external_key)`` in the same order."""
    docs: dict[str, DocFacts] = {}
    if not row["docs"] or kb is None:  # no documents; or no knowledge base, so nothing is placed
        return docs, []
    kb_id, ws, tenant = kb.id, kb.workspace_id, kb.tenant_id
    strays = {r[0]: (r[1], r[2]) for r in (x.split(",") for x in (row["strays"] or "").split(";") if x)}
    new = tuple.__new__  # DocFacts(...) without the generated __new__'s Python frame
    fields = iter(row["docs"].split(","))
    rows = zip(*[fields] * _KB_DOC_WIDTH, strict=True)
    if row["display_json"] is not None:
        texts = [(k, t) for k, t in row["display_json"]]
    else:
        flat = iter(row["display"].split("\x1f"))
        texts = zip(flat, flat, strict=True)
    display: list[tuple[str, int, str | None]] = []
    add = display.append
    for (i, parent, type_, status, mode, vis, order), (key, title) in zip(rows, texts, strict=True):
        w, t = strays.get(i, (ws, tenant)) if strays else (ws, tenant)
        docs[i] = new(DocFacts, (i, parent or None, kb_id, w, t, type_, status, mode, vis or None))
        add((title, int(order), None if key == "\x1d" else key))
    return docs, display


def snapshot_of(docs: dict[str, DocFacts], kbs: dict[str, KbFacts], viewer: Viewer) -> Snapshot:
    return Snapshot(docs=docs, kbs=kbs, viewer=viewer)
