"""Facts, entities and the predicate vocabulary (docs/facts.md).

* ``FactPredicate``: the vocabulary of one tenant — dotted names of at least two levels under a
  fixed root, ``one``/``many``, names in zh-CN and en, a description for the user (at most 200
  characters), aliases; ``core`` rows are seeded, ``app`` rows come from a manifest and stay
  after the app is uninstalled (facts may still use them).
* ``Entity``: a person, organisation, place... of one user (each user's knowledge is theirs),
  and the user's own ``self`` entity (one per user and tenant). A merged entity keeps its row
  with ``merged_into`` (old refs follow it); a deleted one keeps its row with ``deleted_at``
  (refs to it then fail with ``no entity``).
* ``EntityIdentifier``: normalized email/phone/domain/url/handle/name, unique per user, entity
  kind and identifier kind — the point lookup of ``entities.resolve``.
* ``Fact``: ``subject · predicate · value`` (JSON) or ``object`` (an entity), valid from/to:
  a fact expires, it is never deleted; ``said_by`` user or app, who wrote it, origin, source.
* ``EntityMention``: a chunk of an indexed version that names an entity (``search`` by entity).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, Column, Float, Index, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from openkb.models._base import check_in, fk, id_field, text_array, ts

PREDICATE_ROOTS = ("identity", "contact", "location", "relation", "pref", "schedule", "work", "health", "finance", "x")
CARDINALITIES = ("one", "many")
PREDICATE_ORIGINS = ("core", "app", "user")
IDENTIFIER_KINDS = ("email", "phone", "domain", "url", "handle", "name")
SAID_BY = ("user", "app")
PREDICATE_PATTERN = "^(" + "|".join(PREDICATE_ROOTS) + r")(\.[a-z][a-z0-9_]*)+$"


class FactPredicate(SQLModel, table=True):
    __tablename__ = "fact_predicates"
    __table_args__ = (
        CheckConstraint(check_in("cardinality", CARDINALITIES), name="fact_predicates_cardinality_check"),
        CheckConstraint(check_in("origin", PREDICATE_ORIGINS), name="fact_predicates_origin_check"),
        CheckConstraint(f"predicate ~ '{PREDICATE_PATTERN}'", name="fact_predicates_predicate_check"),
        CheckConstraint("char_length(description) <= 200", name="fact_predicates_description_check"),
        UniqueConstraint("tenant_id", "predicate", name="fact_predicates_tenant_predicate_key"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    predicate: str
    cardinality: str
    name_zh: str = Field(default="")
    name_en: str = Field(default="")
    description: str = Field(default="")
    aliases: list[str] = text_array()
    origin: str = Field(default="core")
    app_id: uuid.UUID | None = fk("apps.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()


class Entity(SQLModel, table=True):
    __tablename__ = "entities"
    __table_args__ = (
        CheckConstraint("kind ~ '^[a-z][a-z0-9_-]{0,39}$'", name="entities_kind_check"),
        Index("ix_entities_self", "tenant_id", "user_id", unique=True, postgresql_where=text("kind = 'self'")),
        Index("ix_entities_user_kind", "tenant_id", "user_id", "kind"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    kind: str
    display_name: str
    merged_into: uuid.UUID | None = fk("entities.id", nullable=True, ondelete="SET NULL")
    deleted_at: datetime | None = ts(nullable=True)
    created_by_installation_id: uuid.UUID | None = fk("app_installations.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class EntityIdentifier(SQLModel, table=True):
    __tablename__ = "entity_identifiers"
    __table_args__ = (
        CheckConstraint(check_in("kind", IDENTIFIER_KINDS), name="entity_identifiers_kind_check"),
        UniqueConstraint(
            "tenant_id", "user_id", "entity_kind", "kind", "value", name="entity_identifiers_user_kind_value_key"
        ),
        Index("ix_entity_identifiers_entity", "entity_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    entity_id: uuid.UUID = fk("entities.id", ondelete="CASCADE")
    entity_kind: str
    kind: str
    value: str  # normalized
    display: str  # as given
    created_at: datetime = ts()


class Fact(SQLModel, table=True):
    __tablename__ = "facts"
    __table_args__ = (
        CheckConstraint(check_in("said_by", SAID_BY), name="facts_said_by_check"),
        CheckConstraint("valid_to IS NULL OR valid_to >= valid_from", name="facts_valid_range_check"),
        CheckConstraint("value IS NOT NULL OR object_id IS NOT NULL", name="facts_value_or_object_check"),
        Index("ix_facts_current", "subject_id", "predicate", postgresql_where=text("valid_to IS NULL")),
        Index("ix_facts_user", "tenant_id", "user_id", "predicate"),
        Index("ix_facts_installation", "installation_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    subject_id: uuid.UUID = fk("entities.id", ondelete="CASCADE")
    predicate: str
    value: Any = Field(default=None, sa_column=Column(JSONB, nullable=True))
    object_id: uuid.UUID | None = fk("entities.id", nullable=True, ondelete="CASCADE")
    valid_from: datetime = ts()
    valid_to: datetime | None = ts(nullable=True)
    said_by: str = Field(default="app")
    installation_id: uuid.UUID | None = fk("app_installations.id", nullable=True, ondelete="SET NULL")
    origin: str = Field(default="user")
    source: str = Field(default="user")
    source_ref: str | None = None
    run_id: uuid.UUID | None = None
    confidence: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    inferred: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false")))
    pinned: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false")))
    created_at: datetime = ts()


class EntityMention(SQLModel, table=True):
    __tablename__ = "entity_mentions"
    __table_args__ = (
        UniqueConstraint("chunk_id", "entity_id", name="entity_mentions_chunk_entity_key"),
        Index("ix_entity_mentions_entity", "entity_id"),
        Index("ix_entity_mentions_version", "version_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    entity_id: uuid.UUID = fk("entities.id", ondelete="CASCADE")
    document_id: uuid.UUID = fk("documents.id", ondelete="CASCADE")
    version_id: uuid.UUID = fk("document_versions.id", ondelete="CASCADE")
    chunk_id: uuid.UUID = fk("document_chunks.id", ondelete="CASCADE")
    created_at: datetime = ts()
