"""Dify scoped API keys (``dify_api_keys``, docs/dify.md#keys): mint, list, disable, revoke, rotate.

A key is ``okdify_<43 url-safe chars>``; only its SHA-256 is stored, so the plaintext exists
once, in the return value of ``create_key``/``rotate_key``. A key sees exactly
``allowed_knowledge_base_ids`` (none -> nothing) in its tenant, never as any user.

Status: ``active`` <-> ``disabled`` (reversible), ``revoked`` (terminal). Expiry is a timestamp,
not a status: ``effective_status`` reports ``expired``. Every change takes effect on the next
``/retrieval`` call because the endpoint re-reads the row (and the permission service re-reads
it again for the final check).

The changes take the acting principal (an administrator over REST, ``Principal.system()`` for
``openkb dify key ...``), check it administers the key's tenant (another tenant is NOT_FOUND) and
write their own ``dify.key.*`` audit row, never the secret; adapters only parse and print, so a
change is audited once whichever adapter made it. They never commit: the adapter owns the
transaction (the new secret works, and the old one stops, when it commits).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, select

from openkb.audit import record_audit
from openkb.dify import conditions
from openkb.errors import Conflict, NotFound, ValidationError
from openkb.models import DifyApiKey, KnowledgeBase
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

KEY_PREFIX = "okdify"
DEFAULT_TOP_K_LIMIT = 10
MAX_TOP_K_LIMIT = 100
MAX_KBS_PER_KEY = 1000
MAX_KEYS_PER_TENANT = 1000
# last_used_at is written at most once per this interval per key (a hot key must not turn every
# retrieval into a row update that serialises concurrent calls on the row lock).
LAST_USED_EVERY = timedelta(minutes=1)


def effective_status(row: DifyApiKey, now: datetime | None = None) -> str:
    if row.status == "active" and row.expires_at is not None and row.expires_at <= (now or utcnow()):
        return "expired"
    return row.status


def is_live(row: DifyApiKey, now: datetime | None = None) -> bool:
    return effective_status(row, now) == "active"


def looks_like_key(value: str) -> bool:
    return value.startswith(KEY_PREFIX + "_") and 10 < len(value) <= 200


# --- knowledge-base references -------------------------------------------------------------------


def resolve_kb(session: Session, tenant_id: uuid.UUID, ref: str, principal: Principal | None = None) -> KnowledgeBase:
    """A knowledge base of ``tenant_id`` by id, slug or unique title; another tenant's is
    NOT_FOUND (no leak). One shared by two workspaces must be given by id
    (``openkb.content.knowledge_bases.find_knowledge_base``). With ``principal``, a slug or
    title names only a knowledge base it may read: an administrator learns nothing of a private
    one by its name (docs/permissions.md#administrators)."""
    from openkb.content.knowledge_bases import find_knowledge_base

    return find_knowledge_base(session, ref, tenant_id, readable_by=principal)


def resolve_kbs(
    session: Session,
    principal: Principal,
    tenant_id: uuid.UUID,
    refs: Iterable[str | uuid.UUID],
    *,
    already: Iterable[uuid.UUID] = (),
) -> list[uuid.UUID]:
    """A key's allow-list. The key reads these knowledge bases with no user behind it, so an
    administrator may list only those they can read themselves: administering grants no content
    access (docs/permissions.md#administrators, docs/dify.md#keys), and a key must not be a way
    around a private knowledge base's 404. One the admin cannot read is NOT_FOUND, like an
    unknown id. ``already``: the key's current list, whose entries may stay (another
    administrator put them there; keeping them grants nothing new)."""
    from openkb.permissions import access_knowledge_base

    out: list[uuid.UUID] = []
    given: dict[uuid.UUID, str] = {}
    for ref in refs:
        kb = resolve_kb(session, tenant_id, str(ref), principal)
        if kb.id not in out:
            out.append(kb.id)
            given[kb.id] = str(ref)
    if len(out) > MAX_KBS_PER_KEY:
        raise ValidationError(f"a key may list at most {MAX_KBS_PER_KEY} knowledge bases", field="kb")
    kept = set(already)
    for k in out:
        if k not in kept:
            try:
                access_knowledge_base(session, principal, k)
            except NotFound:
                raise NotFound(f"no knowledge base {given[k]!r} in this tenant that you can read") from None
    return out


# --- validation ----------------------------------------------------------------------------------


def _name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ValidationError("key name must be 1-200 characters", field="name")
    return name


def _top_k_limit(value: int | None) -> int:
    if value is None:
        return DEFAULT_TOP_K_LIMIT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOP_K_LIMIT:
        raise ValidationError(f"top-k limit must be an integer from 1 to {MAX_TOP_K_LIMIT}", field="top_k_limit")
    return value


def _expires(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValidationError("expires_at needs a timezone (e.g. 2030-01-01T00:00:00Z)", field="expires_at")
    if value <= utcnow():
        raise ValidationError("expires_at must be in the future", field="expires_at")
    return value.astimezone(UTC)


def normalize_metadata_filters(value: Any) -> dict[str, Any]:
    """A key's ``allowed_metadata_filters``, stored as a parsed-and-reprinted metadata_condition.

    Accepts ``None``/``{}`` (no restriction), a metadata_condition object, or a plain mapping
    ``{"name": value | [values]}`` (each name must equal one of its values; names AND-ed). The
    stored form is what ``conditions.parse_condition`` reads on every call; an unreadable one
    is refused here so the endpoint never meets one.
    """
    if value is None or value == {}:
        return {}
    if not isinstance(value, dict):
        raise ValidationError("metadata filter must be a JSON object", field="metadata_filter")
    if "conditions" not in value and "logical_operator" not in value:
        items = []
        for k, v in value.items():
            values = v if isinstance(v, list) else [v]
            if not values or any(x is None for x in values):
                raise ValidationError(
                    f"metadata filter {k!r} needs at least one non-null value", field="metadata_filter"
                )
            items.append(
                {
                    "name": k,
                    "comparison_operator": "in" if len(values) > 1 else "is",
                    "value": values if len(values) > 1 else values[0],
                }
            )
        value = {"logical_operator": "and", "conditions": items}
    group = conditions.parse_condition(value)
    if group is None:
        return {}
    return conditions.to_dict(group)


def parse_filter_args(args: Sequence[str]) -> dict[str, Any]:
    """CLI ``--metadata-filter``: ``NAME=VALUE`` pairs (repeat a name for "any of") or one JSON object."""
    import json

    if not args:
        return {}
    if len(args) == 1 and args[0].lstrip().startswith("{"):
        try:
            return normalize_metadata_filters(json.loads(args[0]))
        except ValueError as exc:  # JSONDecodeError, or a number past Python's 4,300 digits
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise ValidationError(f"--metadata-filter is not valid JSON: {msg}", field="metadata_filter") from None
    pairs: dict[str, list[str]] = {}
    for a in args:
        k, sep, v = a.partition("=")
        if not sep or not k.strip():
            raise ValidationError(
                f"--metadata-filter {a!r}: expected NAME=VALUE or a JSON object", field="metadata_filter"
            )
        pairs.setdefault(k.strip(), []).append(v.strip())
    return normalize_metadata_filters(pairs)


def parse_expires(value: str | None, now: datetime | None = None) -> datetime | None:
    """``30d`` / ``12h`` / ``90m`` from now, or an ISO date/time (a bare date or naive time is UTC)."""
    if value is None or not value.strip():
        return None
    v = value.strip().lower()
    units = {"d": "days", "h": "hours", "m": "minutes", "w": "weeks"}
    if v[-1:] in units and v[:-1].isdigit():
        try:
            return (now or utcnow()) + timedelta(**{units[v[-1]]: int(v[:-1])})
        except (OverflowError, ValueError):  # past the year 9999 (or more digits than Python converts)
            raise ValidationError(f"--expires {value[:40]!r}: too far in the future", field="expires_at") from None
    d = conditions.to_datetime(value.strip()) if not value.strip().isdigit() else None
    if d is None:
        raise ValidationError(
            f"--expires {value!r}: expected e.g. 90d, 12h or 2030-01-01[T00:00:00Z]", field="expires_at"
        )
    return d


# --- operations ----------------------------------------------------------------------------------


def authorize_tenant(session: Session, principal: Principal, tenant_id: uuid.UUID) -> None:
    """Raise unless ``principal`` administers ``tenant_id`` (tenant_admin of it, any system_admin,
    the system principal). Another tenant is NOT_FOUND, like an unknown one."""
    from openkb.accounts.users import access_admin

    if not access_admin(session, principal).can_manage_tenant(tenant_id):
        raise NotFound("no such tenant")


def _audit(session: Session, principal: Principal, row: DifyApiKey, action: str, **meta: Any) -> None:
    record_audit(
        session,
        tenant_id=row.tenant_id,
        actor=principal,
        action=f"dify.key.{action}",
        object_type="dify_api_key",
        object_id=row.id,
        metadata=meta,
    )


_VIEW_FIELDS = ("name", "knowledge_base_ids", "top_k_limit", "expires_at", "metadata_filter")


def create_key(
    session: Session,
    principal: Principal,
    *,
    tenant_id: uuid.UUID,
    name: str,
    knowledge_base_ids: Iterable[str | uuid.UUID] = (),
    top_k_limit: int | None = None,
    expires_at: datetime | None = None,
    metadata_filters: Any = None,
) -> tuple[DifyApiKey, str]:
    """Returns (row, plaintext). The plaintext is not recoverable afterwards (nor audited)."""
    from openkb.security import new_token

    authorize_tenant(session, principal, tenant_id)
    count = session.execute(
        text("SELECT count(*) FROM dify_api_keys WHERE tenant_id = :t AND status <> 'revoked'"), {"t": tenant_id}
    ).scalar_one()
    if count >= MAX_KEYS_PER_TENANT:
        raise ValidationError(f"at most {MAX_KEYS_PER_TENANT} live Dify keys per tenant; revoke some first")
    row_kwargs = dict(
        name=_name(name),
        allowed_knowledge_base_ids=resolve_kbs(session, principal, tenant_id, knowledge_base_ids),
        retrieval_top_k_limit=_top_k_limit(top_k_limit),
        expires_at=_expires(expires_at),
        allowed_metadata_filters=normalize_metadata_filters(metadata_filters),
    )
    plaintext, key_hash = new_token(KEY_PREFIX)
    row = DifyApiKey(
        tenant_id=tenant_id, key_hash=key_hash, status="active", created_by=principal.user_id, **row_kwargs
    )
    session.add(row)
    session.flush()
    view = key_view(row)
    _audit(session, principal, row, "create", **{k: view[k] for k in _VIEW_FIELDS})
    return row, plaintext


def list_keys(session: Session, tenant_id: uuid.UUID, *, include_revoked: bool = True) -> list[DifyApiKey]:
    q = select(DifyApiKey).where(DifyApiKey.tenant_id == tenant_id)
    if not include_revoked:
        q = q.where(DifyApiKey.status != "revoked")
    return list(session.exec(q.order_by(DifyApiKey.created_at)).all())  # type: ignore[arg-type]


def access_key(
    session: Session, tenant_id: uuid.UUID, key_id: uuid.UUID | str, *, for_update: bool = False
) -> DifyApiKey:
    """Fetch a key of ``tenant_id``; unknown and other-tenant ids are the same NOT_FOUND."""
    try:
        kid = key_id if isinstance(key_id, uuid.UUID) else uuid.UUID(str(key_id))
    except ValueError:
        raise NotFound(f"no Dify key {key_id!r}") from None
    q = select(DifyApiKey).where(DifyApiKey.id == kid, DifyApiKey.tenant_id == tenant_id)
    if for_update:
        q = q.with_for_update()
    row = session.exec(q).first()
    if row is None:
        raise NotFound(f"no Dify key {key_id!r}")
    return row


@dataclass(frozen=True)
class StatusChange:
    row: DifyApiKey
    before: str
    after: str


def _set_status(
    session: Session, principal: Principal, tenant_id: uuid.UUID, key_id: uuid.UUID | str, status: str, action: str
) -> StatusChange:
    authorize_tenant(session, principal, tenant_id)
    row = access_key(session, tenant_id, key_id, for_update=True)
    before = row.status
    if before == "revoked" and status != "revoked":
        raise Conflict("a revoked key cannot be re-enabled; create a new one")
    if before != status:
        row.status = status
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
        _audit(session, principal, row, action, before=before, after=row.status)
    return StatusChange(row, before, row.status)


def do_disable_key(
    session: Session, principal: Principal, tenant_id: uuid.UUID, key_id: uuid.UUID | str
) -> StatusChange:
    return _set_status(session, principal, tenant_id, key_id, "disabled", "disable")


def do_enable_key(
    session: Session, principal: Principal, tenant_id: uuid.UUID, key_id: uuid.UUID | str
) -> StatusChange:
    return _set_status(session, principal, tenant_id, key_id, "active", "enable")


def do_revoke_key(
    session: Session, principal: Principal, tenant_id: uuid.UUID, key_id: uuid.UUID | str
) -> StatusChange:
    return _set_status(session, principal, tenant_id, key_id, "revoked", "revoke")


def do_rotate_key(
    session: Session, principal: Principal, tenant_id: uuid.UUID, key_id: uuid.UUID | str
) -> tuple[DifyApiKey, str]:
    """New secret, same id, scope and status: the old plaintext stops working on commit."""
    from openkb.security import new_token

    authorize_tenant(session, principal, tenant_id)
    row = access_key(session, tenant_id, key_id, for_update=True)
    if row.status == "revoked":
        raise Conflict("a revoked key cannot be rotated; create a new one")
    plaintext, key_hash = new_token(KEY_PREFIX)
    row.key_hash = key_hash
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    _audit(session, principal, row, "rotate", name=row.name)
    return row, plaintext


def do_update_key(
    session: Session,
    principal: Principal,
    tenant_id: uuid.UUID,
    key_id: uuid.UUID | str,
    *,
    knowledge_base_ids: Iterable[str | uuid.UUID] | None = None,
    top_k_limit: int | None = None,
    metadata_filters: Any = ...,
    expires_at: datetime | None | Any = ...,
    name: str | None = None,
) -> DifyApiKey:
    """Change a key's scope in place (``...`` = leave unchanged; ``expires_at=None`` clears it).
    Audited with the before/after of each field that changed."""
    authorize_tenant(session, principal, tenant_id)
    row = access_key(session, tenant_id, key_id, for_update=True)
    if row.status == "revoked":
        raise Conflict("a revoked key cannot be changed")
    before = key_view(row)
    if name is not None:
        row.name = _name(name)
    if knowledge_base_ids is not None:
        row.allowed_knowledge_base_ids = resolve_kbs(
            session, principal, tenant_id, knowledge_base_ids, already=row.allowed_knowledge_base_ids
        )
    if top_k_limit is not None:
        row.retrieval_top_k_limit = _top_k_limit(top_k_limit)
    if metadata_filters is not ...:
        row.allowed_metadata_filters = normalize_metadata_filters(metadata_filters)
    if expires_at is not ...:
        row.expires_at = _expires(expires_at)
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    after = key_view(row)
    _audit(
        session,
        principal,
        row,
        "update",
        changes={k: {"before": before[k], "after": after[k]} for k in _VIEW_FIELDS if before[k] != after[k]},
    )
    return row


def touch_last_used(session: Session, row: DifyApiKey, now: datetime | None = None) -> bool:
    """Write ``last_used_at`` when it is older than a minute; the WHERE makes races harmless."""
    now = now or utcnow()
    if row.last_used_at is not None and row.last_used_at >= now - LAST_USED_EVERY:
        return False
    session.execute(
        text(
            "UPDATE dify_api_keys SET last_used_at = now() WHERE id = :id "
            "AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"
        ),
        {"id": row.id},
    )
    return True


def key_view(row: DifyApiKey, now: datetime | None = None) -> dict[str, Any]:
    """The admin-facing description of a key (never the hash)."""
    return {
        "id": str(row.id),
        "name": row.name,
        "status": effective_status(row, now),
        "stored_status": row.status,
        "tenant_id": str(row.tenant_id),
        "knowledge_base_ids": [str(k) for k in row.allowed_knowledge_base_ids],
        "metadata_filter": row.allowed_metadata_filters or {},
        "top_k_limit": row.retrieval_top_k_limit,
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        "last_used_at": row.last_used_at.isoformat() if row.last_used_at else None,
        "created_by": str(row.created_by) if row.created_by else None,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "updated_at": row.updated_at.isoformat() if row.updated_at else None,
    }
