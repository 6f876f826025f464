"""One ``audit_logs`` row per MCP tool call and resource read (docs/mcp.md#audit).

The row names the user (``actor_user_id``), the client (OAuth ``client_id`` or ``pat:<id>``),
the tool or resource, the query, the document ids returned, and the outcome; ip and user agent
come from the unit of work's origin (``openkb.audit.set_origin``, set by ``server/mcp``). A
refused call (not found, invalid argument, missing scope) is recorded too, in a transaction of
its own (``openkb.db.record_then_refuse``), since the refusal rolls the call's own unit of work
back. Calls the SDK refuses before a service runs (an argument of the wrong JSON type) leave no
row: nothing was read.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sqlmodel import Session

from openkb.audit import record_audit
from openkb.db import record_then_refuse
from openkb.errors import OpenKBError
from openkb.mcp.caller import McpCaller

MAX_AUDITED_IDS = 200
MAX_AUDITED_QUERY = 500

Runner = Callable[[], tuple[dict[str, Any], list[str]]]


def _row(
    session: Session,
    caller: McpCaller,
    tool: str,
    *,
    query: str | None,
    document_ids: list[str],
    document_id: uuid.UUID | None,
    uri: str | None,
    outcome: str,
    extra: Mapping[str, Any] | None,
) -> None:
    meta: dict[str, Any] = {
        "tool": tool,
        "client_id": caller.client_id,
        "client_name": caller.client_name,
        "credential": caller.credential,
        "credential_id": caller.credential_id,
        "outcome": outcome,
        "document_ids": document_ids[:MAX_AUDITED_IDS],
        "returned": len(document_ids),
    }
    if query is not None:
        meta["query"] = query[:MAX_AUDITED_QUERY]
    if uri is not None:
        meta["uri"] = uri
    meta.update({k: v for k, v in (extra or {}).items() if v is not None})
    record_audit(
        session,
        tenant_id=caller.principal.tenant_id,
        actor=caller.principal,
        action="mcp.resource_read" if uri is not None else "mcp.tool_call",
        object_type="document" if document_id is not None else None,
        object_id=document_id,
        metadata=meta,
    )


def audited(
    session: Session,
    caller: McpCaller,
    tool: str,
    run: Runner,
    *,
    query: str | None = None,
    document_id: uuid.UUID | None = None,
    uri: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``run`` (which returns the result and the document ids it hands out) and record it."""
    kw = {"query": query, "document_id": document_id, "uri": uri, "extra": extra}
    try:
        result, ids = run()
    except OpenKBError as exc:
        code = exc.code
        record_then_refuse(session, lambda s: _row(s, caller, tool, document_ids=[], outcome=code, **kw), exc)
    _row(session, caller, tool, document_ids=ids, outcome="ok", **kw)
    return result
