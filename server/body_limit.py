"""One cap on every request body, enforced before anything parses it.

FastAPI reads a JSON body whole into memory before validation, so without a cap a client can make
a worker buffer gigabytes. This ASGI middleware refuses a declared ``Content-Length`` over the
limit at once and reads any other body (chunked, no length) itself, stopping as soon as it passes
the limit; both get 413 ``PAYLOAD_TOO_LARGE``. A body under the limit is replayed to the app
unchanged.

Paths with their own, stricter bounded reader are left alone: ``/api/uploads`` (``max_upload_bytes``,
``UPLOAD_TOO_LARGE``, streamed to the blob store) and Dify's ``/retrieval`` (256 KB, answered in
Dify's own error shape).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Routes that bound their own body (see the module docstring); Dify's aliases included.
EXEMPT_PATHS = frozenset({"/api/uploads", "/api/import-jobs", "/retrieval", "//retrieval", "/retrieval/retrieval"})
CODE = "PAYLOAD_TOO_LARGE"


class BodyLimitMiddleware:
    """``limit`` is called per request, so a changed setting applies without a restart (tests)."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        length = _content_length(scope)
        if length is not None and length > limit:
            await _too_large(send, limit)
            return
        if length is not None or not _chunked(scope):
            # A declared length within the limit: the server delivers no more than that. Neither
            # header: no body at all (HTTP/1.1).
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            msg = await receive()
            messages.append(msg)
            if msg["type"] != "http.request":
                break  # http.disconnect: let the app see it
            size += len(msg.get("body", b""))
            if size > limit:
                await _too_large(send, limit)
                return
            if not msg.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for k, v in scope["headers"]:
        if k == b"content-length":
            try:
                return int(v)
            except ValueError:
                return None
    return None


def _chunked(scope: Scope) -> bool:
    return any(k == b"transfer-encoding" for k, _ in scope["headers"])


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "error": CODE,
            "detail": f"the request body is larger than {limit} bytes",
            "limit": "max_json_body_bytes",
            "max": limit,
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def document_413(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the 413 answer to every operation that takes a request body (OpenAPI post-processing;
    an operation that documents its own 413, like uploads, keeps it)."""
    for path, ops in schema.get("paths", {}).items():
        if path in EXEMPT_PATHS:
            continue
        for op in ops.values():
            if not isinstance(op, dict) or "requestBody" not in op:
                continue
            entry = op.setdefault("responses", {}).setdefault(
                "413",
                {
                    "description": "PAYLOAD_TOO_LARGE (request body over MAX_JSON_BODY_BYTES)",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                },
            )
            codes = entry.setdefault("x-error-codes", [])  # tests/test_errors_catalogue.py reads these
            if CODE not in codes:
                codes.append(CODE)
    return schema
