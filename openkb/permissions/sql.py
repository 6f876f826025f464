"""The read rule of ``rules.py`` as a PostgreSQL predicate, for listings that must stop at N.

``filter_documents`` decides in Python after a query picked candidates, so a listing of "the
first N readable" has to over-fetch and can still come up short when many candidates are
hidden. ``READABLE_CTES`` computes the same decision inside the statement: the caller defines a
CTE ``rp_candidates(id)`` (the documents it is about to list) and joins ``rp_readable(id)``,
which holds exactly those of them that ``rules.allows(viewer, place(...), Action.READ)`` accepts
for a *user* principal; ``ORDER BY ... LIMIT n`` then returns the first N readable ones
directly. Other principal kinds (anonymous, share links, keys, system) get no rows: use the
Python service for them.

The rules mirrored here (docs/permissions.md, the summary in README.md):

* the user is active and a member of the principal's tenant, and the principal has a read
  scope (checked in Python: ``rp_enabled``); roles and workspace membership count only when
  the knowledge base is of that tenant;
* placement: the parent chain reaches a root without leaving the document's knowledge base,
  and the knowledge base is of the document's tenant (a missing parent or a loop places
  nothing);
* region: the nearest custom ancestor-or-self, else the knowledge base; its role is the best
  grant (the user's rows and their groups' rows) on the region, raised to manager by an
  owner/manager grant on the knowledge base or an outer custom ancestor;
* a region is open with a role, or when its visibility (the nearest custom ancestor-or-self
  that sets one, else the knowledge base's) is ``public``, or ``workspace`` for an
  owner/admin/member of the workspace;
* the folder gate (docs/permissions.md#the-folder-gate-rule): every outer custom ancestor's
  region must be open too;
* status: the most hidden one on the path; published for everyone, draft and archived with
  editor or above.

Trap: this is a second spelling of the rules, so it is proven equal to them:
tests/permissions/test_readable_sql.py checks, for every principal of random permission worlds,
that ``rp_readable`` equals the oracle's and the service's read decision on every document. A
change to ``rules.py``'s read rule must change this file in the same commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.types import Boolean
from sqlmodel import Session

from openkb.permissions.principal import Principal

# Longest parent chain followed: far beyond the folder depth limit; a loop stops here unrooted.
MAX_DEPTH = 1000

_RANK = "CASE {r} WHEN 'viewer' THEN 1 WHEN 'editor' THEN 2 WHEN 'manager' THEN 3 WHEN 'owner' THEN 4 ELSE 0 END"
_SEVERITY = "CASE {s} WHEN 'published' THEN 0 WHEN 'draft' THEN 1 WHEN 'archived' THEN 2 ELSE 3 END"

READABLE_CTES = f"""
rp_viewer AS (
    SELECT (:rp_enabled
            AND coalesce((SELECT u.status = 'active' FROM users u WHERE u.id = :rp_user), false)
            AND EXISTS (SELECT 1 FROM tenant_memberships tm
                         WHERE tm.tenant_id = :rp_tenant AND tm.user_id = :rp_user)) AS active
),
rp_subjects AS (
    SELECT 'user' AS t, u.id FROM users u WHERE u.id = :rp_user
    UNION ALL
    SELECT 'group', gm.group_id FROM group_members gm JOIN groups g ON g.id = gm.group_id
     WHERE gm.user_id = :rp_user AND g.tenant_id = :rp_tenant
),
rp_grants AS (
    SELECT c.object_type, c.object_id, max({_RANK.format(r="c.role")}) AS rnk
      FROM rp_subjects su JOIN collaborators c ON c.subject_type = su.t AND c.subject_id = su.id
     WHERE c.tenant_id = :rp_tenant
  GROUP BY c.object_type, c.object_id
),
rp_members AS (
    SELECT DISTINCT wm.workspace_id FROM workspace_members wm
     WHERE wm.user_id = :rp_user AND wm.tenant_id = :rp_tenant AND wm.role IN ('owner', 'admin', 'member')
),
rp_path AS (
    SELECT d.id AS doc_id, d.id AS node_id, d.parent_id, d.knowledge_base_id AS kb_id, d.tenant_id,
           d.status, d.permission_mode AS mode, d.visibility, 0 AS depth
      FROM documents d WHERE d.id IN (SELECT id FROM rp_candidates)
    UNION ALL
    SELECT p.doc_id, d.id, d.parent_id, d.knowledge_base_id, d.tenant_id,
           d.status, d.permission_mode, d.visibility, p.depth + 1
      FROM rp_path p JOIN documents d ON d.id = p.parent_id
     WHERE p.depth < {MAX_DEPTH}
),
rp_doc AS (
    SELECT p0.doc_id, k.visibility AS kb_vis,
           v.active,
           (v.active AND k.tenant_id = :rp_tenant) AS same,
           k.tenant_id = p0.tenant_id
             AND (SELECT bool_or(p.parent_id IS NULL) AND bool_and(p.kb_id = p0.kb_id)
                    FROM rp_path p WHERE p.doc_id = p0.doc_id) AS placed,
           (SELECT max({_SEVERITY.format(s="p.status")}) FROM rp_path p WHERE p.doc_id = p0.doc_id) AS sev,
           (SELECT g.rnk FROM rp_grants g WHERE g.object_type = 'knowledge_base' AND g.object_id = k.id) AS kb_rnk,
           EXISTS (SELECT 1 FROM rp_members m WHERE m.workspace_id = k.workspace_id) AS member
      FROM rp_path p0 JOIN knowledge_bases k ON k.id = p0.kb_id CROSS JOIN rp_viewer v
     WHERE p0.depth = 0
),
rp_custom AS (
    SELECT p.doc_id, p.node_id, p.depth, p.visibility, g.rnk AS own_rnk
      FROM rp_path p LEFT JOIN rp_grants g ON g.object_type = 'document' AND g.object_id = p.node_id
     WHERE p.mode = 'custom'
),
rp_region AS (
    -- one row per custom ancestor-or-self: the region it heads, as seen by the principal
    SELECT c.doc_id, c.depth,
           CASE WHEN NOT x.same THEN NULL
                WHEN x.kb_rnk >= 3 OR EXISTS (SELECT 1 FROM rp_custom o
                                               WHERE o.doc_id = c.doc_id AND o.depth > c.depth AND o.own_rnk >= 3)
                     THEN greatest(coalesce(c.own_rnk, 0), 3)
                ELSE c.own_rnk END AS rnk,
           coalesce((SELECT o.visibility FROM rp_custom o
                      WHERE o.doc_id = c.doc_id AND o.depth >= c.depth AND o.visibility IS NOT NULL
                      ORDER BY o.depth LIMIT 1), x.kb_vis) AS vis,
           x.same AND x.member AS member
      FROM rp_custom c JOIN rp_doc x ON x.doc_id = c.doc_id
),
rp_region_open AS (
    SELECT r.doc_id, r.depth, r.rnk,
           (r.rnk IS NOT NULL OR r.vis = 'public' OR (r.vis = 'workspace' AND r.member)) AS open,
           r.depth = min(r.depth) OVER (PARTITION BY r.doc_id) AS nearest
      FROM rp_region r
),
rp_decision AS (
    SELECT x.doc_id, x.active, x.placed, x.sev,
           CASE WHEN n.doc_id IS NULL THEN CASE WHEN x.same THEN x.kb_rnk END ELSE n.rnk END AS rnk,
           CASE WHEN n.doc_id IS NULL
                THEN (x.same AND x.kb_rnk IS NOT NULL) OR x.kb_vis = 'public'
                     OR (x.kb_vis = 'workspace' AND x.same AND x.member)
                ELSE n.open END AS open,
           NOT EXISTS (SELECT 1 FROM rp_region_open o WHERE o.doc_id = x.doc_id AND NOT o.nearest AND NOT o.open)
               AS gates_open
      FROM rp_doc x LEFT JOIN rp_region_open n ON n.doc_id = x.doc_id AND n.nearest
),
rp_readable AS (
    SELECT d.doc_id AS id FROM rp_decision d
     WHERE d.active AND d.placed AND d.open AND d.gates_open
       AND (d.sev = 0 OR (d.sev IN (1, 2) AND coalesce(d.rnk, 0) >= 2))
)"""

READABLE_BINDS = (
    bindparam("rp_enabled", type_=Boolean()),
    bindparam("rp_user", type_=UUID(as_uuid=False)),
    bindparam("rp_tenant", type_=UUID(as_uuid=False)),
)

# Absent ids are the nil UUID, never NULL (loader.py explains why); no row has it.
_NIL = "00000000-0000-0000-0000-000000000000"


def readable_params(principal: Principal) -> dict[str, Any]:
    """Bind values for ``READABLE_CTES``: a user principal with a read scope, else nothing."""
    p = principal
    enabled = p.kind == "user" and p.user_id is not None and p.tenant_id is not None and p.has_read_scope()
    return {
        "rp_enabled": enabled,
        "rp_user": str(p.user_id) if enabled else _NIL,
        "rp_tenant": str(p.tenant_id) if enabled else _NIL,
    }


_READABLE_SQL = text(
    f"WITH RECURSIVE rp_candidates AS (SELECT unnest(:ids) AS id), {READABLE_CTES} SELECT id FROM rp_readable"
).bindparams(bindparam("ids", type_=ARRAY(UUID(as_uuid=False))), *READABLE_BINDS)


def readable_documents(session: Session, principal: Principal, doc_ids: Iterable[uuid.UUID | str]) -> set[uuid.UUID]:
    """The ids among ``doc_ids`` the principal may read, decided in PostgreSQL (same answer as
    ``filter_documents(..., Action.READ)`` for a user principal; empty for other kinds)."""
    ids = [str(d) for d in doc_ids]
    if not ids:
        return set()
    rows = session.execute(_READABLE_SQL, {"ids": ids, **readable_params(principal)}).all()
    return {uuid.UUID(str(r.id)) for r in rows}


__all__ = ["MAX_DEPTH", "READABLE_BINDS", "READABLE_CTES", "readable_documents", "readable_params"]
