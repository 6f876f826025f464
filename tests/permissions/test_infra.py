"""security.py, ratelimit.py and audit.py."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from openkb import ratelimit
from openkb.audit import record_audit
from openkb.errors import RateLimited, ValidationError
from openkb.models import DifyApiKey
from openkb.permissions import Principal
from openkb.security import hash_password, hash_token, new_token, password_needs_rehash, verify_password


def test_tokens_and_passwords():
    plain, digest = new_token("kbpat")
    assert plain.startswith("kbpat_") and len(plain) > 40 and digest == hash_token(plain) and len(digest) == 64
    assert new_token("kbpat")[0] != plain
    with pytest.raises(ValidationError):
        new_token("bad prefix!")
    h = hash_password("hunter2")
    assert h.startswith("$argon2id$") and not password_needs_rehash(h)
    assert verify_password(h, "hunter2") and not verify_password(h, "hunter3")
    assert not verify_password("not-a-hash", "x") and not verify_password(None, "x") and not verify_password(h, "")
    with pytest.raises(ValidationError):
        hash_password("")


def test_fixed_window_counts_atomically_and_resets(db):
    key = f"test:{uuid.uuid4()}"
    t0 = datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC)
    assert [ratelimit.hit(db, key, 3, 60, now=t0) for _ in range(4)] == [True, True, True, False]
    assert ratelimit.count(db, key, 60, now=t0) == 4 and ratelimit.exceeded(db, key, 3, 60, now=t0)
    later = t0 + timedelta(seconds=60)
    assert ratelimit.count(db, key, 60, now=later) == 0
    assert ratelimit.hit(db, key, 3, 60, now=later)  # new window
    assert ratelimit.hit(db, key, 3, 60, now=t0)  # a replica with a slow clock does not reset it
    assert ratelimit.count(db, key, 60, now=later) == 2
    with pytest.raises(RateLimited):
        for _ in range(5):
            ratelimit.enforce(db, key, 3, 60, now=later)
    assert ratelimit.hit(db, f"test:{uuid.uuid4()}", 1, 10)  # database clock by default


def test_audit_rows_hold_what_a_caller_sent_even_a_nul_or_a_lone_surrogate(db, w):
    """jsonb refuses \\u0000 and lone surrogates; an MCP call whose argument held one failed
    to write its audit row (a DataError with a traceback, the call itself lost)."""
    row = record_audit(
        db,
        tenant_id=w.tenant.id,
        actor=Principal.user(w.owner, w.tenant.id),
        action="mcp.tool",
        object_type=None,
        object_id=None,
        metadata={"query": "a\x00b", "args\x00": ["\ud800x", "中文"]},
    )
    db.flush()
    db.refresh(row)
    assert row.meta["query"] == "a\ufffdb" and row.meta["args\ufffd"] == ["\ufffdx", "中文"]


def test_audit_actor_types_and_secret_guard(db, w):
    u = record_audit(
        db,
        tenant_id=w.tenant.id,
        actor=Principal.user(w.owner, w.tenant.id),
        action="x.user",
        object_type="workspace",
        object_id=w.workspace.id,
        metadata={"before": {"at": datetime.now(UTC)}},
    )
    assert (u.actor_type, u.actor_user_id, u.meta["actor_kind"]) == ("user", w.owner.id, "user")
    key = DifyApiKey(tenant_id=w.tenant.id, name="k", key_hash="audit-k", status="active")
    db.add(key)
    db.flush()
    d = record_audit(
        db,
        tenant_id=w.tenant.id,
        actor=Principal.dify(key),
        action="x.dify",
        object_type=None,
        object_id=None,
        metadata={},
    )
    assert d.actor_type == "api_key" and d.actor_user_id is None and d.meta["dify_key_id"] == str(key.id)
    s = record_audit(db, tenant_id=None, actor=None, action="x.system", object_type=None, object_id=None, metadata={})
    assert s.actor_type == "system"
    a = record_audit(
        db,
        tenant_id=w.tenant.id,
        actor=Principal.anonymous(w.tenant.id),
        action="x.anon",
        object_type=None,
        object_id=None,
        metadata={"ids": {uuid.UUID(int=1)}},
    )
    assert a.actor_type == "user" and a.actor_user_id is None and a.meta["ids"] == [str(uuid.UUID(int=1))]
    with pytest.raises(ValidationError):
        record_audit(
            db,
            tenant_id=None,
            actor=None,
            action="x",
            object_type=None,
            object_id=None,
            metadata={"token": "kbpat_..."},
        )
