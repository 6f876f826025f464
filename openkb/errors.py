"""Domain exceptions with stable codes.

Every adapter maps these the same way: the server renders ``{"error": code, "detail": ...}``
with ``http_status``; the CLI prints one line and exits with ``exit_code``; workers retry only
``retryable`` errors. A bare ``ValueError`` escaping a service is a bug, not a user error.
"""

from __future__ import annotations

from typing import Any


class OpenKBError(Exception):
    code = "INTERNAL_ERROR"
    http_status = 500
    exit_code = 1
    retryable = False

    def __init__(self, detail: str = "", **extra: Any) -> None:
        super().__init__(detail or self.code)
        self.detail = detail or self.code
        self.extra = extra

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


class ValidationError(OpenKBError):
    code = "VALIDATION_ERROR"
    http_status = 422
    exit_code = 2


class ConfigError(OpenKBError):
    """A setting is malformed or points at something unusable (names the variable)."""

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
    code = "ALREADY_RUNNING"
    http_status = 409
    exit_code = 75


class NotFound(OpenKBError):
    """Also raised for objects the caller may not see: never reveal existence."""

    code = "NOT_FOUND"
    http_status = 404
    exit_code = 4


class Unauthenticated(OpenKBError):
    code = "UNAUTHENTICATED"
    http_status = 401
    exit_code = 5


class PermissionDenied(OpenKBError):
    """Only for callers who can see the object but may not perform this action on it."""

    code = "PERMISSION_DENIED"
    http_status = 403
    exit_code = 6


class Conflict(OpenKBError):
    code = "CONFLICT"
    http_status = 409
    exit_code = 7


class AlreadyExists(Conflict):
    code = "ALREADY_EXISTS"


class VersionConflict(Conflict):
    code = "VERSION_CONFLICT"


class MarkdownDialectError(OpenKBError):
    code = "MARKDOWN_DIALECT_ERROR"
    http_status = 422
    exit_code = 2


class HashMismatch(ValidationError):
    code = "MARKDOWN_HASH_MISMATCH"


class PayloadTooLarge(OpenKBError):
    code = "PAYLOAD_TOO_LARGE"
    http_status = 413
    exit_code = 2


class LimitExceeded(OpenKBError):
    """A structural limit (folder depth, count) rather than a byte size."""

    code = "LIMIT_EXCEEDED"
    http_status = 422
    exit_code = 2


class RateLimited(OpenKBError):
    code = "RATE_LIMITED"
    http_status = 429
    exit_code = 8
    retryable = True


class IndexError_(OpenKBError):
    """Milvus-side indexing failure; retried by workers."""

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
