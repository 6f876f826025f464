"""One cap on every request body, enforced before anything parses it.

FastAPI reads a JSON body whole into memory before validation, so without a cap a client can make
a worker buffer gigabytes. This ASGI middleware refuses a declared ``Content-Length`` over the
limit at once and reads any other body (chunked, no length) itself, stopping as soon as it passes
the limit; both get 413 ``PAYLOAD_TOO_LARGE``. A body under the limit is replayed to the app
unchanged.

Two more abuse guards live here because they need the whole body before the app sees it
(issue 17; docs/api.md#body-limits):

* **slow bodies** (slow-loris): the body must arrive within ``body_timeout`` seconds
  (``REQUEST_BODY_TIMEOUT_SECONDS``, default 30) of the request start, else 408
  ``REQUEST_TIMEOUT`` and the connection is closed, so a client cannot hold a worker by
  trickling bytes;
* **deep JSON**: a JSON body nested deeper than ``MAX_JSON_DEPTH`` (64) is refused with 422
  ``JSON_TOO_DEEP`` before any parser recurses into it (Python's parser raised
  ``RecursionError`` on deep input: a 500).

Paths that read their body themselves, as a stream with their own size bound, are not buffered
here: ``/api/uploads`` and ``/api/import-jobs`` (``max_upload_bytes``, ``UPLOAD_TOO_LARGE``,
streamed to the blob store) and Dify's ``/retrieval`` (256 KB, answered in Dify's own error
shape). Their body is still bounded in time by the same rule (408 ``REQUEST_TIMEOUT``, connection
closed), checked on each chunk as the route reads it: the body must have arrived within
``body_timeout`` seconds plus the time its bytes take at ``STREAM_MIN_RATE`` (64 KiB/s), so a
large upload over a slow link passes and a trickle does not (a 50 MB upload may take up to about
14 minutes, below the API's idle-transaction bound in openkb/db.py). Trap: the route is already
running when the deadline passes, so the refusal is sent from the wrapped ``receive`` and the
route is unwound with :class:`_BodyTimedOut`, caught here (it must not reach the 500 handler,
which would log a traceback).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Routes that bound their own body (see the module docstring); Dify's aliases included.
EXEMPT_PATHS = frozenset({"/api/uploads", "/api/import-jobs", "/retrieval", "//retrieval", "/retrieval/retrieval"})
CODE = "PAYLOAD_TOO_LARGE"


MAX_JSON_DEPTH = 64
BODY_TIMEOUT_S = float(os.environ.get("REQUEST_BODY_TIMEOUT_SECONDS", "30") or 30)
STREAM_MIN_RATE = 64 * 1024  # bytes/s a streamed body earns extra time at (module docstring)
DIFY_PATHS = frozenset({"/retrieval", "//retrieval", "/retrieval/retrieval"})
# what a depth scan looks at: an escape pair (skipped whole), a quote, a bracket
_JSON_TOKENS = re.compile(rb'\\.|["\[\]{}]', re.DOTALL)


def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``body`` (JSON text) nests arrays/objects deeper than ``limit``, brackets inside
    strings not counted. Cheap: a regex walks only quotes, brackets and escapes."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth, in_string = 0, False
    for m in _JSON_TOKENS.finditer(body):
        tok = m.group()
        if tok[:1] == b"\\":
            continue
        if tok == b'"':
            in_string = not in_string
        elif not in_string:
            if tok in (b"[", b"{"):
                depth += 1
                if depth > limit:
                    return True
            else:
                depth -= 1
    return False


class BodyLimitMiddleware:
    """``limit`` is called per request, so a changed setting applies without a restart (tests)."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int], body_timeout: float | None = None) -> None:
        self.app = app
        self.limit = limit
        self._body_timeout = body_timeout

    @property
    def body_timeout(self) -> float:
        """Read per request: ``BODY_TIMEOUT_S`` unless the app was built with its own."""
        return BODY_TIMEOUT_S if self._body_timeout is None else self._body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in EXEMPT_PATHS:
            await self._streamed(scope, receive, send)
            return
        limit = self.limit()
        length = _content_length(scope)
        if length is not None and length > limit:
            await _too_large(send, limit)
            return
        if length in (None, 0) and not _chunked(scope):
            # Neither header (or an empty body): no body at all (HTTP/1.1).
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        deadline = asyncio.get_running_loop().time() + self.body_timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                if left <= 0:
                    raise TimeoutError
                msg = await asyncio.wait_for(receive(), timeout=left)
            except TimeoutError:
                await _refuse(
                    send, 408, "REQUEST_TIMEOUT", f"the request body did not arrive within {self.body_timeout:.0f} s"
                )
                return
            messages.append(msg)
            if msg["type"] != "http.request":
                break  # http.disconnect: let the app see it
            size += len(msg.get("body", b""))
            if size > limit:
                await _too_large(send, limit)
                return
            if not msg.get("more_body", False):
                break
        if _is_json(scope):
            body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
            if json_depth_exceeds(body):
                await _refuse(
                    send, 422, "JSON_TOO_DEEP", f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels"
                )
                return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _streamed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A route that reads its own body: pass the chunks through, bounded in time (module
        docstring); after the last chunk ``receive`` is the server's own again."""
        loop = asyncio.get_running_loop()
        timeout = self.body_timeout
        start = loop.time()
        state = {"received": 0, "done": False, "started": False, "refused": False}

        async def bounded_receive() -> Message:
            if state["done"]:
                return await receive()
            left = start + timeout + state["received"] / STREAM_MIN_RATE - loop.time()
            try:
                if left <= 0:
                    raise TimeoutError
                msg = await asyncio.wait_for(receive(), timeout=left)
            except TimeoutError:
                if not state["started"]:
                    state["refused"] = True
                    detail = f"the request body did not arrive within {timeout:.0f} s (plus its size at 64 KiB/s)"
                    extra = {"error_code": 2002, "error_msg": detail} if scope["path"] in DIFY_PATHS else {}
                    await _refuse(send, 408, "REQUEST_TIMEOUT", detail, extra)
                raise _BodyTimedOut from None
            if msg["type"] != "http.request" or not msg.get("more_body", False):
                state["done"] = True
            state["received"] += len(msg.get("body", b""))
            return msg

        async def guarded_send(message: Message) -> None:
            if state["refused"]:
                return  # the 408 is the answer; whatever the unwinding route sends is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, guarded_send)
        except _BodyTimedOut:
            return
        except Exception:
            if state["refused"]:
                return  # the route turned the unwinding into its own error: the 408 stands
            raise


class _BodyTimedOut(Exception):
    """Unwinds a route whose streamed body passed its deadline (the 408 is already sent)."""


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


def _is_json(scope: Scope) -> bool:
    for k, v in scope["headers"]:
        if k == b"content-type":
            return b"json" in v.lower()
    return False


async def _refuse(send: Send, status: int, code: str, detail: str, extra: dict[str, Any] | None = None) -> None:
    """``extra``: more fields (Dify's ``error_code``/``error_msg`` on its paths)."""
    body = json.dumps({"error": code, "detail": detail, **(extra or {})}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
    an operation that documents its own 413, like uploads, keeps it). The routes that stream their
    own body (``EXEMPT_PATHS``) get only the 408 their body is bounded by."""
    for path, ops in schema.get("paths", {}).items():
        for op in ops.values():
            if not isinstance(op, dict) or "requestBody" not in op:
                continue
            if path in EXEMPT_PATHS:
                _document_error(op, "408", "REQUEST_TIMEOUT", "the body arrived too slowly")
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
            _document_error(op, "408", "REQUEST_TIMEOUT", "the body arrived too slowly")
            _document_error(op, "422", "JSON_TOO_DEEP", "a JSON body nested too deeply")
    return schema


def _document_error(op: dict[str, Any], status: str, code: str, what: str) -> None:
    extra = op.setdefault("responses", {}).setdefault(
        status,
        {
            "description": f"{code} ({what})",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
        },
    )
    listed = extra.setdefault("x-error-codes", [])
    if code not in listed:
        listed.append(code)
        if extra.get("description") and code not in extra["description"]:
            extra["description"] += f", {code}"
