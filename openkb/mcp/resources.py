"""The MCP resources of docs/mcp.md#resources, served as templates only.

``kb://workspace/{id}``, ``kb://knowledge-base/{id}``, ``kb://document/{id}`` and its
``/markdown`` and ``/toc``. There is no static resource list: a large knowledge base is never
enumerated as resources (clients page ``kb_list_documents`` or search instead), and a workspace
or knowledge base resource carries only the first page of its children with the cursor to go on.
Every read goes through the same services as the tools and is audited as ``mcp.resource_read``.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session

from openkb.config import Settings
from openkb.content import knowledge_bases as kb_service
from openkb.content import workspaces as ws_service
from openkb.mcp import tools
from openkb.mcp.audit import audited
from openkb.mcp.caller import McpCaller
from openkb.permissions import access_workspace


def read_workspace(
    session: Session, caller: McpCaller, settings: Settings, workspace_id: uuid.UUID, uri: str
) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require("kb:read")
        acc = access_workspace(session, caller.principal, workspace_id)
        ws = ws_service.workspace_out(acc.workspace, acc.role)
        pg = tools.knowledge_bases_page(session, caller, settings, workspace_id=workspace_id, cursor=None, limit=None)
        return {
            "id": str(ws["id"]),
            "name": ws["name"],
            "slug": ws["slug"],
            "description": ws["description"],
            "role": ws["role"],
            "knowledge_bases": pg.items,
            "knowledge_bases_total": pg.total,
            "next_cursor": pg.next_cursor,
        }, []

    return audited(session, caller, "resource:workspace", run, uri=uri)


def read_knowledge_base(
    session: Session, caller: McpCaller, settings: Settings, kb_id: uuid.UUID, uri: str
) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require("kb:read")
        kb = kb_service.get_knowledge_base(session, caller.principal, kb_id)
        pg = tools.documents_page(
            session, caller, settings, knowledge_base_id=kb_id, parent_id=None, recursive=False, cursor=None, limit=None
        )
        out = {
            "id": str(kb["id"]),
            "workspace_id": str(kb["workspace_id"]),
            "title": kb["title"],
            "description": kb["description"],
            "visibility": kb["visibility"],
            "status": kb["status"],
            "role": kb.get("role"),
            "url": tools.kb_url(settings, kb_id),
            "root_documents": pg.items,
            "root_documents_total": pg.total,
            "next_cursor": pg.next_cursor,
        }
        return out, [d["id"] for d in pg.items]

    return audited(session, caller, "resource:knowledge-base", run, uri=uri)


def read_document(
    session: Session, caller: McpCaller, settings: Settings, document_id: uuid.UUID, uri: str
) -> dict[str, Any]:
    return tools.get_document(session, caller, settings, document_id=document_id, tool="resource:document", uri=uri)


def read_markdown(session: Session, caller: McpCaller, settings: Settings, document_id: uuid.UUID, uri: str) -> str:
    """The body up to ``MCP_MAX_RESPONSE_CHARS``; a longer one ends with a comment naming the
    tool call that reads the rest."""
    part = tools.get_markdown(session, caller, settings, document_id=document_id, tool="resource:markdown", uri=uri)
    text = part["markdown"]
    if part["next_offset"] is not None:
        text += (
            f"\n\n<!-- truncated: {part['remaining_chars']} more characters; call kb_get_document_markdown "
            f"with document_id={document_id} offset={part['next_offset']} -->\n"
        )
    return str(text)


def read_toc(
    session: Session, caller: McpCaller, settings: Settings, document_id: uuid.UUID, uri: str
) -> dict[str, Any]:
    return tools.get_toc(session, caller, settings, document_id=document_id, tool="resource:toc", uri=uri)
