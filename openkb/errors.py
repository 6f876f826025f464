"""Every OpenKB error, in one catalogue of stable codes (docs/api.md#error-codes).

Every adapter maps these the same way: the server renders ``{"error": code, "detail": ...}``
with ``http_status``; the CLI prints one line and exits with ``exit_code``; workers retry only
``retryable`` errors. A bare ``ValueError`` escaping a service is a bug, not a user error.

Rules of the catalogue (tests/test_errors_catalogue.py): every ``OpenKBError`` subclass is
defined here, has its own upper-case ``code`` (unique), a docstring saying when it is raised,
and ``surfaces``: where a caller can meet it. A code on the ``http`` surface must be listed by
the routes that raise it (``responses=errors_for(...)`` in ``server/errors.py``), so it is in
``/api/openapi.json``. Subclass the generic error of the same meaning (``NotFound``,
``PermissionDenied`` ...), so a caller that knows only the generic class still handles it.
"""

from __future__ import annotations

from typing import Any

HTTP, CLI, WORKER = "http", "cli", "worker"
EVERYWHERE = frozenset({HTTP, CLI, WORKER})


class OpenKBError(Exception):
    """Raised bare only for a failure with no better class (an unknown job name, a broken
    invariant): answered 500 ``INTERNAL_ERROR``."""

    code = "INTERNAL_ERROR"
    http_status = 500
    exit_code = 1
    retryable = False
    surfaces: frozenset[str] = EVERYWHERE

    def __init__(self, detail: str = "", **extra: Any) -> None:
        super().__init__(detail or self.code)
        self.detail = detail or self.code
        self.extra = extra

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


# --- generic: one per kind of failure; the specific errors below subclass these ------------------


class ValidationError(OpenKBError):
    """Input a service refuses (wrong type, bad value, unknown reference form); names the field."""

    code = "VALIDATION_ERROR"
    http_status = 422
    exit_code = 2


class ConfigError(OpenKBError):
    """A setting is malformed or points at something unusable (names the variable); also a
    Milvus collection whose shape does not match its profile."""

    code = "CONFIG_ERROR"
    http_status = 500
    exit_code = 78  # EX_CONFIG


class ServiceUnavailable(OpenKBError):
    """A dependency (PostgreSQL, Milvus, queue, blob store, mail) cannot be reached."""

    code = "SERVICE_UNAVAILABLE"
    http_status = 503
    exit_code = 69  # EX_UNAVAILABLE
    retryable = True


class AlreadyRunning(OpenKBError):
    """``openkb up`` finds another instance running on the same home or port."""

    code = "ALREADY_RUNNING"
    http_status = 409
    exit_code = 75
    surfaces = frozenset({CLI})


class NotFound(OpenKBError):
    """No such object. Also raised for objects the caller may not see: never reveal existence."""

    code = "NOT_FOUND"
    http_status = 404
    exit_code = 4


class Unauthenticated(OpenKBError):
    """No valid credential where one is required (missing, unknown, expired or revoked)."""

    code = "UNAUTHENTICATED"
    http_status = 401
    exit_code = 5


class PermissionDenied(OpenKBError):
    """Only for callers who can see the object but may not perform this action on it."""

    code = "PERMISSION_DENIED"
    http_status = 403
    exit_code = 6


class Conflict(OpenKBError):
    """The request contradicts the current state (an object in the way, a state that forbids it)."""

    code = "CONFLICT"
    http_status = 409
    exit_code = 7


class AlreadyExists(Conflict):
    """A unique name, slug or email is already taken in its scope."""

    code = "ALREADY_EXISTS"


class VersionConflict(Conflict):
    """A save or restore names a base version that is no longer the document's current one."""

    code = "VERSION_CONFLICT"


class MarkdownDialectError(OpenKBError):
    """Markdown uses a construct outside the dialect (docs/markdown.md); lists each problem."""

    code = "MARKDOWN_DIALECT_ERROR"
    http_status = 422
    exit_code = 2


class HashMismatch(ValidationError):
    """The client's hash of its Markdown differs from the server's (a lossy editor round trip)."""

    code = "MARKDOWN_HASH_MISMATCH"


class PayloadTooLarge(OpenKBError):
    """The request body is over the server's cap (MAX_JSON_BODY_BYTES), before it is parsed."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413
    exit_code = 2


class LimitExceeded(OpenKBError):
    """A structural limit (folder depth, count) rather than a byte size."""

    code = "LIMIT_EXCEEDED"
    http_status = 422
    exit_code = 2


class RateLimited(OpenKBError):
    """Too many attempts in a window (``retry_after`` seconds in ``extra``, sent as Retry-After)."""

    code = "RATE_LIMITED"
    http_status = 429
    exit_code = 8
    retryable = True


class IndexError_(OpenKBError):
    """Milvus refused or failed an index write, alias switch or compaction; retried by workers."""

    code = "INDEX_ERROR"
    http_status = 502
    exit_code = 69
    retryable = True


# --- Dify External Knowledge (POST /retrieval; the server renders these in Dify's wire shape) ----


class DifyKeyRejected(PermissionDenied):
    """The Dify API key is unknown, disabled, revoked or expired, or may not read the knowledge
    base its ``knowledge_id`` maps to (Dify shows 403 ``error_code`` 1002)."""

    code = "DIFY_KEY_REJECTED"


class DifyKnowledgeNotFound(NotFound):
    """The ``knowledge_id`` Dify sent is not mapped in the key's tenant, or its mapping is
    disabled (Dify shows 404 ``error_code`` 2001)."""

    code = "DIFY_KNOWLEDGE_NOT_FOUND"


# --- Import (docs/importing.md) ------------------------------------------------------------------


class UnsupportedFileType(ValidationError):
    """An imported file is of a kind no converter handles (judged by its bytes, not its name:
    binary content named ``.md``, an archive inside an import); that file fails, the batch goes
    on. Over HTTP: an import job or a ``convert`` write names such a file."""

    code = "UNSUPPORTED_FILE_TYPE"
    http_status = 415
    surfaces = frozenset({CLI, WORKER})


class ConversionFailed(ValidationError):
    """A converter cannot read an imported file: damaged, password-protected or encrypted,
    invalid UTF-8, a zip bomb (too many entries, too large or too compressed once expanded), a
    path leaving the import (``..``, a symlink out), a name that collides with another; that
    file fails with this reason, the batch goes on."""

    code = "CONVERSION_FAILED"
    surfaces = frozenset({CLI, WORKER})


class ImportIncomplete(OpenKBError):
    """``openkb import`` finished but at least one file failed (each is listed with its reason);
    re-running the same command retries only what is missing."""

    code = "IMPORT_INCOMPLETE"
    http_status = 422
    exit_code = 3
    surfaces = frozenset({CLI})


# --- OAuth authorization server (/oauth/*; the server renders these in OAuth's wire shape) -------


class OAuthProtocolError(ValidationError):
    """An OAuth endpoint (token, registration, revocation, authorize) refuses a request: the
    OAuth routes answer ``{"error": "<oauth_error>", "error_description": ...}`` (RFC 6749
    §5.2, RFC 7591 §3.2.2) with the instance's status, or redirect with the error where RFC 6749
    §4.1.2.1 says so (docs/oauth.md#errors)."""

    code = "OAUTH_ERROR"
    http_status = 400
    surfaces = frozenset({HTTP})

    def __init__(self, oauth_error: str, description: str, *, status: int = 400) -> None:
        super().__init__(description)
        self.oauth_error = oauth_error
        self.http_status = status

    def to_oauth(self) -> dict[str, str]:
        return {"error": self.oauth_error, "error_description": self.detail}
