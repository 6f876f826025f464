"""Dify's External Knowledge wire format (docs/dify.md): header, body and error shape.

What Dify sends and accepts is an HTTP matter, so it lives here, not in ``openkb.dify``: the
domain gets a token and a ``RetrievalQuery`` and raises its own errors; this module turns those
into Dify's ``{"error_code", "error_msg"}`` with the status Dify reacts to.

Error table (Dify shows the body to the user; it does not parse the code):

====  ======  ==========================  ==================================================
HTTP  code    OpenKB error                meaning
====  ======  ==========================  ==================================================
403   1001    (this module)               Authorization header missing or not exactly
                                          ``Bearer <key>`` (also "Bearer Bearer x")
403   1002    DIFY_KEY_REJECTED           unknown, disabled, revoked or expired key; or the
                                          key may not read the knowledge base
404   2001    DIFY_KNOWLEDGE_NOT_FOUND    knowledge_id not mapped (or mapping disabled, or in
                                          another tenant)
400   2002    VALIDATION_ERROR,           malformed request body (not JSON, wrong types,
              INVALID_METADATA_CONDITION  unknown comparison_operator ...)
429   3001    RATE_LIMITED                this key's rate limit is exhausted (Retry-After)
503   5001    SERVICE_UNAVAILABLE,        the database or search backend is unavailable
              INDEX_ERROR                 (Dify retries 503)
500   5000    anything else               unexpected server error
====  ======  ==========================  ==================================================

``error_code`` 1001/1002/2001 follow Dify's documentation; 2002/3001/500x are OpenKB's.
422 is never returned: FastAPI's validation shape would be shown raw in Dify. Trap: the order
of checks matters — a stranger learns nothing about the body (key first, then body errors).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from openkb.content.limits import check_text
from openkb.dify import conditions as cond
from openkb.dify.service import RetrievalQuery
from openkb.errors import (
    DifyKeyRejected,
    DifyKnowledgeNotFound,
    IndexError_,
    OpenKBError,
    RateLimited,
    ServiceUnavailable,
    ValidationError,
)

BAD_AUTH_HEADER = 1001
AUTH_FAILED = 1002
KNOWLEDGE_NOT_FOUND = 2001
BAD_REQUEST = 2002
RATE_LIMITED = 3001
INTERNAL = 5000
UNAVAILABLE = 5001

MAX_BODY_BYTES = 256 * 1024
MAX_QUERY_CHARS = 10_000  # refused above this; the search itself takes the first 2000


class DifyError(Exception):
    """A failure as Dify receives it: ``{"error_code", "error_msg"}`` with ``status``.

    ``error`` is OpenKB's code for the same failure (audited next to Dify's number)."""

    def __init__(
        self, status: int, error_code: int, error_msg: str, *, error: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(error_msg)
        self.status = status
        self.error_code = error_code
        self.error_msg = error_msg
        self.error = error
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "error_msg": self.error_msg}


# Most specific first: the first class an error is an instance of decides.
_WIRE: tuple[tuple[type[OpenKBError], int, int], ...] = (
    (DifyKeyRejected, 403, AUTH_FAILED),
    (DifyKnowledgeNotFound, 404, KNOWLEDGE_NOT_FOUND),
    (RateLimited, 429, RATE_LIMITED),
    (ValidationError, 400, BAD_REQUEST),
    (ServiceUnavailable, 503, UNAVAILABLE),
    (IndexError_, 503, UNAVAILABLE),
)


def to_wire(exc: OpenKBError) -> DifyError:
    """The Dify answer for a domain error; an unlisted class is a 500 5000 (logged by the caller)."""
    for cls, status, number in _WIRE:
        if isinstance(exc, cls):
            headers = {"Retry-After": str(exc.extra.get("retry_after", 1))} if status == 429 else None
            msg = exc.detail
            if status == 503:
                msg = "OpenKB's database or search backend is unavailable; try again shortly"
            return DifyError(status, number, msg, error=exc.code, headers=headers)
    return internal_error(exc.code)


def internal_error(error: str = "INTERNAL_ERROR") -> DifyError:
    return DifyError(500, INTERNAL, "internal error (see the OpenKB server log)", error=error)


def too_large() -> DifyError:
    return DifyError(400, BAD_REQUEST, f"request body larger than {MAX_BODY_BYTES} bytes", error=ValidationError.code)


# --- request -------------------------------------------------------------------------------------


class RetrievalSetting(BaseModel):
    model_config = ConfigDict(extra="ignore")

    top_k: int | None = Field(None, description="null = the key's limit; capped by it")
    score_threshold: float | None = Field(None, description="0.0 or null = disabled")

    @field_validator("top_k")
    @classmethod
    def _positive(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError("top_k must be at least 1")
        return v

    @field_validator("score_threshold")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not (v == v and abs(v) != float("inf")):
            raise ValueError("score_threshold must be a finite number")
        return v


class RetrievalRequest(BaseModel):
    """Dify's body. ``knowledge_id`` "" is the registration probe; extra fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    knowledge_id: str = ""
    query: str = ""
    retrieval_setting: RetrievalSetting | None = None
    metadata_condition: dict[str, Any] | None = None

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        if len(v) > MAX_QUERY_CHARS:
            raise ValueError(f"query is longer than {MAX_QUERY_CHARS} characters")
        return v

    @field_validator("knowledge_id")
    @classmethod
    def _kid(cls, v: str) -> str:
        v = v.strip()
        if len(v) > 255:
            raise ValueError("knowledge_id is longer than 255 characters")
        return v


@dataclass(frozen=True)
class ParsedRequest:
    knowledge_id: str
    query: RetrievalQuery


def parse_authorization(header: str | None) -> str:
    """Exactly ``Bearer <key>``: scheme case-insensitive, one token, no spaces in it.

    Trap: users paste "Bearer okdify_..." into Dify's key field, which then sends
    "Bearer Bearer okdify_...". That is a malformed header (1001), not an unknown key, so the
    message can say what went wrong.
    """
    if header is None or not header.strip():
        raise DifyError(
            403,
            BAD_AUTH_HEADER,
            "missing Authorization header; expected 'Authorization: Bearer okdify_...'",
            error="UNAUTHENTICATED",
        )
    parts = header.strip().split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        hint = ""
        if len(parts) >= 3 and parts[0].lower() == "bearer" and parts[1].lower() == "bearer":
            hint = " ('Bearer ' was typed into the key: paste only the okdify_... key in Dify)"
        raise DifyError(
            403,
            BAD_AUTH_HEADER,
            "invalid Authorization header format; expected 'Bearer <api-key>'" + hint,
            error="UNAUTHENTICATED",
        )
    return parts[1]


def _bad_body(msg: str) -> DifyError:
    return DifyError(400, BAD_REQUEST, msg, error=ValidationError.code)


def parse_body(raw: bytes) -> ParsedRequest:
    """JSON (``\\uXXXX`` escapes included) -> validated request; any problem is 400 2002."""
    if len(raw) > MAX_BODY_BYTES:
        raise too_large()
    try:
        data = json.loads(raw.decode("utf-8") if raw else "{}")
    except ValueError as exc:  # not UTF-8, not JSON, or a number past Python's 4,300 digits
        raise _bad_body(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _bad_body("request body must be a JSON object")
    try:
        body = RetrievalRequest.model_validate(data)
    except PydanticValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise _bad_body(f"invalid request body: {loc}: {first.get('msg', 'invalid')}") from None
    try:
        check_text(body.knowledge_id, "knowledge_id")
    except ValidationError as exc:  # a NUL or lone surrogate would reach identify's SQL: a 500
        raise _bad_body(f"invalid request body: {exc.detail}") from None
    try:
        condition = cond.parse_condition(body.metadata_condition)
    except cond.ConditionError as exc:
        raise DifyError(400, BAD_REQUEST, f"invalid metadata_condition: {exc.detail}", error=exc.code) from None
    setting = body.retrieval_setting or RetrievalSetting()
    return ParsedRequest(
        knowledge_id=body.knowledge_id,
        query=RetrievalQuery(
            query=body.query, top_k=setting.top_k, score_threshold=setting.score_threshold, condition=condition
        ),
    )


# --- OpenAPI -------------------------------------------------------------------------------------


class DifyErrorBody(BaseModel):
    error_code: int
    error_msg: str


def openapi_responses() -> dict[int | str, dict[str, Any]]:
    """The error responses of ``POST /retrieval``: Dify's number and OpenKB's codes per status."""
    rows: dict[int, tuple[list[str], list[str]]] = {
        400: (["2002 malformed body"], [ValidationError.code, cond.ConditionError.code]),
        403: (["1001 bad Authorization header", "1002 key invalid or not allowed"], [DifyKeyRejected.code]),
        404: (["2001 knowledge_id not mapped"], [DifyKnowledgeNotFound.code]),
        429: (["3001 rate limit of this key (Retry-After)"], [RateLimited.code]),
        500: (["5000 unexpected error"], [OpenKBError.code]),
        503: (["5001 database or search backend unavailable"], [ServiceUnavailable.code, IndexError_.code]),
    }
    out: dict[int | str, dict[str, Any]] = {}
    for status, (numbers, codes) in rows.items():
        desc = "; ".join(numbers) + (f" (OpenKB: {', '.join(codes)})" if codes else "")
        out[status] = {"model": DifyErrorBody, "description": desc, "x-error-codes": codes}
    return out
