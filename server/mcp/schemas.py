"""Output schemas of the MCP tools (structured output, ``outputSchema`` in ``tools/list``).

They describe what ``openkb.mcp.tools`` returns; extra keys are allowed so a field added to a
service is not dropped before the schema catches up.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class SearchHit(_Out):
    document_id: str
    chunk_id: str
    title: str
    path: str = Field(description="titles of the folders above the document, ' / '-separated")
    heading_path: list[str]
    snippet: str = Field(description="the matching chunk's text, cut at MCP_SNIPPET_CHARS")
    score: float
    knowledge_base_id: str
    knowledge_base_title: str
    tags: list[str]
    updated_at: str | None
    url: str = Field(description="the document in the web app")


class SearchOut(_Out):
    results: list[SearchHit]
    truncated: bool = Field(description="true when results were dropped to stay under MCP_MAX_RESPONSE_CHARS")
    degraded: list[str] = Field(
        [], description='parts the search went without: "dense" (keyword results only), "rerank"'
    )


class PathItem(_Out):
    id: str
    title: str
    type: str


class DocumentOut(_Out):
    id: str
    knowledge_base_id: str
    workspace_id: str
    parent_id: str | None
    type: str
    title: str
    status: str
    version_no: int | None
    markdown_chars: int = Field(description="length of the Markdown body (read it with kb_get_document_markdown)")
    tags: list[str]
    metadata: dict[str, Any]
    path: list[PathItem] = Field(description="readable ancestors, root first")
    created_at: str
    updated_at: str
    url: str


class MarkdownOut(_Out):
    document_id: str
    title: str
    version_no: int | None
    offset: int
    markdown: str
    returned_chars: int
    total_chars: int
    remaining_chars: int = Field(description="characters after this range")
    next_offset: int | None = Field(description="offset of the next range; null at the end")
    url: str


class ChangedVersion(_Out):
    id: str
    version_no: int
    title: str
    created_by_name: str | None = Field(description="who saved it")
    created_at: str


class ChangesOut(_Out):
    document_id: str
    title: str = Field(description="the page's title at the newer version")
    from_version: ChangedVersion | None = Field(description="null: version 1 against an empty page")
    to_version: ChangedVersion
    saves: int = Field(description="versions saved after from_version up to to_version")
    authors: list[str] = Field(description="who saved them, first saver first")
    title_changed: bool
    added_lines: int
    removed_lines: int
    offset: int
    diff: str = Field(description="this range of the unified diff (diff -u, 3 lines of context); empty when equal")
    returned_chars: int
    total_chars: int = Field(description="the whole diff's length")
    remaining_chars: int = Field(description="characters after this range")
    next_offset: int | None = Field(description="offset of the next range; null at the end")
    url: str


class Heading(_Out):
    level: int
    text: str
    anchor: str
    line: int
    offset: int = Field(description="character offset of the section (use with kb_get_document_markdown)")
    chars: int = Field(description="length of the section up to the next heading of the same or a higher level")


class TocOut(_Out):
    document_id: str
    title: str
    headings: list[Heading]
    total: int
    next_cursor: str | None


class WorkspaceItem(_Out):
    id: str
    name: str
    slug: str
    description: str | None
    role: str | None


class WorkspacesOut(_Out):
    workspaces: list[WorkspaceItem]
    total: int
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last page")


class KnowledgeBaseItem(_Out):
    id: str
    workspace_id: str
    title: str
    slug: str
    description: str | None
    visibility: str
    status: str
    role: str | None
    url: str


class KnowledgeBasesOut(_Out):
    knowledge_bases: list[KnowledgeBaseItem]
    total: int
    next_cursor: str | None


class DocumentItem(_Out):
    id: str
    parent_id: str | None
    type: str
    title: str
    status: str
    has_children: bool
    url: str


class DocumentsOut(_Out):
    knowledge_base_id: str
    documents: list[DocumentItem]
    total: int
    next_cursor: str | None


class SharedDocumentItem(_Out):
    id: str
    knowledge_base_id: str
    knowledge_base_title: str | None = Field(description="null when the caller cannot open the knowledge base")
    type: str
    title: str
    role: str = Field(description="the strongest role granted: viewer | editor | manager | owner")
    shared_at: str
    shared_by: str | None = Field(description="who shared it (null: an account since deleted)")
    url: str


class SharedDocumentsOut(_Out):
    documents: list[SharedDocumentItem]
    total: int
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last page")


class UpsertOut(_Out):
    status: str = Field(description="created | updated | unchanged")
    document_id: str
    version_id: str | None
    version_no: int | None
    run_id: str = Field(description="the change-log run of this write (revert it with POST /api/changes/revert)")
    url: str
