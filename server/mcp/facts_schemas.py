"""Output schemas of the facts tools (``kb_facts_lookup``, ``kb_entities_resolve``; docs/mcp.md#tools)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class FactItem(_Out):
    id: str
    predicate: str
    value: Any = None
    object_id: str | None = None
    valid_from: str
    said_by: str
    app: str | None = None
    source: str


class FactsOut(_Out):
    facts: list[FactItem]


class EntityItem(_Out):
    id: str
    kind: str
    display_name: str
    identifiers: list[dict[str, str]]


class EntityOut(_Out):
    entity: EntityItem | None
