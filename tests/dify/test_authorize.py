"""Dify authorization as a domain service (no HTTP): domain errors with codes, which the server
maps to Dify's wire shape (``server/dify_wire.py``, checked at the end of this module)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from openkb.dify import conditions
from openkb.dify import service as svc
from openkb.errors import (
    DifyKeyRejected,
    DifyKnowledgeNotFound,
    IndexError_,
    OpenKBError,
    PermissionDenied,
    RateLimited,
    ServiceUnavailable,
    ValidationError,
)
from openkb.models import DifyApiKey, DifyKnowledgeMapping
from openkb.security import hash_token
from tests.factories import make_kb, make_personas

SETTINGS = SimpleNamespace(openkb_dify_rate_limit_per_minute=1000)


def make_key(db, tenant_id, kb_ids, **kw) -> tuple[DifyApiKey, str]:
    """A key row as the keys service stores it (rows made directly: this module tests the
    retrieval-side services, not the admin ones)."""
    plaintext = f"okdify_{secrets.token_urlsafe(32)}"
    row = DifyApiKey(
        tenant_id=tenant_id,
        name="app",
        key_hash=hash_token(plaintext),
        status="active",
        allowed_knowledge_base_ids=list(kb_ids),
        allowed_metadata_filters={},
        **kw,
    )
    db.add(row)
    db.flush()
    return row, plaintext


@pytest.fixture()
def world(db):
    p = make_personas(db)
    kb_a = make_kb(db, p.workspace, p.owner, title="A")
    kb_b = make_kb(db, p.workspace, p.owner, title="B")
    row, key = make_key(db, p.tenant.id, [kb_a.id])
    for kid, kb in (("kid-a", kb_a), ("kid-b", kb_b)):
        db.add(
            DifyKnowledgeMapping(tenant_id=p.tenant.id, dify_knowledge_id=kid, knowledge_base_id=kb.id, status="active")
        )
    db.flush()
    return SimpleNamespace(p=p, kb_a=kb_a, kb_b=kb_b, key=key, row=row)


def authorize(db, token: str, knowledge_id: str, settings=SETTINGS, now=None) -> svc.Authorized:
    return svc.authorize(db, settings, svc.identify(db, token, knowledge_id), knowledge_id, now=now)


def test_allowed_knowledge_base_is_authorized_and_narrowed(db, world):
    auth = authorize(db, world.key, "kid-a")
    assert auth.knowledge_base_id == world.kb_a.id and auth.knowledge_id == "kid-a"
    assert auth.principal.allowed_kb_ids == frozenset({world.kb_a.id})


def test_probe_needs_only_a_live_key(db, world):
    auth = authorize(db, world.key, "")
    assert auth.knowledge_base_id is None and auth.principal.allowed_kb_ids == frozenset()


@pytest.mark.parametrize("token", ["okdify_" + "z" * 43, "kbpat_not_a_dify_key", ""])
def test_unknown_token_is_rejected_without_a_caller(db, world, token):
    with pytest.raises(DifyKeyRejected) as info:
        svc.identify(db, token, "kid-a")
    assert info.value.code == "DIFY_KEY_REJECTED" and isinstance(info.value, PermissionDenied)


def test_unmapped_knowledge_id_is_not_found(db, world):
    with pytest.raises(DifyKnowledgeNotFound) as info:
        authorize(db, world.key, "nobody-mapped-this")
    assert info.value.code == "DIFY_KNOWLEDGE_NOT_FOUND"


def test_mapped_but_not_allowed_is_rejected_and_the_caller_names_the_kb(db, world):
    caller = svc.identify(db, world.key, "kid-b")
    assert caller.knowledge_base_id == world.kb_b.id  # what the adapter audits
    with pytest.raises(DifyKeyRejected):
        svc.authorize(db, SETTINGS, caller, "kid-b")


def test_expired_and_disabled_keys_are_rejected(db, world):
    later = datetime.now(UTC) + timedelta(days=1)
    world.row.expires_at = later - timedelta(hours=1)
    db.flush()
    with pytest.raises(DifyKeyRejected, match="expired"):
        authorize(db, world.key, "kid-a", now=later)
    world.row.status = "disabled"
    db.flush()
    with pytest.raises(DifyKeyRejected, match="disabled"):
        authorize(db, world.key, "kid-a")


def test_unreadable_stored_key_filter_fails_closed(db, world):
    world.row.allowed_metadata_filters = {"conditions": [{"name": "a", "comparison_operator": "~"}]}
    db.flush()
    with pytest.raises(DifyKeyRejected, match="metadata filter"):
        authorize(db, world.key, "kid-a")


def test_rate_limit_raises_rate_limited_with_retry_after(db, world):
    tight = SimpleNamespace(openkb_dify_rate_limit_per_minute=2)
    for _ in range(2):
        authorize(db, world.key, "", settings=tight)
    with pytest.raises(RateLimited) as info:
        authorize(db, world.key, "", settings=tight)
    assert 1 <= info.value.extra["retry_after"] <= 60


# --- the server's mapping of these errors to Dify's wire shape -----------------------------------


@pytest.mark.parametrize(
    ("exc", "status", "number"),
    [
        (DifyKeyRejected("x"), 403, 1002),
        (DifyKnowledgeNotFound("x"), 404, 2001),
        (RateLimited("x", retry_after=7), 429, 3001),
        (ValidationError("x"), 400, 2002),
        (conditions.ConditionError("x"), 400, 2002),
        (ServiceUnavailable("x"), 503, 5001),
        (IndexError_("x"), 503, 5001),
        (OpenKBError("x"), 500, 5000),
    ],
)
def test_domain_errors_map_to_dify_wire(exc, status, number):
    from server import dify_wire

    err = dify_wire.to_wire(exc)
    assert (err.status, err.error_code, err.error) == (status, number, exc.code)
    assert set(err.body()) == {"error_code", "error_msg"} and err.body()["error_msg"]
    assert (err.headers.get("Retry-After") == "7") == (status == 429)


def test_wire_parses_body_into_a_domain_query():
    import json

    from server import dify_wire

    raw = json.dumps(
        {
            "knowledge_id": " kid ",
            "query": "\u4e2d\u6587",
            "retrieval_setting": {"top_k": 3, "score_threshold": 0.5},
            "metadata_condition": {
                "logical_operator": "and",
                "conditions": [{"name": "lang", "comparison_operator": "is", "value": "zh"}],
            },
        }
    ).encode()
    parsed = dify_wire.parse_body(raw)
    assert parsed.knowledge_id == "kid"
    q = parsed.query
    assert (q.query, q.top_k, q.score_threshold) == ("\u4e2d\u6587", 3, 0.5) and q.condition is not None
    with pytest.raises(dify_wire.DifyError) as info:
        dify_wire.parse_body(b'{"metadata_condition": {"conditions": [{"name": "a", "comparison_operator": "~"}]}}')
    assert (info.value.status, info.value.error_code, info.value.error) == (400, 2002, "INVALID_METADATA_CONDITION")
