"""Identifier normalization (docs/facts.md#entities): the one form an identifier is stored,
looked up and found in text in. Kept free of the app machinery so indexing can use it
(``openkb.facts.mentions``).
"""

from __future__ import annotations

import re
import unicodedata

from openkb.content import limits
from openkb.errors import ValidationError

IDENTIFIER_KINDS = ("email", "phone", "domain", "url", "handle", "name")


def normalize(kind: str, value: str) -> str:
    """The stored form of an identifier: emails and domains lower-case, phones ``+`` and digits
    (``00`` becomes ``+``), handles ``platform:account`` lower-case without ``@``, urls with
    lower-case scheme and host and no trailing slash, names NFKC, case-folded, single-spaced."""
    if kind not in IDENTIFIER_KINDS:
        raise ValidationError(f"identifier kind is one of {', '.join(IDENTIFIER_KINDS)}", field="kind")
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{kind} must not be empty", field=kind)
    v = unicodedata.normalize("NFKC", value).strip()
    limits.check_name(v, kind)
    if kind == "email":
        v = v.lower()
        if v.count("@") != 1 or not v.split("@")[0] or "." not in v.split("@")[1] or " " in v:
            raise ValidationError(f"not an email address: {value!r}", field="email")
        return v
    if kind == "domain":
        v = v.lower().rstrip(".")
        v = re.sub(r"^[a-z]+://", "", v).split("/")[0]
        if "." not in v or " " in v:
            raise ValidationError(f"not a domain: {value!r}", field="domain")
        return v
    if kind == "phone":
        plus = v.startswith("+") or v.startswith("00")
        digits = re.sub(r"\D", "", v)
        if v.startswith("00"):
            digits = digits[2:]
        if len(digits) < 5 or len(digits) > 20:
            raise ValidationError(f"not a phone number: {value!r}", field="phone")
        return ("+" if plus else "") + digits
    if kind == "url":
        m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]+)(.*)\Z", v)
        if not m:
            raise ValidationError(f"not a URL: {value!r}", field="url")
        rest = m.group(3).rstrip("/")
        return f"{m.group(1).lower()}://{m.group(2).lower()}{rest}"
    if kind == "handle":
        platform, sep, account = v.partition(":")
        account = account.strip().lstrip("@")
        if not sep or not platform.strip() or not account:
            raise ValidationError("a handle is platform:account, e.g. github:zhangsan", field="handle")
        return f"{platform.strip().lower()}:{account.lower()}"
    return " ".join(v.casefold().split())
