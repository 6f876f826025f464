"""Render domain errors as ``{"error": CODE, "detail": ...}`` — never a bare 500 for user mistakes."""

from __future__ import annotations

import logging
import sys
import time
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from sqlalchemy.exc import DataError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from openkb.db import database_error
from openkb.errors import DatabaseUnavailable, OpenKBError, TransactionConflict
from openkb.logthrottle import throttled
from server.logs import request_id_var
from server.retry import RETRYABLE_HEADER

log = logging.getLogger("openkb.server")

_STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    422: "VALIDATION_ERROR",
    429: "RATE_LIMITED",
    503: "SERVICE_UNAVAILABLE",
}


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
    return {
        s: {"model": ErrorBody, "description": ", ".join(codes) or "error", "x-error-codes": codes}
        for s, codes in sorted(by_status.items())
    }


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``errors_for`` with generic codes only (kept for routes that don't name their errors yet)."""
    return errors_for(*statuses)


def install(app: FastAPI) -> None:
    _document_invalid_json(app)

    @app.exception_handler(OpenKBError)
    async def _domain(request: Request, exc: OpenKBError) -> JSONResponse:
        if exc.http_status >= 500:  # once a minute per code, with a count: an outage must not flood the log
            throttled(
                log, exc.code, logging.WARNING, "%s %s -> %s %s", request.method, request.url.path, exc.code, exc.detail
            )
        headers = None
        if exc.http_status in (429, 503):  # 503: an outage (docs/api.md#status-codes); retry later
            headers = {"Retry-After": str(exc.extra.get("retry_after", 1 if exc.http_status == 429 else 5))}
        if exc.http_status == 416:  # RangeNotSatisfiable: the length a range must fit in (RFC 9110 §15.5.17)
            headers = {"Content-Range": f"bytes */{exc.extra.get('size', '*')}"}
        if isinstance(exc, TransactionConflict):
            headers = {**(headers or {}), RETRYABLE_HEADER: "1"}  # server/retry.py runs the write again
        return JSONResponse(exc.to_dict(), status_code=exc.http_status, headers=headers)

    @app.exception_handler(OperationalError)
    async def _db_down(request: Request, exc: OperationalError) -> JSONResponse:
        # PostgreSQL unreachable mid-request (restarting): an outage, not a bug; no traceback
        err = database_error(exc)
        if isinstance(err, TransactionConflict):  # a deadlock with a concurrent write: retried
            return await _domain(request, err)
        throttled(
            log,
            "db-down",
            logging.WARNING,
            "%s %s -> DATABASE_UNAVAILABLE %s",
            request.method,
            request.url.path,
            str(exc.orig).splitlines()[0][:200] if exc.orig else exc,
        )
        err = DatabaseUnavailable("the database is unavailable, try again shortly", retry_after=5)
        return JSONResponse(err.to_dict(), status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = list(exc.errors())
        bad_json = next((e for e in errs if e.get("type") == "json_invalid"), None)
        if bad_json is not None:
            return JSONResponse(
                {"error": "INVALID_JSON", "detail": _json_error_detail(bad_json, exc.body)}, status_code=400
            )
        # Unknown fields first: a misspelt name ("titel") also shows up as a missing "title".
        errs.sort(key=lambda e: e.get("type") != "extra_forbidden")
        first = errs[0] if errs else {}
        return JSONResponse(
            {
                "error": "VALIDATION_ERROR",
                "detail": _validation_detail(request, first),
                "errors": [
                    {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg")), "type": str(e.get("type"))}
                    for e in errs[:20]
                ],
            },
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and _browser_navigation(request):
            page = _not_found_page(request)
            if page is not None:
                return page
        code = _STATUS_CODES.get(exc.status_code, "HTTP_ERROR")
        detail = str(exc.detail)
        if exc.status_code == 400 and detail == _FASTAPI_BODY_PARSE_ERROR:
            # FastAPI's words for any error of the JSON parser other than a syntax error; the
            # parser's own exception is the cause (``raise ... from e``)
            code, detail = "INVALID_JSON", _body_parse_detail(exc.__cause__)
        return JSONResponse(
            {"error": code, "detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(DataError)
    async def _data(request: Request, exc: DataError) -> JSONResponse:
        # Values PostgreSQL refuses to store (NUL bytes, out-of-range numbers) are bad input.
        first = str(exc.orig).splitlines()[0] if exc.orig else "invalid value"
        return JSONResponse({"error": "VALIDATION_ERROR", "detail": f"invalid value: {first}"}, status_code=422)

    # Unexpected exceptions: RequestFrame below, added by create_app around every other layer.


class RequestFrame:
    """What every HTTP request runs inside, outside every other layer but HEAD's: its id, and one
    500 for an exception no handler knows.

    * The id is the caller's ``X-Request-Id`` or a new one: in every log line written while the
      request runs (``server/logs.py``) and in its response's ``X-Request-Id``.
    * An unexpected exception becomes ``500 INTERNAL_ERROR``, logged once with its traceback. Not
      ``app.exception_handler(Exception)``: Starlette runs that handler and then raises the
      exception again for the server to log, and uvicorn, seeing an exception after the response
      had started, logged a second traceback and closed the connection; the client's next request
      on that kept-alive connection failed with "connection reset". Here nothing escapes once the
      500 is sent. A failure after the response had started (a stream cut short) cannot become a
      500: it is logged and the response is left incomplete, so the server closes the connection
      and the client sees the truncation.

    Plain ASGI, not Starlette's ``BaseHTTPMiddleware`` (``@app.middleware("http")``, which the id
    was): that one re-sends the app's response from a second task, and when a streamed body failed
    half-way it still ended the body properly, so a cut export looked complete to the client."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = ""
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                rid = value.decode("latin-1")[:128]
                break
        rid = rid or uuid.uuid4().hex[:16]
        token = request_id_var.set(rid)
        t = time.perf_counter()
        status = 0

        async def framed(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", rid.encode("latin-1"))]
            await send(message)

        try:
            await self.app(scope, receive, framed)
        except Exception:
            log.exception(
                "unhandled error on %s %s%s",
                scope.get("method"),
                scope.get("path"),
                " (after the response had started: it is cut short)" if status else "",
            )
            if not status:
                body = {"error": "INTERNAL_ERROR", "detail": "internal error (see server log)"}
                await JSONResponse(body, status_code=500)(scope, receive, framed)
        finally:
            log.debug("%s %s %s %.1fms", scope["method"], scope["path"], status, (time.perf_counter() - t) * 1000)
            request_id_var.reset(token)


# --- a browser that asked for a page we do not have ---------------------------------------------

# paths whose callers are programs: they keep the JSON 404 whatever they accept
_PROGRAM_PREFIXES = (
    "/api",
    "/mcp",
    "/retrieval",
    "/oauth/",
    "/.well-known/",
    "/assets/",
    "/healthz",
    "/readyz",
)


def _browser_navigation(request: Request) -> bool:
    """A person's browser opening a URL (a typo, an old bookmark): a GET for a page, asking for
    HTML first, outside the routes programs call."""
    if request.method != "GET" or request.url.path.startswith(_PROGRAM_PREFIXES):
        return False
    accept = request.headers.get("accept", "")
    return "text/html" in accept.split(",", 1)[0]


def _not_found_page(request: Request) -> Response | None:
    """The web app's own not-found page (its router matches no route: a link home), still with
    status 404; None when the app is not built (the JSON answer then)."""
    from server.web import index_page

    try:
        page = index_page(request)
    except OpenKBError:
        return None
    page.status_code = 404
    return page


# --- request validation: what the client sent wrong, in words --------------------------------------

_FASTAPI_BODY_PARSE_ERROR = "There was an error parsing the body"
_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true/false",
    type(None): "null",
    bytes: "raw bytes",
}


def _body_parse_detail(cause: BaseException | None) -> str:
    """Why a body that is not a JSON syntax error still did not parse: bytes that are not text,
    or a number past the digits Python converts (``sys.get_int_max_str_digits``, 4,300: a guard
    against quadratic-time conversion), which no field of the API takes anyway."""
    if isinstance(cause, ValueError) and not isinstance(cause, UnicodeError) and "digits" in str(cause):
        return f"a number in the body has more than {sys.get_int_max_str_digits()} digits"
    return "line 1, column 1: the body is not UTF-8 text"


def _json_error_detail(err: dict[str, Any], doc: Any) -> str:
    """``line L, column C: <decoder message>`` (1-based, like editors count)."""
    loc = err.get("loc", ())
    pos = loc[-1] if loc and isinstance(loc[-1], int) else 0
    text = doc if isinstance(doc, str) else ""
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    msg = (err.get("ctx") or {}).get("error") or err.get("msg") or "invalid JSON"
    return f"line {line}, column {column}: {msg}"


def _model_of(tp: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X``, ``X | None``, ``list[X]``, ``Annotated[X, ...]``)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        m = _model_of(arg)
        if m is not None:
            return m
    return None


def _model_at(request: Request, path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The request model that holds the field at ``path`` (the error's loc without ``body`` and the
    field itself), found from the route's body parameter; None when it can't be told."""
    field = getattr(request.scope.get("route"), "body_field", None)
    model = _model_of(getattr(getattr(field, "field_info", None), "annotation", None))
    for part in path:
        if isinstance(part, int):
            continue  # an item of a list
        if model is None:
            return None
        f = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        model = _model_of(f.annotation) if f is not None else None
    return model


def _kind(value: Any) -> str:
    for t, name in _JSON_KINDS.items():
        if type(value) is t:
            return name
    return type(value).__name__


def _validation_detail(request: Request, err: dict[str, Any]) -> str:
    """One line naming the offending field; unknown fields and non-object bodies get their own words."""
    raw = tuple(err.get("loc", ()))
    loc = raw[1:] if raw[:1] == ("body",) else raw
    where = ".".join(str(p) for p in loc)
    typ = err.get("type")
    if typ == "extra_forbidden" and loc:
        model = _model_at(request, loc[:-1])
        text = f"{where}: unknown field, not accepted here"
        if model is not None:
            hint = getattr(model, "unknown_field_hints", {}).get(str(loc[-1]))
            if hint:
                text += f" ({hint})"
            accepted = [f.alias or n for n, f in model.model_fields.items()]
            text += f"; accepted fields: {', '.join(accepted)}"
        return text
    if raw == ("body",):
        if typ == "missing":
            return "the request body is missing: send a JSON object (Content-Type: application/json)"
        if typ in ("model_attributes_type", "model_type", "dict_type"):
            value = err.get("input")
            if isinstance(value, (bytes, bytearray)):
                ctype = request.headers.get("content-type") or "none"
                return f"send the body as a JSON object with Content-Type: application/json (got Content-Type: {ctype})"
            return f"the request body must be a JSON object, not {_kind(value)}"
    return f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg", "invalid"))


def _document_invalid_json(app: FastAPI) -> None:
    """Document ``400 INVALID_JSON`` on every operation that takes a JSON body (OpenAPI
    post-processing around FastAPI's own ``app.openapi``; create_app may wrap it again)."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = base()
        for ops in schema.get("paths", {}).values():
            for op in ops.values():
                if not isinstance(op, dict) or "application/json" not in op.get("requestBody", {}).get("content", {}):
                    continue
                op.setdefault("responses", {}).setdefault(
                    "400",
                    {
                        "description": "INVALID_JSON (the body is not valid JSON: detail names line and column)",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                    },
                )
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
