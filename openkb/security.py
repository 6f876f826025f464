"""Secrets at rest: random tokens stored as SHA-256, passwords as argon2id.

Tokens (invitations, share links, PATs, API keys, sessions) are high-entropy random strings, so
a fast unsalted SHA-256 is the right hash: it lets the service find a row by ``token_hash`` in
one indexed lookup, and a database leak reveals nothing usable. Passwords are low-entropy and
get argon2id (argon2-cffi's RFC 9106 low-memory profile). The plaintext token is returned once,
to be shown to its owner; never log it or store it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from openkb.errors import ValidationError

_hasher = PasswordHasher()  # argon2id, t=3, m=64 MiB, p=4

MAX_PASSWORD_LENGTH = 1024  # argon2 accepts anything; refuse megabyte "passwords" (cheap DoS)


def new_token(prefix: str) -> tuple[str, str]:
    """``(plaintext, sha256_hex)``; the prefix (``kbpat``, ``kbshare`` ...) helps secret scanners."""
    if not prefix or not prefix.replace("_", "").isalnum():
        raise ValidationError("token prefix must be alphanumeric")
    plaintext = f"{prefix}_{secrets.token_urlsafe(32)}"
    return plaintext, hash_token(plaintext)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def tokens_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def hash_password(password: str) -> str:
    if not password:
        raise ValidationError("password must not be empty")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ValidationError("password is too long")
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str | None) -> bool:
    """Never raises: a malformed stored hash or an oversized input is simply a mismatch."""
    if not password_hash or not password or len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def password_needs_rehash(password_hash: str) -> bool:
    try:
        return _hasher.check_needs_rehash(password_hash)
    except InvalidHashError:
        return True
