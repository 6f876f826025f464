"""Render domain errors as ``{"error": CODE, "detail": ...}`` — never a bare 500 for user mistakes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from openkb.errors import OpenKBError

log = logging.getLogger("openkb.server")

_STATUS_CODES = {400: "BAD_REQUEST", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 405: "METHOD_NOT_ALLOWED", 409: "CONFLICT", 413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE",
                 422: "VALIDATION_ERROR", 429: "RATE_LIMITED", 503: "SERVICE_UNAVAILABLE"}


class ErrorBody(BaseModel):
    """Every non-2xx response body."""

    error: str
    detail: str


ErrorSpec = int | type[OpenKBError] | Mapping[int | str, Mapping[str, Any]]


def errors_for(*errors: ErrorSpec) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` for the errors a route raises, e.g. ``errors_for(401, NotFound,
    VersionConflict)``: per status the ``ErrorBody`` shape and its codes, in the description and
    in ``x-error-codes`` (what clients and tests/test_errors_catalogue.py read).

    An ``int`` documents a status with its generic code (404 -> ``NOT_FOUND``); a class, its own
    code under its ``http_status``; a mapping (an earlier ``errors_for``), its codes. Trap: name
    the specific classes a route raises — a subclass's code is not implied by its base's.
    """
    by_status: dict[int, list[str]] = {}

    def add(status: int, code: str | None) -> None:
        codes = by_status.setdefault(status, [])
        if code and code not in codes:
            codes.append(code)

    for e in errors:
        if isinstance(e, int):
            add(e, _STATUS_CODES.get(e))
        elif isinstance(e, Mapping):
            for status, entry in e.items():
                for code in entry.get("x-error-codes", ()) or [None]:
                    add(int(status), code)
        else:
            add(e.http_status, e.code)
    return {s: {"model": ErrorBody, "description": ", ".join(codes) or "error", "x-error-codes": codes}
            for s, codes in sorted(by_status.items())}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``errors_for`` with generic codes only (kept for routes that don't name their errors yet)."""
    return errors_for(*statuses)


def install(app: FastAPI) -> None:
    @app.exception_handler(OpenKBError)
    async def _domain(request: Request, exc: OpenKBError) -> JSONResponse:
        if exc.http_status >= 500:
            log.warning("%s %s -> %s %s", request.method, request.url.path, exc.code, exc.detail)
        headers = {"Retry-After": str(exc.extra.get("retry_after", 1))} if exc.http_status == 429 else None
        return JSONResponse(exc.to_dict(), status_code=exc.http_status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        loc = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return JSONResponse({"error": "VALIDATION_ERROR", "detail": f"{loc}: {first.get('msg', 'invalid')}",
                             "errors": [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg"))}
                                        for e in errs[:20]]}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, "HTTP_ERROR")
        return JSONResponse({"error": code, "detail": str(exc.detail)}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(DataError)
    async def _data(request: Request, exc: DataError) -> JSONResponse:
        # Values PostgreSQL refuses to store (NUL bytes, out-of-range numbers) are bad input.
        first = str(exc.orig).splitlines()[0] if exc.orig else "invalid value"
        return JSONResponse({"error": "VALIDATION_ERROR", "detail": f"invalid value: {first}"}, status_code=422)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse({"error": "INTERNAL_ERROR", "detail": "internal error (see server log)"}, status_code=500)
