"""Opaque refs: what an app sees instead of an internal id (docs/apps.md#refs).

A ref is the AES-SIV encryption of ``kind + id`` with the installation's id as associated data,
under a key derived from the instance secret (``OPENKB_SECRET_KEY``). So:

* the same object always has the same ref for one installation (SIV is deterministic), across
  moves too — a ref names the object, not its place;
* two installations get unrelated refs for the same object (they cannot correlate them), and a
  ref of one installation does not decrypt for another: it is simply "not found";
* a tampered or made-up ref fails authentication: "not found" again, never a 500.

Trap: the key depends on the instance secret; replicas must share ``OPENKB_SECRET_KEY``
(production refuses to start without it), or refs handed out by one would be unknown to another.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from openkb.errors import NotFound

# kinds of refs (one byte in the plaintext); facts and entities come with the next issue
KB, FOLDER, DOCUMENT, CHANGE = "k", "f", "d", "c"
KINDS = frozenset({KB, FOLDER, DOCUMENT, CHANGE, "e", "a"})


@lru_cache(maxsize=8)
def _cipher(secret: str) -> AESSIV:
    return AESSIV(hashlib.sha512(b"openkb-app-refs\x00" + secret.encode("utf-8")).digest())


def make_ref(secret: str, installation_id: uuid.UUID, kind: str, object_id: uuid.UUID) -> str:
    ct = _cipher(secret).encrypt(kind.encode("ascii") + object_id.bytes, [installation_id.bytes])
    return base64.urlsafe_b64encode(ct).rstrip(b"=").decode("ascii")


def read_ref(
    secret: str, installation_id: uuid.UUID, ref: str, kinds: str, what: str = "object"
) -> tuple[str, uuid.UUID]:
    """``(kind, id)`` of a ref of this installation whose kind is one of ``kinds``; else
    ``NotFound`` (malformed, another installation's, tampered, or the wrong kind alike)."""
    if not isinstance(ref, str) or not 20 <= len(ref) <= 100:
        raise NotFound(f"{what} not found")
    try:
        raw = base64.urlsafe_b64decode(ref + "=" * (-len(ref) % 4))
        pt = _cipher(secret).decrypt(raw, [installation_id.bytes])
    except (InvalidTag, ValueError, binascii.Error):
        raise NotFound(f"{what} not found") from None
    kind = pt[:1].decode("ascii", "replace")
    if len(pt) != 17 or kind not in kinds:
        raise NotFound(f"{what} not found")
    return kind, uuid.UUID(bytes=pt[1:])
