"""Column helpers shared by every table.

Ids are UUIDs generated in Python (so a service can reference a row before flush); times are
timezone-aware UTC. ``meta`` is the Python name of JSON ``metadata`` columns because
``metadata`` is reserved on declarative models.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, ForeignKey, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlmodel import Field


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> uuid.UUID:
    return uuid.uuid4()


def id_field() -> Any:
    return Field(default_factory=new_id, primary_key=True)


def ts(nullable: bool = False, default: bool = True) -> Any:
    if nullable:
        return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))
    return Field(
        default_factory=utcnow,
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()")),
    )


def fk(target: str, nullable: bool = False, ondelete: str | None = None, index: bool = False) -> Any:
    return Field(
        default=None if nullable else ...,
        sa_column=Column(UUID(as_uuid=True), ForeignKey(target, ondelete=ondelete), nullable=nullable, index=index),
    )


def text_array(nullable: bool = False) -> Any:
    return Field(
        default=None if nullable else [],
        sa_column=Column(ARRAY(Text), nullable=nullable, server_default=None if nullable else text("'{}'::text[]")),
    )


def uuid_array() -> Any:
    return Field(
        default_factory=list,
        sa_column=Column(ARRAY(UUID(as_uuid=True)), nullable=False, server_default=text("'{}'::uuid[]")),
    )


def jsonb(name: str = "metadata") -> Any:
    return Field(
        default_factory=dict,
        sa_column=Column(name, JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    )


def check_in(column: str, values: tuple[str, ...], nullable: bool = False) -> str:
    vals = ", ".join(f"'{v}'" for v in values)
    if nullable:
        return f"{column} IS NULL OR {column} IN ({vals})"
    return f"{column} IN ({vals})"
