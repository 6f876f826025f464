"""The ``mcp`` SDK wiring of OpenKB's MCP server (docs/mcp.md): tools, resource templates, errors.

Each tool here parses its arguments (the SDK builds the JSON schema from the signature), opens
one unit of work, and calls one service of ``openkb.mcp``. What this layer adds:

* ``tools/list`` shows only the tools the token's scopes allow (``kb_upsert_document`` only
  with ``doc:write``); calling a tool that is not listed is the JSON-RPC error of an unknown tool
  (``server/mcp/http.py`` answers 403 ``insufficient_scope`` first for a known tool whose scope is
  missing);
* unknown argument names and arguments of the wrong type are a tool error naming the argument;
* an ``OpenKBError`` becomes a tool error ``CODE: detail`` (with its extra fields, e.g. the line
  and column of a Markdown dialect error); "not found" reads the same for missing and hidden;
* a resource that is not found is JSON-RPC error -32002 (the spec's "resource not found").

No ``from __future__ import annotations`` here: the SDK evaluates the tools' signatures, whose
annotations name aliases local to ``build``.
"""

import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

import pydantic
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ToolAnnotations
from pydantic import Field
from sqlmodel import Session

from openkb import __version__
from openkb.audit import set_origin
from openkb.context import AppContext
from openkb.db import session_scope
from openkb.errors import NotFound, OpenKBError
from openkb.mcp import facts as facts_tools
from openkb.mcp import resources, tools
from openkb.mcp.caller import TOOL_SCOPES, McpCaller
from openkb.retrieval.service import MAX_SEARCH_KBS
from server.mcp import facts_schemas as FS
from server.mcp import schemas as S
from server.mcp.http import current

RESOURCE_NOT_FOUND = -32002
T = TypeVar("T")

INSTRUCTIONS = (
    "OpenKB knowledge base of the signed-in user: everything returned is what this user may read on the web. "
    "Start with kb_search (hybrid keyword + semantic search) or browse with kb_list_workspaces -> "
    "kb_list_knowledge_bases -> kb_list_documents. Read a page with kb_get_toc and kb_get_document_markdown "
    "(character ranges; follow next_offset); kb_get_document_changes says what changed between two of its "
    "versions. Lists are paged: pass next_cursor back as cursor."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


class OpenKBMCP(MCPServer):
    """``MCPServer`` with per-token tool lists and argument errors that name the argument."""

    async def list_tools(self) -> list[Any]:
        req = current.get()
        allowed = req.caller.scopes if req is not None else frozenset()
        return [t for t in await super().list_tools() if TOOL_SCOPES.get(t.name) in allowed]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        req = current.get()
        tool = self._tool_manager.get_tool(name)
        if tool is None or req is None or not req.caller.may(TOOL_SCOPES.get(name, "")):
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
        known = set(tool.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ToolError(
                f"VALIDATION_ERROR: unknown argument {', '.join(unknown)} (accepted: {', '.join(sorted(known))})"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, pydantic.ValidationError):
                errs = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in cause.errors()]
                raise ToolError(f"VALIDATION_ERROR: invalid argument {'; '.join(errs)}") from None
            if isinstance(cause, ToolError):  # ours, from _tool_error: without the SDK's prefix
                raise ToolError(str(cause)) from None
            raise


def _tool_error(exc: OpenKBError) -> ToolError:
    extra = {k: v for k, v in exc.extra.items() if isinstance(v, (str, int, float, bool, list))}
    return ToolError(f"{exc.code}: {exc.detail}" + (f" {json.dumps(extra, default=str)}" if extra else ""))


def build(ctx: AppContext) -> OpenKBMCP:
    """The MCP server of one app instance (its session manager runs once, in the app lifespan)."""
    srv = OpenKBMCP("openkb", title="OpenKB", version=__version__, instructions=INSTRUCTIONS)

    def tool(**kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``srv.tool`` with the docstring as a one-line description (no source indentation)."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            return srv.tool(description=" ".join((fn.__doc__ or "").split()), **kw)(fn)

        return deco

    def unit(fn: Callable[[Session, McpCaller], T]) -> T:
        req = current.get()
        if req is None:  # the gate always sets it; a call without it is a wiring bug
            raise ToolError("UNAUTHENTICATED: no caller")
        with session_scope(ctx.engine) as s:
            set_origin(s, ip=req.ip, user_agent=req.user_agent)
            return fn(s, req.caller)

    def call(fn: Callable[[Session, McpCaller], dict[str, Any]], model: type[pydantic.BaseModel]) -> Any:
        try:
            return model.model_validate(unit(fn))
        except OpenKBError as exc:
            raise _tool_error(exc) from None

    def read(fn: Callable[[Session, McpCaller], Any]) -> str:
        try:
            out = unit(fn)
        except NotFound as exc:
            raise MCPError(code=RESOURCE_NOT_FOUND, message=exc.detail) from None
        except OpenKBError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"{exc.code}: {exc.detail}") from None
        return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str)

    st = ctx.settings
    Cursor = Annotated[str | None, Field(description="next_cursor of the previous page; omit for the first page")]
    Limit = Annotated[
        int | None, Field(ge=1, description=f"page size (default {st.mcp_page_size}, at most {st.mcp_max_page_size})")
    ]
    DocId = Annotated[uuid.UUID, Field(description="document id (from kb_search or kb_list_documents)")]

    # -- tools --------------------------------------------------------------------------------

    @tool(name="kb_search", title="Search the knowledge base", annotations=READ_ONLY)
    def kb_search(
        query: Annotated[
            str,
            Field(
                max_length=2000,
                description="what to look for, in natural language or "
                "keywords; empty lists the most recently updated readable documents",
            ),
        ],
        knowledge_base_ids: Annotated[
            list[uuid.UUID] | None,
            Field(max_length=MAX_SEARCH_KBS, description="only these knowledge bases (from kb_list_knowledge_bases)"),
        ] = None,
        top_k: Annotated[int, Field(ge=1, description=f"results to return (at most {st.mcp_max_top_k})")] = 5,
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description=(
                    'optional {"tags": [..], "metadata": {key: value}, "time_range": {"from": ISO, "to": ISO}}'
                )
            ),
        ] = None,
    ) -> S.SearchOut:
        """Hybrid (keyword + semantic) search over the documents this user may read. Returns chunks,
        best first, each with document_id, title, folder path, a snippet and a web URL. Read a whole
        document with kb_get_document_markdown."""
        return call(
            lambda s, c: tools.search(
                ctx, s, c, query=query, knowledge_base_ids=knowledge_base_ids, top_k=top_k, filters=filters
            ),
            S.SearchOut,
        )

    @tool(name="kb_get_document", title="Get a document's details", annotations=READ_ONLY)
    def kb_get_document(document_id: DocId) -> S.DocumentOut:
        """A document's title, status, tags, metadata, breadcrumb, version and body length (not the
        body itself: use kb_get_document_markdown)."""
        return call(lambda s, c: tools.get_document(s, c, ctx.settings, document_id=document_id), S.DocumentOut)

    @tool(name="kb_get_document_markdown", title="Read a document's Markdown", annotations=READ_ONLY)
    def kb_get_document_markdown(
        document_id: DocId,
        offset: Annotated[
            int,
            Field(
                ge=0, description="first character to return (a heading's offset from kb_get_toc reads that section)"
            ),
        ] = 0,
        max_chars: Annotated[
            int | None, Field(ge=1, description=(f"characters to return (default and cap {st.mcp_max_response_chars})"))
        ] = None,
    ) -> S.MarkdownOut:
        """The current Markdown body, one character range at a time: returns the range, the total
        length, how many characters remain and next_offset for the next call (null at the end)."""
        return call(
            lambda s, c: tools.get_markdown(
                s, c, ctx.settings, document_id=document_id, offset=offset, max_chars=max_chars
            ),
            S.MarkdownOut,
        )

    @tool(name="kb_get_toc", title="A document's table of contents", annotations=READ_ONLY)
    def kb_get_toc(document_id: DocId, cursor: Cursor = None, limit: Limit = None) -> S.TocOut:
        """The document's headings with the character offset and length of each section, to read one
        section with kb_get_document_markdown instead of the whole page."""
        return call(
            lambda s, c: tools.get_toc(s, c, ctx.settings, document_id=document_id, cursor=cursor, limit=limit),
            S.TocOut,
        )

    @tool(name="kb_get_document_changes", title="What changed in a document", annotations=READ_ONLY)
    def kb_get_document_changes(
        document_id: DocId,
        from_version: Annotated[
            int | None,
            Field(
                ge=0,
                le=2_147_483_647,  # a version_no is a PostgreSQL integer (as GET /api/documents/{id}/diff)
                description="the older version_no (default: the one before to_version; 0: an empty page)",
            ),
        ] = None,
        to_version: Annotated[
            int | None, Field(ge=1, le=2_147_483_647, description="the newer version_no (default: the current one)")
        ] = None,
        since: Annotated[
            datetime | None,
            Field(
                description="instead of from_version: what changed since this time (ISO 8601, e.g. "
                "2026-11-30T00:00:00Z; UTC without a zone), from the version current then"
            ),
        ] = None,
        offset: Annotated[int, Field(ge=0, description="first character of the diff to return")] = 0,
        max_chars: Annotated[
            int | None, Field(ge=1, description=f"characters to return (default and cap {st.mcp_max_response_chars})")
        ] = None,
    ) -> S.ChangesOut:
        """What changed between two versions of a document (default: the latest save) or since a time
        (since: no version numbers needed): who saved the versions in between, lines added and removed, whether the title changed, and a unified diff
        of the Markdown (lines starting with - were removed, + added), one character range at a time
        (follow next_offset). kb_get_document gives the current version_no."""
        return call(
            lambda s, c: tools.document_changes(
                s,
                c,
                ctx.settings,
                document_id=document_id,
                from_version=from_version,
                to_version=to_version,
                since=since,
                offset=offset,
                max_chars=max_chars,
            ),
            S.ChangesOut,
        )

    @tool(name="kb_list_workspaces", title="List workspaces", annotations=READ_ONLY)
    def kb_list_workspaces(cursor: Cursor = None, limit: Limit = None) -> S.WorkspacesOut:
        """The workspaces this user belongs to, with the user's role. Paged: pass next_cursor back."""
        return call(lambda s, c: tools.list_workspaces(s, c, ctx.settings, cursor=cursor, limit=limit), S.WorkspacesOut)

    @tool(name="kb_list_shared_documents", title="List documents shared with me", annotations=READ_ONLY)
    def kb_list_shared_documents(cursor: Cursor = None, limit: Limit = None) -> S.SharedDocumentsOut:
        """Pages and folders other people shared with this user as a collaborator (directly or
        through a group), newest share first, with the user's role and who shared each. Read one
        with kb_get_document. Paged: pass next_cursor back."""
        return call(
            lambda s, c: tools.list_shared_documents(s, c, ctx.settings, cursor=cursor, limit=limit),
            S.SharedDocumentsOut,
        )

    @tool(name="kb_list_knowledge_bases", title="List knowledge bases", annotations=READ_ONLY)
    def kb_list_knowledge_bases(
        workspace_id: Annotated[uuid.UUID | None, Field(description="only this workspace's")] = None,
        cursor: Cursor = None,
        limit: Limit = None,
    ) -> S.KnowledgeBasesOut:
        """Knowledge bases this user can read (optionally of one workspace). Paged: pass next_cursor back."""
        return call(
            lambda s, c: tools.list_knowledge_bases(
                s, c, ctx.settings, workspace_id=workspace_id, cursor=cursor, limit=limit
            ),
            S.KnowledgeBasesOut,
        )

    @tool(name="kb_list_documents", title="List documents of a knowledge base", annotations=READ_ONLY)
    def kb_list_documents(
        knowledge_base_id: Annotated[uuid.UUID, Field(description="from kb_list_knowledge_bases")],
        parent_id: Annotated[
            uuid.UUID | None, Field(description="list this folder's children (default: the top level)")
        ] = None,
        recursive: Annotated[bool, Field(description="the whole subtree in tree order instead of one level")] = False,
        cursor: Cursor = None,
        limit: Limit = None,
    ) -> S.DocumentsOut:
        """Folders and pages this user can see, in tree order, one level at a time (has_children says
        where to descend). Paged: pass next_cursor back."""
        return call(
            lambda s, c: tools.list_documents(
                s,
                c,
                ctx.settings,
                knowledge_base_id=knowledge_base_id,
                parent_id=parent_id,
                recursive=recursive,
                cursor=cursor,
                limit=limit,
            ),
            S.DocumentsOut,
        )

    @tool(name="kb_facts_lookup", title="Facts about you or someone you know", annotations=READ_ONLY)
    def kb_facts_lookup(
        subject_id: Annotated[
            uuid.UUID | None, Field(description="an entity id from kb_entities_resolve (default: you)")
        ] = None,
        prefix: Annotated[
            str | None, Field(max_length=200, description="predicate prefix, e.g. pref.food or location.home")
        ] = None,
    ) -> FS.FactsOut:
        """Current facts (subject, predicate, value) about the user or one of their entities, with
        who said each one. Needs the facts:read scope."""
        return call(lambda s, c: facts_tools.facts_lookup(s, c, subject_id=subject_id, prefix=prefix), FS.FactsOut)

    @tool(name="kb_entities_resolve", title="Find a contact by email, phone, name...", annotations=READ_ONLY)
    def kb_entities_resolve(
        email: Annotated[str | None, Field(max_length=1000)] = None,
        phone: Annotated[str | None, Field(max_length=1000)] = None,
        domain: Annotated[str | None, Field(max_length=1000)] = None,
        url: Annotated[str | None, Field(max_length=1000)] = None,
        handle: Annotated[str | None, Field(max_length=1000, description="platform:account")] = None,
        name: Annotated[str | None, Field(max_length=1000)] = None,
        kind: Annotated[str, Field(max_length=40, description="person, org, place...")] = "person",
    ) -> FS.EntityOut:
        """A point lookup of one of the user's entities by one identifier (never a list); null when
        none matches. Needs the facts:read scope."""
        by = {"email": email, "phone": phone, "domain": domain, "url": url, "handle": handle, "name": name}
        ids = {k: v for k, v in by.items() if v is not None}
        return call(lambda s, c: facts_tools.entities_resolve(s, c, kind=kind, identifiers=ids), FS.EntityOut)

    @tool(
        name="kb_upsert_document",
        title="Create or update a document by key",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    def kb_upsert_document(
        knowledge_base_id: Annotated[uuid.UUID, Field(description="target knowledge base")],
        key: Annotated[
            str,
            Field(
                min_length=1,
                max_length=1000,
                description=("your stable key for this document; the same key updates the same document"),
            ),
        ],
        title: Annotated[str, Field(min_length=1, max_length=1000)],
        markdown: Annotated[str | None, Field(description="the page body in OpenKB's Markdown dialect")] = None,
        parent_id: Annotated[uuid.UUID | None, Field(description="folder to create it in (default: top level)")] = None,
        status: Annotated[Literal["draft", "published", "archived"] | None, Field()] = None,
        tags: Annotated[list[str] | None, Field(max_length=100)] = None,
        metadata: Annotated[dict[str, Any] | None, Field()] = None,
        run_id: Annotated[
            str | None,
            Field(
                max_length=200,
                description=("groups writes into one revertible run (UUID or short name); default: one run per call"),
            ),
        ] = None,
    ) -> S.UpsertOut:
        """Create or update one page by your key: answers created, updated or unchanged (nothing
        written). The body is checked against OpenKB's Markdown dialect (errors name the line and
        column). Recorded in the change log under run_id, so it can be reverted."""
        parent: Any = parent_id if parent_id is not None else tools.UNSET
        return call(
            lambda s, c: tools.upsert_document(
                s,
                c,
                ctx.settings,
                knowledge_base_id=knowledge_base_id,
                key=key,
                title=title,
                markdown=markdown,
                parent_id=parent,
                status=status,
                tags=tags,
                metadata=metadata,
                run_id=run_id,
            ),
            S.UpsertOut,
        )

    # -- resources (templates only: never a full listing) ------------------------------------

    def _uuid(raw: str, what: str) -> uuid.UUID:
        try:
            return uuid.UUID(raw)
        except ValueError:
            raise MCPError(code=RESOURCE_NOT_FOUND, message=f"{what} not found") from None

    @srv.resource(
        "kb://workspace/{workspace_id}",
        name="workspace",
        mime_type="application/json",
        description="A workspace and the first page of its knowledge bases",
    )
    def workspace_resource(workspace_id: str) -> str:
        wid = _uuid(workspace_id, "workspace")
        return read(lambda s, c: resources.read_workspace(s, c, ctx.settings, wid, f"kb://workspace/{wid}"))

    @srv.resource(
        "kb://knowledge-base/{kb_id}",
        name="knowledge-base",
        mime_type="application/json",
        description="A knowledge base and the first page of its top-level documents",
    )
    def kb_resource(kb_id: str) -> str:
        kid = _uuid(kb_id, "knowledge base")
        return read(lambda s, c: resources.read_knowledge_base(s, c, ctx.settings, kid, f"kb://knowledge-base/{kid}"))

    @srv.resource(
        "kb://document/{document_id}",
        name="document",
        mime_type="application/json",
        description="A document's details (no body)",
    )
    def document_resource(document_id: str) -> str:
        did = _uuid(document_id, "document")
        return read(lambda s, c: resources.read_document(s, c, ctx.settings, did, f"kb://document/{did}"))

    @srv.resource(
        "kb://document/{document_id}/markdown",
        name="document-markdown",
        mime_type="text/markdown",
        description="A document's Markdown body (up to MCP_MAX_RESPONSE_CHARS)",
    )
    def markdown_resource(document_id: str) -> str:
        did = _uuid(document_id, "document")
        return read(lambda s, c: resources.read_markdown(s, c, ctx.settings, did, f"kb://document/{did}/markdown"))

    @srv.resource(
        "kb://document/{document_id}/toc",
        name="document-toc",
        mime_type="application/json",
        description="A document's headings with section offsets",
    )
    def toc_resource(document_id: str) -> str:
        did = _uuid(document_id, "document")
        return read(lambda s, c: resources.read_toc(s, c, ctx.settings, did, f"kb://document/{did}/toc"))

    return srv
