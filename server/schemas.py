"""The one base class of every request body the API accepts.

Why: a field the route does not know used to be dropped in silence, so ``PUT /api/documents/:id``
with ``{"markdown": ...}`` answered 200 and saved nothing. Every request model derives from
``RequestModel`` (``extra="forbid"``), and ``server.errors`` turns the resulting error into
``422 VALIDATION_ERROR`` naming the field, the fields the route does accept and, where a model
says so in ``unknown_field_hints``, where that field belongs instead (docs/api.md).

Trap: a model that subclasses ``pydantic.BaseModel`` directly is back to dropping fields;
``tests/api/test_request_models.py`` walks every route of the app and fails on such a model,
nested ones included. Response models stay plain ``BaseModel`` (they may carry extra keys).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class RequestModel(BaseModel):
    """Base of request bodies: unknown fields are a 422 naming them, never ignored."""

    model_config = ConfigDict(extra="forbid")

    # field name -> where that data goes instead; appended to the "unknown field" message.
    unknown_field_hints: ClassVar[dict[str, str]] = {}
