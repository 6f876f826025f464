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
    surfaces: frozenset[str] = EVERYWHERE  # empty: a base class never raised itself

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
    Milvus collection whose shape does not match its profile. Met at start-up and by jobs; an
    API request meets one only if a setting broke after the server started (answered 500)."""

    code = "CONFIG_ERROR"
    http_status = 500
    exit_code = 78  # EX_CONFIG
    surfaces = frozenset({CLI, WORKER})


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
    """A structural limit (folder depth, count) rather than a byte size. Never raised itself:
    callers meet its subclasses (``FOLDER_DEPTH_EXCEEDED``, ``TOO_MANY_TAGS``)."""

    code = "LIMIT_EXCEEDED"
    http_status = 422
    exit_code = 2
    surfaces: frozenset[str] = frozenset()  # a base only


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


# --- accounts (docs/accounts.md) -----------------------------------------------------------------


class InvalidCredentials(Unauthenticated):
    """Login with an unknown email or a wrong password (one code for both: no account enumeration)."""

    code = "INVALID_CREDENTIALS"


class EmailNotVerified(PermissionDenied):
    """Login before the account's email address is confirmed."""

    code = "EMAIL_NOT_VERIFIED"


class AccountPendingActivation(PermissionDenied):
    """Login to an account an administrator has not activated yet (approval registration mode)."""

    code = "ACCOUNT_PENDING_ACTIVATION"


class AccountSuspended(PermissionDenied):
    """Login to a suspended account."""

    code = "ACCOUNT_SUSPENDED"


class RegistrationDisabled(PermissionDenied):
    """Self-registration while registration is closed."""

    code = "REGISTRATION_DISABLED"


class RegistrationInviteRequired(PermissionDenied):
    """Self-registration without an invitation where one is required."""

    code = "REGISTRATION_INVITE_REQUIRED"


class EmailDomainNotAllowed(ValidationError):
    """Registration (or an invitation's use) from an email domain that is not allowed."""

    code = "EMAIL_DOMAIN_NOT_ALLOWED"


class InvalidToken(OpenKBError):
    """A verification, reset or invitation token that is unknown, used or expired (not told apart)."""

    code = "INVALID_TOKEN"
    http_status = 400
    exit_code = 2


class CsrfFailed(PermissionDenied):
    """A cookie-authenticated unsafe request without the session's ``X-CSRF-Token`` header."""

    code = "CSRF_FAILED"
    surfaces = frozenset({HTTP})


class MisdirectedRequest(OpenKBError):
    """``/mcp`` called with a ``Host`` it does not serve (not APP_BASE_URL's host, loopback or
    ``MCP_ALLOWED_HOSTS``): the DNS-rebinding guard of docs/mcp.md."""

    code = "MISDIRECTED_REQUEST"
    http_status = 421
    exit_code = 2
    surfaces = frozenset({HTTP})


class InsufficientScope(PermissionDenied):
    """A personal access token lacks a scope the route needs (a browser session has them all)."""

    code = "INSUFFICIENT_SCOPE"


# --- content: size limits (docs/api.md#body-limits; checked in services, so every adapter agrees) ----


class MarkdownTooLarge(PayloadTooLarge):
    """A document body over the Markdown character limit (5,000,000 by default)."""

    code = "MARKDOWN_TOO_LARGE"


class TitleTooLong(PayloadTooLarge):
    """A title over 1,000 characters."""

    code = "TITLE_TOO_LONG"


class NameTooLong(PayloadTooLarge):
    """A name, description or upsert key over 1,000 characters."""

    code = "NAME_TOO_LONG"


class MetadataTooLarge(PayloadTooLarge):
    """Document metadata (or knowledge-base settings) over 64 KB as compact UTF-8 JSON."""

    code = "METADATA_TOO_LARGE"


class UploadTooLarge(PayloadTooLarge):
    """An uploaded asset over ``MAX_UPLOAD_BYTES``."""

    code = "UPLOAD_TOO_LARGE"


class RangeNotSatisfiable(OpenKBError):
    """An asset read with a ``Range`` that starts past the asset's last byte (416, with
    ``Content-Range: bytes */<size>`` so a player knows the real length)."""

    code = "RANGE_NOT_SATISFIABLE"
    http_status = 416
    exit_code = 2
    surfaces = frozenset({HTTP})


class FolderDepthExceeded(LimitExceeded):
    """A create or move that would nest folders deeper than the limit (10)."""

    code = "FOLDER_DEPTH_EXCEEDED"
    surfaces = EVERYWHERE  # not the base's "never raised itself"


class TooManyTags(LimitExceeded):
    """More tags on one document than the limit (256)."""

    code = "TOO_MANY_TAGS"
    surfaces = EVERYWHERE


class UnsupportedMedia(ValidationError):
    """An upload not sent as ``multipart/form-data`` with a ``file`` part."""

    code = "UNSUPPORTED_MEDIA_TYPE"
    http_status = 415
    surfaces = frozenset({HTTP})


# --- content: documents, tree, versions, revert --------------------------------------------------


class NotInTrash(ValidationError):
    """Restore-from-trash or purge of a document that is not in the trash."""

    code = "NOT_IN_TRASH"


class InvalidMove(ValidationError):
    """A move out of the document's knowledge base, or under itself or one of its descendants."""

    code = "INVALID_MOVE"


class ModelSettingsForbidden(ValidationError):
    """Knowledge-base settings that name embedding or model options (those live in index profiles)."""

    code = "MODEL_SETTINGS_FORBIDDEN"


class NotAPage(ValidationError):
    """A version save or restore on a folder (only pages have bodies)."""

    code = "NOT_A_PAGE"


class TooManyChanges(ValidationError):
    """Two versions compared (``GET /api/documents/{id}/diff``, MCP ``kb_get_document_changes``)
    whose changed stretches are too long to compare line by line within the server's bound."""

    code = "TOO_MANY_CHANGES"
    surfaces = frozenset({HTTP})


class DocumentInTrash(Conflict):
    """A keyed upsert whose key names a document in the trash, or a create, move or copy under a
    parent in the trash (restore or purge it first)."""

    code = "DOCUMENT_IN_TRASH"


class RevertConflict(Conflict):
    """A revert would silently overwrite a newer write, or cannot remove a non-empty object."""

    code = "REVERT_CONFLICT"


class NotRevertible(ValidationError):
    """A change that cannot be reverted (its kind, a closed invitation or share link, a lost version)."""

    code = "NOT_REVERTIBLE"


# --- sharing: share links and invitations (docs/permissions.md) ----------------------------------


class SharePasswordRequired(OpenKBError):
    """Opening a password-protected share link without having given its password."""

    code = "SHARE_PASSWORD_REQUIRED"
    http_status = 401
    exit_code = 5


class SharePasswordIncorrect(PermissionDenied):
    """A wrong share-link password (counted; too many is ``RATE_LIMITED``)."""

    code = "SHARE_PASSWORD_INCORRECT"


class InvitationExpired(OpenKBError):
    """Accepting an invitation past its expiry."""

    code = "INVITATION_EXPIRED"
    http_status = 410
    exit_code = 4


class InvitationExhausted(OpenKBError):
    """Accepting an invitation whose uses are all taken."""

    code = "INVITATION_EXHAUSTED"
    http_status = 410
    exit_code = 4


# --- indexing (docs/retrieval.md) ----------------------------------------------------------------


class RebuildBusy(Conflict):
    """A rebuild of the same collection is already running, or a drop hits a running rebuild."""

    code = "REBUILD_RUNNING"


# --- outages and abuse (docs/operations.md#index-operations, docs/api.md#body-limits) ------------


class IndexUnavailable(ServiceUnavailable):
    """Milvus cannot be reached (down or restarting) or its collection is still loading: search
    is refused for now (503 with ``Retry-After``); saves still work and indexing catches up."""

    code = "INDEX_UNAVAILABLE"


class TransactionConflict(ServiceUnavailable):
    """PostgreSQL rolled this unit of work back to break a deadlock or a serialization conflict
    with a concurrent one (SQLSTATE class 40): nothing was written. The server retries such a
    write itself a few times (docs/api.md#status-codes) before answering 503 with a short
    ``Retry-After``; a worker job is retried."""

    code = "TRANSACTION_CONFLICT"


class DatabaseUnavailable(ServiceUnavailable):
    """PostgreSQL cannot be reached (down or restarting): 503 with ``Retry-After``; nothing was
    written."""

    code = "DATABASE_UNAVAILABLE"


class IndexDataRejected(IndexError_):
    """Milvus refused a document's row for its content (a value it cannot store): the document
    is ``failed`` at once with this reason, never retried until it changes; other documents of
    the same job or repair are indexed anyway."""

    code = "INDEX_DATA_REJECTED"
    retryable = False
    surfaces = frozenset({CLI, WORKER})


class ValueOutOfRange(ValidationError):
    """An integer in ``metadata`` (or knowledge-base settings) outside signed 64 bits, which
    the index cannot store: refused when written instead of failing indexing later."""

    code = "VALUE_OUT_OF_RANGE"


class JsonTooDeep(ValidationError):
    """A JSON request body nested deeper than the server accepts (64 levels), refused before
    it is parsed into objects."""

    code = "JSON_TOO_DEEP"
    surfaces = frozenset({HTTP})


class RequestTimeout(OpenKBError):
    """A request body that arrives too slowly (slow-loris): the server stops waiting after
    ``REQUEST_BODY_TIMEOUT_SECONDS`` and answers 408."""

    code = "REQUEST_TIMEOUT"
    http_status = 408
    exit_code = 2
    surfaces = frozenset({HTTP})


# --- Dify External Knowledge (POST /retrieval; the server renders these in Dify's wire shape) ----


class ConditionError(ValidationError):
    """A Dify ``metadata_condition`` (or a key's metadata filter) that cannot be parsed."""

    code = "INVALID_METADATA_CONDITION"


class DifyKeyRejected(PermissionDenied):
    """The Dify API key is unknown, disabled, revoked or expired, or may not read the knowledge
    base its ``knowledge_id`` maps to (Dify shows 403 ``error_code`` 1002)."""

    code = "DIFY_KEY_REJECTED"


class DifyKnowledgeNotFound(NotFound):
    """The ``knowledge_id`` Dify sent is not mapped in the key's tenant, or its mapping is
    disabled (Dify shows 404 ``error_code`` 2001)."""

    code = "DIFY_KNOWLEDGE_NOT_FOUND"


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


class ConverterUnavailable(ConfigError):
    """``OPENKB_PDF_CONVERTER=mineru`` but MinerU is not usable here (no ``mineru`` executable,
    or not set up for local models: docs/importing.md#mineru); each PDF of the import fails with
    the reason instead of being converted by another converter than the one asked for."""

    code = "CONVERTER_UNAVAILABLE"
    surfaces = frozenset({CLI, WORKER})


class ImportIncomplete(OpenKBError):
    """``openkb import`` finished but at least one file failed (each is listed with its reason);
    re-running the same command retries only what is missing."""

    code = "IMPORT_INCOMPLETE"
    http_status = 422
    exit_code = 3
    surfaces = frozenset({CLI})


# --- export (docs/export.md) -----------------------------------------------------------------------


class DuplicateTooLarge(LimitExceeded):
    """A duplicate with its sub-pages (``POST /api/documents/{id}/duplicate``) that would copy more
    documents than ``MAX_DUPLICATE_DOCUMENTS``: refused before anything is copied; the detail
    names the limit and says to duplicate a folder further down."""

    code = "DUPLICATE_TOO_LARGE"
    surfaces = frozenset({HTTP})


class ExportTooLarge(LimitExceeded):
    """An export (``openkb export``, ``GET .../export``) whose pages and assets add up to more than
    the export cap: refused before anything is written; the detail names the cap and says to
    export a folder or a single document at a time."""

    code = "EXPORT_TOO_LARGE"
    surfaces = frozenset({HTTP, CLI})


class ExportFormatUnsupported(ValidationError):
    """An import of an OpenKB export (a zip with ``openkb-export.json``) written by a newer
    OpenKB, in a format version this one does not read, or with a manifest that is not an
    export's: the whole import is refused, nothing is written."""

    code = "EXPORT_FORMAT_UNSUPPORTED"
    exit_code = 65  # EX_DATAERR
    surfaces = frozenset({CLI, WORKER})


# --- backup and restore (docs/operations.md#backup-and-restore) -----------------------------------


class BackupInvalid(ValidationError):
    """``openkb restore`` was given something that is not an OpenKB backup archive (not a tar,
    no manifest, a manifest of an unknown format, a member outside the archive root), or
    ``openkb backup`` a destination it cannot write."""

    code = "BACKUP_INVALID"
    exit_code = 65  # EX_DATAERR
    surfaces = frozenset({CLI})


class BackupFileUnavailable(ValidationError):
    """``openkb backup`` cannot create its archive where it was told (no such folder, a
    read-only or pseudo file system, no permission), or ``openkb restore`` cannot read the
    file it was given (missing, a folder, no permission): the file, not its content, is the
    problem, so the exit is the I/O error's, not the damaged archive's."""

    code = "BACKUP_FILE_UNAVAILABLE"
    exit_code = 74  # EX_IOERR
    surfaces = frozenset({CLI})


class BackupChecksumMismatch(ValidationError):
    """A file in a backup archive does not have the size or SHA-256 its manifest records
    (a truncated or altered archive): nothing is restored."""

    code = "BACKUP_CHECKSUM_MISMATCH"
    exit_code = 65  # EX_DATAERR
    surfaces = frozenset({CLI})


class RestoreTargetNotEmpty(Conflict):
    """``openkb restore`` refuses a database that already has tables or a blob store that
    already holds assets: a restore never merges into or overwrites live data."""

    code = "RESTORE_TARGET_NOT_EMPTY"
    exit_code = 73  # EX_CANTCREAT
    surfaces = frozenset({CLI})


# --- apps on a person's knowledge (docs/apps.md) ---------------------------------------------------


class KnowledgePermissionMissing(PermissionDenied):
    """An app's single-object call (a write, a read by ref, ``documents.list`` of a named
    collection, a create) needs a permission string the user has not switched on; the message
    says ``lacks knowledge permission <string>`` and ``permission`` names it."""

    code = "KNOWLEDGE_PERMISSION_MISSING"
    surfaces = frozenset({HTTP})


class InvalidPermissionString(ValidationError):
    """An app manifest (or a grant) names a permission string the parser refuses: unknown
    type, a fact prefix of fewer than two levels, ``self:*``, a ``facts.write`` no
    ``facts.read`` covers; ``issues`` lists each refused string with its reason."""

    code = "INVALID_PERMISSION_STRING"
    surfaces = frozenset({HTTP, CLI})


class AppQuotaExceeded(RateLimited):
    """An app installation used up its daily write quota (writes or written characters per
    local day); the message contains ``quota``."""

    code = "APP_QUOTA_EXCEEDED"
    surfaces = frozenset({HTTP})


class CollectionNotNestable(ValidationError):
    """A sub-collection inside ``diary`` (one document per day, no sub-collections), or a
    collection nested deeper than 5 levels."""

    code = "COLLECTION_NOT_NESTABLE"
    surfaces = frozenset({HTTP})


class SourceUriNotAllowed(ValidationError):
    """An app's index-only document names a ``sourceUri`` that is not ``http(s)`` or whose host
    is not among the installation's allowed hosts."""

    code = "SOURCE_URI_NOT_ALLOWED"
    surfaces = frozenset({HTTP})
