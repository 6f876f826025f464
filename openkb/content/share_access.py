"""Short-lived proof that a visitor passed a share link's password check.

``POST /api/share/{token}/verify-password`` checks the password once (rate limited and audited
by ``openkb.permissions.share_links``) and hands out this token; later reads of the same link
present it instead of the password. It is an HMAC over (link id, expiry) with the instance
secret: stateless across replicas, useless for any other link, and it never outlives the link
itself because every read still goes through ``open_share_link`` (revoked/expired -> 404).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from datetime import UTC, datetime

PREFIX = "kbsa"
TTL_SECONDS = 30 * 60


def _sig(secret: str, link_id: uuid.UUID, exp: int) -> str:
    mac = hmac.new(secret.encode(), f"share-access:{link_id}:{exp}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def issue(secret: str, link_id: uuid.UUID, ttl: int = TTL_SECONDS) -> tuple[str, datetime]:
    exp = int(time.time()) + ttl
    return f"{PREFIX}_{link_id.hex}.{exp}.{_sig(secret, link_id, exp)}", datetime.fromtimestamp(exp, UTC)


def verify(secret: str, token: str | None, link_id: uuid.UUID) -> bool:
    if not token or not token.startswith(PREFIX + "_") or len(token) > 200:
        return False
    try:
        lid, exp_s, sig = token[len(PREFIX) + 1 :].split(".", 2)
        exp = int(exp_s)
        if uuid.UUID(hex=lid) != link_id:
            return False
    except ValueError:
        return False
    if exp < time.time():
        return False
    return hmac.compare_digest(sig, _sig(secret, link_id, exp))
