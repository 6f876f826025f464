"""One catalogue of error codes (``openkb/errors.py``, docs/api.md#error-codes).

* Every ``OpenKBError`` subclass anywhere in the code lives in the catalogue, names its own
  upper-case ``code`` (unique), says in a docstring when it is raised, and says on which
  surfaces (``http``, ``cli``, ``worker``) a caller can meet it.
* Every code a caller can meet over HTTP is in the OpenAPI document, listed by the routes that
  raise it (``x-error-codes``, written by ``server.errors.errors_for``).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest

from openkb import errors as catalogue
from openkb.errors import OpenKBError

PACKAGES = ("openkb", "server", "cli", "workers")
SURFACES = {"http", "cli", "worker"}


def _import_everything() -> None:
    for name in PACKAGES:
        pkg = importlib.import_module(name)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=name + "."):
            importlib.import_module(info.name)


def error_classes() -> list[type[OpenKBError]]:
    """OpenKBError and every subclass defined anywhere in the four packages."""
    _import_everything()
    seen: list[type[OpenKBError]] = []
    todo = [OpenKBError]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return sorted(seen, key=lambda c: c.code)


@pytest.fixture(scope="module")
def classes() -> list[type[OpenKBError]]:
    return error_classes()


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    """The app's OpenAPI document, built in process (no database needed for the document)."""
    from sqlalchemy import create_engine

    from openkb import jobs
    from openkb.config import Settings
    from server.app import create_app

    previous = jobs._queue
    try:
        engine = create_engine("postgresql+psycopg://")  # never connects: the document needs no database
        app = create_app(SimpleNamespace(settings=Settings(), engine=engine), queue=jobs.RecordingQueue(), warm=False)  # type: ignore[arg-type]
        return app.openapi()
    finally:
        jobs.set_queue(previous)  # create_app installs its queue process-wide


def documented_codes(spec: dict[str, Any]) -> dict[str, set[str]]:
    """code -> the "METHOD path status" entries that list it."""
    where: dict[str, set[str]] = defaultdict(set)
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if not isinstance(op, dict):
                continue
            for status, resp in op.get("responses", {}).items():
                for code in resp.get("x-error-codes", ()):
                    where[code].add(f"{method.upper()} {path} {status}")
    return where


# --- (a) the catalogue -----------------------------------------------------------------------------


def test_every_error_class_is_in_the_catalogue(classes):
    outside = [f"{c.__module__}.{c.__qualname__}" for c in classes if c.__module__ != catalogue.__name__]
    assert not outside, f"define these in openkb/errors.py and import them from there: {outside}"


def test_codes_are_unique_upper_case_and_each_class_names_its_own(classes):
    by_code: dict[str, list[str]] = defaultdict(list)
    for c in classes:
        assert "code" in vars(c), f"{c.__name__} inherits {c.code!r}: give it its own code"
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", c.code), c.code
        by_code[c.code].append(c.__name__)
    dupes = {code: names for code, names in by_code.items() if len(names) > 1}
    assert not dupes, f"codes used by more than one class: {dupes}"


def test_every_class_says_when_it_is_raised_and_where(classes):
    for c in classes:
        doc = vars(c).get("__doc__")
        assert doc and doc.strip(), f"{c.__name__} needs a docstring saying when it is raised"
        assert set(c.surfaces) <= SURFACES, (c.__name__, c.surfaces)
        assert c.surfaces or c.__subclasses__(), f"{c.__name__}: no surfaces, yet no subclass raises for it"
        assert 400 <= c.http_status <= 599 and 1 <= c.exit_code <= 125, c.__name__


# --- (b) every HTTP code is in the OpenAPI document ----------------------------------------------


def test_every_http_code_is_documented_by_a_route(classes, openapi):
    documented = documented_codes(openapi)
    missing = sorted(c.code for c in classes if "http" in c.surfaces and c.code not in documented)
    assert not missing, (
        f"these codes can reach an HTTP client but no route lists them (responses=errors_for(...)): {missing}"
    )


def test_cli_and_worker_only_codes_are_not_claimed_by_routes(classes, openapi):
    documented = documented_codes(openapi)
    claimed = sorted(c.code for c in classes if "http" not in c.surfaces and c.code in documented)
    assert not claimed, f"marked as not reaching HTTP, yet documented on routes: {claimed}"


# --- (c) routes with known raises list them --------------------------------------------------------

KNOWN_RAISES = [
    ("post", "/api/auth/login", "401", "INVALID_CREDENTIALS"),
    ("post", "/api/auth/login", "403", "ACCOUNT_SUSPENDED"),
    ("post", "/api/auth/login", "429", "RATE_LIMITED"),
    ("post", "/api/auth/register", "403", "REGISTRATION_DISABLED"),
    ("post", "/api/auth/verify-email", "400", "INVALID_TOKEN"),
    ("post", "/api/documents/{doc_id}/versions", "409", "VERSION_CONFLICT"),
    ("post", "/api/documents/{doc_id}/versions", "422", "MARKDOWN_DIALECT_ERROR"),
    ("post", "/api/documents/{doc_id}/versions", "413", "MARKDOWN_TOO_LARGE"),
    ("post", "/api/documents/{doc_id}/versions", "413", "PAYLOAD_TOO_LARGE"),
    ("put", "/api/knowledge-bases/{kb_id}/documents/by-key/{key}", "409", "DOCUMENT_IN_TRASH"),
    ("post", "/api/uploads", "415", "UNSUPPORTED_MEDIA_TYPE"),
    ("post", "/api/uploads", "413", "UPLOAD_TOO_LARGE"),
    ("post", "/api/changes/revert", "409", "REVERT_CONFLICT"),
    ("post", "/api/share/{token}/verify-password", "403", "SHARE_PASSWORD_INCORRECT"),
    ("post", "/api/invitations/{token}/accept", "410", "INVITATION_EXPIRED"),
    ("post", "/api/admin/milvus/rebuild-jobs", "409", "REBUILD_RUNNING"),
    ("post", "/retrieval", "403", "DIFY_KEY_REJECTED"),
    ("post", "/retrieval", "404", "DIFY_KNOWLEDGE_NOT_FOUND"),
    ("post", "/api/admin/dify/keys", "422", "INVALID_METADATA_CONDITION"),
    # from dependencies (server/app.py _document_auth_errors): cookie writes need the CSRF header,
    # routes that check token scopes say so
    ("post", "/api/documents", "403", "CSRF_FAILED"),
    ("post", "/api/documents", "403", "INSUFFICIENT_SCOPE"),
    ("get", "/api/admin/users", "403", "INSUFFICIENT_SCOPE"),
    ("get", "/api/documents/{doc_id}", "401", "UNAUTHENTICATED"),
    # the MCP gate (server/mcp/http.py) is no FastAPI route; server/mcp openapi_path() lists it
    ("post", "/mcp", "421", "MISDIRECTED_REQUEST"),
    ("post", "/mcp", "403", "INSUFFICIENT_SCOPE"),
]


@pytest.mark.parametrize(("method", "path", "status", "code"), KNOWN_RAISES)
def test_routes_list_the_codes_they_raise(openapi, method, path, status, code):
    op = openapi["paths"].get(path, {}).get(method)
    assert op is not None, f"{method.upper()} {path} is not in the OpenAPI document"
    listed = op.get("responses", {}).get(status, {}).get("x-error-codes", [])
    assert code in listed, f"{method.upper()} {path} {status} lists {listed}, not {code}"


def test_errors_for_groups_codes_by_status():
    from openkb.errors import AlreadyExists, NotFound, VersionConflict
    from server.errors import errors_for

    base = errors_for(401, NotFound)
    out = errors_for(base, VersionConflict, AlreadyExists, 404)
    assert {s: e["x-error-codes"] for s, e in out.items()} == {
        401: ["UNAUTHENTICATED"],
        404: ["NOT_FOUND"],
        409: ["VERSION_CONFLICT", "ALREADY_EXISTS"],
    }
    assert out[409]["description"] == "VERSION_CONFLICT, ALREADY_EXISTS"


def test_safe_methods_never_list_csrf_failed(openapi):
    """A GET with a session cookie needs no CSRF header (server/auth.py), so none documents it."""
    wrong = [
        f"GET {path}"
        for path, ops in openapi["paths"].items()
        if "CSRF_FAILED" in ops.get("get", {}).get("responses", {}).get("403", {}).get("x-error-codes", [])
    ]
    assert not wrong, wrong
