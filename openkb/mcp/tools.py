"""The MCP tools as domain services (docs/mcp.md#tools): ``(session, caller, args) -> dict``.

Each one is a thin composition of services that already decide who sees what: the retrieval
service (``openkb.retrieval.search``), the permission service's ``access_*`` and the content
services' listings (``openkb.content``). Nothing here decides visibility, so what a person sees
through MCP is what they see on the web, and "not found" is the same answer for a missing and a
hidden object. What this module adds is what an MCP client needs on top: caps on the size of
one answer (``Settings.mcp_*``), opaque cursors on every list (``openkb.mcp.pages``), web URLs,
and one ``audit_logs`` row per call (``openkb.mcp.audit``), refused calls included.

Services never commit (the adapter in ``server/mcp`` owns the unit of work).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlmodel import Session

from openkb.config import Settings
from openkb.content import Actor
from openkb.content import documents as doc_service
from openkb.content import knowledge_bases as kb_service
from openkb.content import recent as recent_service
from openkb.content import tree as tree_service
from openkb.content import upsert as upsert_service
from openkb.content import workspaces as ws_service
from openkb.content.compare import compare_versions
from openkb.context import AppContext
from openkb.dify.service import document_url
from openkb.errors import NotFound, OpenKBError, ValidationError
from openkb.markdown.extract import outline
from openkb.mcp import pages
from openkb.mcp.audit import audited
from openkb.mcp.caller import McpCaller
from openkb.permissions.access import DOC_NOT_FOUND, access_workspace
from openkb.retrieval import search_documents as retrieval_search

UNSET: Any = upsert_service.UNSET


def kb_url(settings: Settings, kb_id: Any) -> str:
    return f"{settings.app_base_url.rstrip('/')}/app/kb/{kb_id}"


def doc_url(settings: Settings, kb_id: Any, doc_id: Any) -> str:
    return document_url(settings.app_base_url, kb_id, doc_id)


def _s(v: Any) -> Any:
    """ids and timestamps as JSON strings (structured output is JSON)."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


# --- search --------------------------------------------------------------------------------------


def search(
    ctx: AppContext,
    session: Session,
    caller: McpCaller,
    *,
    query: str,
    knowledge_base_ids: list[uuid.UUID] | None = None,
    top_k: int | None = None,
    filters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Documents the caller may read, best first (docs/retrieval.md#grouped-results): each with
    its best chunk as a bounded snippet, up to two more matching chunks in ``more_snippets``,
    the matched-term ``highlights`` of the snippet, and a web URL. ``top_k`` counts documents.

    ``top_k`` is capped by ``MCP_MAX_TOP_K`` and the whole answer by ``MCP_MAX_RESPONSE_CHARS``
    (``truncated`` says results were dropped to stay under it)."""
    s = ctx.settings

    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require("kb:search")
        k = 5 if top_k is None else top_k
        if k < 1 or k > s.mcp_max_top_k:
            raise ValidationError(f"top_k must be between 1 and {s.mcp_max_top_k}", field="top_k")
        degraded: list[str] = []  # what the search went without (docs/retrieval.md#degradation)
        hits = retrieval_search(
            ctx,
            session,
            caller.principal,
            query,
            knowledge_base_ids=knowledge_base_ids,
            top_k=k,
            filters=filters,
            snippets=2,
            degraded=degraded,
        )
        out: list[dict[str, Any]] = []
        used, truncated = 0, False
        for r in hits:
            cut = s.mcp_snippet_chars
            snippet = r.content if len(r.content) <= cut else r.content[:cut] + "…"
            more = [
                {
                    "chunk_id": m["chunk_id"],
                    "heading_path": m["heading_path"],
                    "score": m["score"],
                    "snippet": m["content"] if len(m["content"]) <= cut else m["content"][:cut] + "…",
                }
                for m in r.snippets
            ]
            item = {
                "document_id": r.document_id,
                "chunk_id": r.chunk_id,
                "title": r.title,
                "path": r.path,
                "heading_path": r.heading_path,
                "snippet": snippet,
                "score": r.score,
                "highlights": [h for h in r.highlights if h[1] <= cut],
                "more_snippets": more,
                "knowledge_base_id": r.knowledge_base_id,
                "knowledge_base_title": r.knowledge_base_title,
                "tags": r.tags,
                "updated_at": r.updated_at,
                "url": doc_url(s, r.knowledge_base_id, r.document_id),
            }
            size = len(snippet) + len(r.title) + len(r.path) + 300 + sum(len(m["snippet"]) + 120 for m in more)
            if out and used + size > s.mcp_max_response_chars:
                truncated = True
                break
            used += size
            out.append(item)
        answer = {"results": out, "truncated": truncated, "degraded": degraded}
        return answer, list(dict.fromkeys(i["document_id"] for i in out))

    return audited(
        session,
        caller,
        "kb_search",
        run,
        query=query,
        extra={"top_k": top_k, "knowledge_base_ids": knowledge_base_ids or None},
    )


# --- documents -----------------------------------------------------------------------------------


def _document(session: Session, caller: McpCaller, document_id: uuid.UUID) -> dict[str, Any]:
    caller.require("doc:read")
    return doc_service.get_document(session, caller.principal, document_id)


def document_summary(settings: Settings, d: dict[str, Any]) -> dict[str, Any]:
    md = d.get("markdown") or ""
    return {
        "id": _s(d["id"]),
        "knowledge_base_id": _s(d["knowledge_base_id"]),
        "workspace_id": _s(d["workspace_id"]),
        "parent_id": _s(d["parent_id"]),
        "type": d["type"],
        "title": d["title"],
        "status": d["status"],
        "version_no": d["version_no"],
        "markdown_chars": len(md),
        "tags": d["tags"],
        "metadata": d["metadata"],
        "path": [{"id": _s(p["id"]), "title": p["title"], "type": p["type"]} for p in d.get("path") or []],
        "created_at": _s(d["created_at"]),
        "updated_at": _s(d["updated_at"]),
        "url": doc_url(settings, d["knowledge_base_id"], d["id"]),
    }


def get_document(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    document_id: uuid.UUID,
    tool: str = "kb_get_document",
    uri: str | None = None,
) -> dict[str, Any]:
    """The document's fields and breadcrumb without its body (``markdown_chars`` says how long
    the body is; ``kb_get_document_markdown`` reads it in ranges)."""

    def run() -> tuple[dict[str, Any], list[str]]:
        return document_summary(settings, _document(session, caller, document_id)), [str(document_id)]

    return audited(session, caller, tool, run, document_id=document_id, uri=uri)


def _max_chars(max_chars: int | None, cap: int) -> int:
    if max_chars is not None and (max_chars < 1 or max_chars > cap):
        raise ValidationError(f"max_chars must be between 1 and {cap}", field="max_chars")
    return max_chars or cap


def char_range(text: str, offset: int, size: int, what: str) -> dict[str, Any]:
    """``text[offset:offset + size]`` with where it sits: how MCP hands out a long text (a body,
    a diff) one range at a time, ``next_offset`` null at the end."""
    if offset < 0 or offset > len(text):
        raise ValidationError(f"offset must be between 0 and {len(text)} ({what} length)", field="offset")
    part = text[offset : offset + size]
    end = offset + len(part)
    return {
        "offset": offset,
        "part": part,
        "returned_chars": len(part),
        "total_chars": len(text),
        "remaining_chars": len(text) - end,
        "next_offset": end if end < len(text) else None,
    }


def get_markdown(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    document_id: uuid.UUID,
    offset: int = 0,
    max_chars: int | None = None,
    tool: str = "kb_get_document_markdown",
    uri: str | None = None,
) -> dict[str, Any]:
    """A character range of the current Markdown body: ``[offset, offset + max_chars)``, with how
    much remains and the next offset (``kb_get_toc`` gives each heading's offset)."""
    cap = settings.mcp_max_response_chars

    def run() -> tuple[dict[str, Any], list[str]]:
        size = _max_chars(max_chars, cap)
        d = _document(session, caller, document_id)
        rng = char_range(d.get("markdown") or "", offset, size, "the body's")
        return {
            "document_id": str(document_id),
            "title": d["title"],
            "version_no": d["version_no"],
            "markdown": rng.pop("part"),
            **rng,
            "url": doc_url(settings, d["knowledge_base_id"], d["id"]),
        }, [str(document_id)]

    return audited(
        session, caller, tool, run, document_id=document_id, uri=uri, extra={"offset": offset, "max_chars": max_chars}
    )


def document_changes(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    document_id: uuid.UUID,
    from_version: int | None = None,
    to_version: int | None = None,
    since: datetime | None = None,
    offset: int = 0,
    max_chars: int | None = None,
    tool: str = "kb_get_document_changes",
) -> dict[str, Any]:
    """What changed between two versions of a page (``openkb.content.compare``): who saved them,
    the line counts and the unified diff, one character range at a time like the Markdown."""
    cap = settings.mcp_max_response_chars

    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require("doc:read")
        size = _max_chars(max_chars, cap)
        try:
            out = compare_versions(
                session, caller.principal, document_id, from_no=from_version, to_no=to_version, since=since
            )
        except OpenKBError as exc:  # name the tool's arguments, not the REST parameters
            if exc.extra.get("field") in ("from_no", "to_no"):
                exc.extra["field"] = {"from_no": "from_version", "to_no": "to_version"}[exc.extra["field"]]
            raise
        rng = char_range(out["diff"], offset, size, "the diff's")
        return {
            "document_id": str(document_id),
            "title": out["title"],
            "from_version": {k: _s(v) for k, v in out["from_version"].items()} if out["from_version"] else None,
            "to_version": {k: _s(v) for k, v in out["to_version"].items()},
            "saves": out["saves"],
            "authors": out["authors"],
            "title_changed": out["title_changed"],
            "added_lines": out["added_lines"],
            "removed_lines": out["removed_lines"],
            "diff": rng.pop("part"),
            **rng,
            "url": doc_url(settings, out["knowledge_base_id"], document_id),
        }, [str(document_id)]

    return audited(
        session,
        caller,
        tool,
        run,
        document_id=document_id,
        extra={
            "from_version": from_version,
            "to_version": to_version,
            "since": since.isoformat() if since else None,
            "offset": offset,
        },
    )


def toc_entries(markdown: str) -> list[dict[str, Any]]:
    """Headings with the character range of their section (up to the next heading of the same
    or a higher level), so a client can fetch one section with ``kb_get_document_markdown``."""
    starts, pos = [0], 0
    for line in markdown.split("\n")[:-1]:
        pos += len(line) + 1
        starts.append(pos)
    heads = outline(markdown)
    out = []
    for i, h in enumerate(heads):
        off = starts[h.line - 1] if 0 < h.line <= len(starts) else 0
        end = len(markdown)
        for nxt in heads[i + 1 :]:
            if nxt.level <= h.level:
                end = starts[nxt.line - 1] if 0 < nxt.line <= len(starts) else end
                break
        out.append(
            {"level": h.level, "text": h.text, "anchor": h.anchor, "line": h.line, "offset": off, "chars": end - off}
        )
    return out


def get_toc(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    document_id: uuid.UUID,
    cursor: str | None = None,
    limit: int | None = None,
    tool: str = "kb_get_toc",
    uri: str | None = None,
) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        n = pages.check_limit(limit, settings.mcp_page_size, settings.mcp_max_page_size)
        d = _document(session, caller, document_id)
        pg = pages.page(
            toc_entries(d.get("markdown") or ""),
            tool="kb_get_toc",
            args={"document_id": str(document_id)},
            cursor=cursor,
            limit=n,
        )
        return {
            "document_id": str(document_id),
            "title": d["title"],
            "headings": pg.items,
            "total": pg.total,
            "next_cursor": pg.next_cursor,
        }, [str(document_id)]

    return audited(session, caller, tool, run, document_id=document_id, uri=uri)


# --- listings ------------------------------------------------------------------------------------


def list_workspaces(
    session: Session, caller: McpCaller, settings: Settings, *, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require("kb:read")
        n = pages.check_limit(limit, settings.mcp_page_size, settings.mcp_max_page_size)
        rows = ws_service.list_workspaces(session, caller.principal)
        pg = pages.page(rows, tool="kb_list_workspaces", args={}, cursor=cursor, limit=n)
        items = [
            {
                "id": _s(w["id"]),
                "name": w["name"],
                "slug": w["slug"],
                "description": w["description"],
                "role": w["role"],
            }
            for w in pg.items
        ]
        return {"workspaces": items, "total": pg.total, "next_cursor": pg.next_cursor}, []

    return audited(session, caller, "kb_list_workspaces", run)


def list_shared_documents(
    session: Session, caller: McpCaller, settings: Settings, *, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The pages and folders someone shared with this user (``recent.shared_documents_page``: the
    same list and read rule as the web app's home page), newest share first. Paged in the
    database with an exact ``total``: the home page's list stops at 100, this one reaches all."""

    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require("kb:read")
        n = pages.check_limit(limit, settings.mcp_page_size, settings.mcp_max_page_size)
        pg = pages.page_of(
            lambda offset, size: recent_service.shared_documents_page(
                session, caller.principal, offset=offset, limit=size
            ),
            tool="kb_list_shared_documents",
            args={},
            cursor=cursor,
            limit=n,
        )
        items = [
            {
                "id": _s(d["id"]),
                "knowledge_base_id": _s(d["knowledge_base_id"]),
                "knowledge_base_title": d["knowledge_base_title"],
                "type": d["type"],
                "title": d["title"],
                "role": d["role"],
                "shared_at": _s(d["shared_at"]),
                "shared_by": d["shared_by"]["display_name"] if d["shared_by"] else None,
                "url": doc_url(settings, d["knowledge_base_id"], d["id"]),
            }
            for d in pg.items
        ]
        return {"documents": items, "total": pg.total, "next_cursor": pg.next_cursor}, [i["id"] for i in items]

    return audited(session, caller, "kb_list_shared_documents", run)


def _kb_item(settings: Settings, k: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _s(k["id"]),
        "workspace_id": _s(k["workspace_id"]),
        "title": k["title"],
        "slug": k["slug"],
        "description": k["description"],
        "visibility": k["visibility"],
        "status": k["status"],
        "role": k.get("role"),
        "url": kb_url(settings, k["id"]),
    }


def knowledge_bases_page(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    workspace_id: uuid.UUID | None,
    cursor: str | None,
    limit: int | None,
) -> pages.Page:
    caller.require("kb:read")
    n = pages.check_limit(limit, settings.mcp_page_size, settings.mcp_max_page_size)
    rows = kb_service.list_knowledge_bases(session, caller.principal, workspace_id=workspace_id)
    if workspace_id is not None and not rows:
        # Nothing readable in it: a workspace the caller cannot see, or none at all, is NOT_FOUND
        # in the same words (docs/mcp.md#tools), not an empty list that reads "nothing there yet"
        # for a mistyped id. Checked after the listing, not first: a knowledge base shared with a
        # non-member is readable to them (docs/permissions.md) and names its workspace anyway.
        access_workspace(session, caller.principal, workspace_id)
    pg = pages.page(
        rows,
        tool="kb_list_knowledge_bases",
        args={"workspace_id": str(workspace_id) if workspace_id else None},
        cursor=cursor,
        limit=n,
    )
    return pages.Page([_kb_item(settings, k) for k in pg.items], pg.next_cursor, pg.total)


def list_knowledge_bases(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    workspace_id: uuid.UUID | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        pg = knowledge_bases_page(session, caller, settings, workspace_id=workspace_id, cursor=cursor, limit=limit)
        return {"knowledge_bases": pg.items, "total": pg.total, "next_cursor": pg.next_cursor}, []

    return audited(session, caller, "kb_list_knowledge_bases", run, extra={"workspace_id": workspace_id})


def documents_page(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    knowledge_base_id: uuid.UUID,
    parent_id: uuid.UUID | None,
    recursive: bool,
    cursor: str | None,
    limit: int | None,
) -> pages.Page:
    """One page of the visible tree: the children of ``parent_id`` (the roots without it), or,
    ``recursive``, the whole visible subtree in tree order. A parent the caller cannot see is
    "document not found", like a missing one."""
    caller.require("kb:read")
    n = pages.check_limit(limit, settings.mcp_page_size, settings.mcp_max_page_size)
    items = tree_service.get_tree(session, caller.principal, knowledge_base_id)
    children: dict[Any, int] = {}
    for it in items:
        children[it["parent_id"]] = children.get(it["parent_id"], 0) + 1
    want = str(parent_id) if parent_id is not None else None
    if want is not None and not any(it["id"] == want for it in items):
        raise NotFound(DOC_NOT_FOUND)
    if recursive:
        chosen = _subtree_order(items, want)
    else:
        chosen = [it for it in items if it["parent_id"] == want]
    pg = pages.page(
        chosen,
        tool="kb_list_documents",
        args={"kb": str(knowledge_base_id), "parent": want, "recursive": recursive},
        cursor=cursor,
        limit=n,
    )
    out = [
        {
            "id": it["id"],
            "parent_id": it["parent_id"],
            "type": it["type"],
            "title": it["title"],
            "status": it["status"],
            "has_children": children.get(it["id"], 0) > 0,
            "url": doc_url(settings, knowledge_base_id, it["id"]),
        }
        for it in pg.items
    ]
    return pages.Page(out, pg.next_cursor, pg.total)


def _subtree_order(items: list[dict[str, Any]], root: str | None) -> list[dict[str, Any]]:
    by_parent: dict[Any, list[dict[str, Any]]] = {}
    for it in items:  # get_tree returns siblings in order
        by_parent.setdefault(it["parent_id"], []).append(it)
    out: list[dict[str, Any]] = []
    stack = list(reversed(by_parent.get(root, [])))
    while stack:
        it = stack.pop()
        out.append(it)
        stack.extend(reversed(by_parent.get(it["id"], [])))
    return out


def list_documents(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    knowledge_base_id: uuid.UUID,
    parent_id: uuid.UUID | None = None,
    recursive: bool = False,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    def run() -> tuple[dict[str, Any], list[str]]:
        pg = documents_page(
            session,
            caller,
            settings,
            knowledge_base_id=knowledge_base_id,
            parent_id=parent_id,
            recursive=recursive,
            cursor=cursor,
            limit=limit,
        )
        return (
            {
                "knowledge_base_id": str(knowledge_base_id),
                "documents": pg.items,
                "total": pg.total,
                "next_cursor": pg.next_cursor,
            },
            [d["id"] for d in pg.items],
        )

    return audited(
        session,
        caller,
        "kb_list_documents",
        run,
        extra={"knowledge_base_id": knowledge_base_id, "parent_id": parent_id},
    )


# --- the optional write tool -----------------------------------------------------------------------


def upsert_document(
    session: Session,
    caller: McpCaller,
    settings: Settings,
    *,
    knowledge_base_id: uuid.UUID,
    key: str,
    title: str,
    markdown: str | None = None,
    parent_id: Any = UNSET,
    status: str | None = None,
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Keyed upsert (``openkb.content.upsert``): ``created`` | ``updated`` | ``unchanged``, the
    dialect check, a change-log row under a run (``run_id`` names it; revert it like any run).
    Needs ``doc:write`` on the token and edit rights on the knowledge base. The change row's
    actor is the user (``actor_type`` ``api_key``: a token wrote it); the client that wrote it is
    on the call's audit row, with the same ``run_id``."""

    try:  # made first, so the audit row names the run the change log files the write under
        actor: Actor | None = Actor.of(caller.principal, run_id, source="api")
    except ValidationError:
        actor = None

    def run() -> tuple[dict[str, Any], list[str]]:
        caller.require("doc:write")
        if actor is None:
            Actor.of(caller.principal, run_id)  # raises the run id's ValidationError
            raise AssertionError("unreachable")
        res = upsert_service.upsert_by_key(
            session,
            actor,
            knowledge_base_id,
            key,
            title=title,
            markdown=markdown,
            parent_id=parent_id,
            status=status,
            metadata=metadata,
            tags=tags,
            settings=settings,
        )
        out = {k: _s(v) for k, v in res.out().items()}
        out["run_id"] = str(actor.run_id)
        out["url"] = doc_url(settings, knowledge_base_id, res.document.id)
        return out, [out["document_id"]]

    return audited(
        session,
        caller,
        "kb_upsert_document",
        run,
        extra={
            "knowledge_base_id": knowledge_base_id,
            "key": key,
            "run_id": actor.run_id if actor is not None else None,
        },
    )
