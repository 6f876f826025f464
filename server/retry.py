"""Run a write again when PostgreSQL broke a deadlock by rolling it back (docs/api.md#status-codes).

Two units of work that lock the same rows in a different order (a purge of a subtree and the
index worker marking the same pages indexed) deadlock now and then; PostgreSQL then rolls one
of them back with SQLSTATE 40P01 (or 40001 for a serialization failure). Nothing of that one was
written, so running the request again is safe: jobs are enqueued only after a commit and blobs
written by a rolled-back unit of work are deleted with it. The error handlers mark such an answer
(``TRANSACTION_CONFLICT`` with the internal ``RETRYABLE_HEADER``); this middleware swallows it
and replays the buffered request up to ``ATTEMPTS`` times, then lets the last answer through
(503 with ``Retry-After: 1``) without the internal header. It sits inside the body limit
(server/body_limit.py), which has already read the body within its size and time bounds: a
slow-loris body is cut off there before this one waits for it.

Trap: only bodies it can hold are replayed: JSON and empty bodies up to ``MAX_REPLAY_BYTES``.
Uploads (multipart) pass through untouched and answer the 503 themselves.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

RETRYABLE_HEADER = "x-openkb-retryable"
ATTEMPTS = 3
MAX_REPLAY_BYTES = 8 * 1024 * 1024
_SAFE = {"GET", "HEAD", "OPTIONS"}


class RetryOnConflict:
    def __init__(self, app: ASGIApp, attempts: int = ATTEMPTS) -> None:
        self.app = app
        self.attempts = attempts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _SAFE or not _replayable(scope):
            await self.app(scope, receive, _strip(send))
            return
        body: list[Message] = []
        size = 0
        while True:
            msg = await receive()
            body.append(msg)
            if msg["type"] != "http.request":
                break
            size += len(msg.get("body", b""))
            if size > MAX_REPLAY_BYTES:  # too big to hold: run it once, reading the rest live
                await self.app(scope, _replay(body, receive), _strip(send))
                return
            if not msg.get("more_body", False):
                break
        for attempt in range(1, self.attempts + 1):
            last = attempt == self.attempts
            out = _Capture(send, passthrough=last)
            await self.app(scope, _replay(body, receive), out)
            if not out.retry:
                return
            await asyncio.sleep(random.uniform(0.01, 0.05) * attempt)  # let the other writer finish


def _replayable(scope: Scope) -> bool:
    headers = dict(scope.get("headers") or [])
    ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return ctype in (b"", b"application/json") or ctype.endswith(b"+json")


def _replay(body: list[Message], receive: Receive) -> Receive:
    it = iter(body)

    async def rcv() -> Message:
        try:
            return next(it)
        except StopIteration:
            return await receive()  # after the body: the client's disconnect, when it comes

    return rcv


class _Capture:
    """Holds back an answer marked retryable (unless this is the last attempt); passes the rest."""

    def __init__(self, send: Send, *, passthrough: bool) -> None:
        self.send = send
        self.passthrough = passthrough
        self.retry = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            marked = any(k.lower() == RETRYABLE_HEADER.encode() for k, _ in message.get("headers", []))
            if marked and not self.passthrough:
                self.retry = True
                return
            message = _without_marker(message)
        elif self.retry:
            return  # the body of an answer being replaced
        await self.send(message)


def _strip(send: Send) -> Send:
    async def snd(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = _without_marker(message)
        await send(message)

    return snd


def _without_marker(message: Message) -> dict[str, Any]:
    headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != RETRYABLE_HEADER.encode()]
    return {**message, "headers": headers}
