"""Audit log writes (docs/permissions.md#audit): who did what to which object, with before/after.

Services call ``record_audit`` in the same transaction as the change it describes, so an
audited change and its log row commit or roll back together; adapters (CLI, routes) never
write audit rows themselves, so an operation is audited once whichever adapter runs it. A
refusal that must stay on record is written with ``openkb.db.record_then_refuse``. Never put
secrets in metadata (tokens, password hashes): ``record_audit`` refuses the usual key names.

Where a call came from (client IP and user agent for REST, ``via: cli`` for the command line)
is set once per unit of work by the adapter with ``set_origin``; every row written in that
session carries it, so services need no ip/user-agent parameters.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from enum import Enum
from typing import Any

from sqlmodel import Session

from openkb.errors import ValidationError
from openkb.models import AuditLog
from openkb.permissions.principal import Principal

_ORIGIN = "audit_origin"

_SECRET_KEYS = frozenset({"token", "password", "password_hash", "token_hash", "secret", "key_hash", "api_key"})


def _storable(text: str) -> str:
    """``text`` as PostgreSQL's jsonb can hold it: no NUL (``\\u0000`` is refused) and no lone
    surrogate, each replaced by U+FFFD. An audit row records what a caller sent (an MCP query,
    a refused argument), which may hold either; the row must still be written."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _jsonable(value: Any) -> Any:
    if isinstance(value, str):
        return _storable(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if str(k) in _SECRET_KEYS:
                raise ValidationError(f"audit metadata must not contain {k!r}")
            out[_storable(str(k))] = _jsonable(v)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    return value


def actor_fields(actor: Principal | None) -> tuple[str, uuid.UUID | None, dict[str, Any]]:
    """(actor_type, actor_user_id, extra metadata) for a principal."""
    if actor is None or actor.kind == "system":
        return "system", None, {"actor_kind": "system"}
    extra: dict[str, Any] = {"actor_kind": actor.kind}
    if actor.kind == "dify_key":
        extra["dify_key_id"] = str(actor.dify_key_id)
        return "api_key", None, extra
    if actor.share_link_id is not None:
        extra["share_link_id"] = str(actor.share_link_id)
    # user, anonymous visitor and share-link visitor are all people: actor_type "user",
    # actor_user_id None when nobody is logged in.
    return "user", actor.user_id, extra


def set_origin(
    session: Session, *, ip: str | None = None, user_agent: str | None = None, via: str | None = None
) -> None:
    """Declare where this session's calls come from (the adapter does it, once per unit of
    work). ``via`` (e.g. ``"cli"``) goes into each row's metadata; ip/user agent into their
    columns unless a service passes its own."""
    session.info[_ORIGIN] = {"ip": ip, "user_agent": user_agent, "via": via}


def record_audit(
    session: Session,
    *,
    tenant_id: uuid.UUID | str | None,
    actor: Principal | None,
    action: str,
    object_type: str | None,
    object_id: uuid.UUID | str | None,
    metadata: dict[str, Any] | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> AuditLog:
    actor_type, actor_user_id, extra = actor_fields(actor)
    origin = session.info.get(_ORIGIN) or {}
    ip = ip if ip is not None else origin.get("ip")
    user_agent = user_agent if user_agent is not None else origin.get("user_agent")
    if origin.get("via"):
        extra = {"via": origin["via"], **extra}
    meta = _jsonable({**(metadata or {}), **extra})
    row = AuditLog(
        tenant_id=None if tenant_id is None else uuid.UUID(str(tenant_id)),
        actor_user_id=actor_user_id,
        actor_type=actor_type,
        action=action,
        object_type=object_type,
        object_id=None if object_id is None else uuid.UUID(str(object_id)),
        meta=meta,
        ip=ip,
        user_agent=(user_agent or None) and user_agent[:512],
    )
    session.add(row)
    session.flush()
    return row
