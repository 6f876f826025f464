"""The user's own facts over MCP (docs/mcp.md#tools, docs/facts.md#mcp): ``kb_facts_lookup``
and ``kb_entities_resolve``, under the ``facts:read`` scope — never granted by default, a
token or OAuth grant must ask for it.

These are the *user's* view (the assistant acting for the person), not an app's: every current
fact about the user or one of their entities, with who said it, and a point lookup of an entity
by one identifier. Like every MCP tool they are audited (``mcp.tool``); the audit row names the
tool, never the values.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session

from openkb.facts import entities as E
from openkb.facts import service as F
from openkb.mcp.audit import audited
from openkb.mcp.caller import McpCaller

SCOPE = "facts:read"


def _s(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return str(v)
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def facts_lookup(
    session: Session, caller: McpCaller, *, subject_id: uuid.UUID | None = None, prefix: str | None = None
) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require(SCOPE)
        rows = F.user_facts(session, caller.principal, subject_id=subject_id, prefix=prefix)
        keep = ("id", "predicate", "value", "object_id", "valid_from", "said_by", "app", "source")
        return {"facts": [{k: _s(r[k]) for k in keep} for r in rows if not r["inferred"]]}, []

    return audited(session, caller, "kb_facts_lookup", run, extra={"prefix": prefix})


def entities_resolve(session: Session, caller: McpCaller, *, kind: str, identifiers: dict[str, str]) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require(SCOPE)
        p = caller.principal
        assert p.user_id is not None and p.tenant_id is not None
        ids = E.clean_identifiers(identifiers)
        ent = E.find(session, p.tenant_id, p.user_id, E.check_kind(kind), ids)
        if ent is None:
            return {"entity": None}, []
        out = {
            "id": str(ent.id),
            "kind": ent.kind,
            "display_name": ent.display_name,
            "identifiers": [{"kind": i["kind"], "value": i["value"]} for i in E.identifiers_of(session, ent.id)],
        }
        return {"entity": out}, []

    return audited(session, caller, "kb_entities_resolve", run, extra={"kind": kind})
