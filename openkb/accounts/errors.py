"""Account-specific failures: subclasses of the shared domain errors, each with its own stable code.

They subclass the generic class of the same HTTP meaning (``PermissionDenied``, ``Unauthenticated``,
``ValidationError``), so a caller that only knows the generic class still handles them.
"""

from __future__ import annotations

from openkb.errors import OpenKBError, PermissionDenied, Unauthenticated, ValidationError


class InvalidCredentials(Unauthenticated):
    """Same code for unknown email and wrong password (no account enumeration)."""

    code = "INVALID_CREDENTIALS"


class EmailNotVerified(PermissionDenied):
    code = "EMAIL_NOT_VERIFIED"


class AccountPendingActivation(PermissionDenied):
    code = "ACCOUNT_PENDING_ACTIVATION"


class AccountSuspended(PermissionDenied):
    code = "ACCOUNT_SUSPENDED"


class RegistrationDisabled(PermissionDenied):
    code = "REGISTRATION_DISABLED"


class RegistrationInviteRequired(PermissionDenied):
    code = "REGISTRATION_INVITE_REQUIRED"


class EmailDomainNotAllowed(ValidationError):
    code = "EMAIL_DOMAIN_NOT_ALLOWED"


class InvalidToken(OpenKBError):
    """A verification/reset/invitation token that is unknown, used or expired (not told apart)."""

    code = "INVALID_TOKEN"
    http_status = 400
    exit_code = 2


class CsrfFailed(PermissionDenied):
    code = "CSRF_FAILED"


class InsufficientScope(PermissionDenied):
    """The personal access token lacks a scope the route needs (a browser session has them all)."""

    code = "INSUFFICIENT_SCOPE"
