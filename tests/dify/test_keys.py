"""Keys and mappings services on real PostgreSQL (rolled-back ``db`` session)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from openkb.dify import keys, mappings
from openkb.errors import Conflict, NotFound, ValidationError
from openkb.models import AuditLog
from openkb.permissions import Principal
from openkb.security import hash_token
from tests.factories import make_kb, make_personas

SYSTEM = Principal.system()  # the operator at the command line administers every tenant


@pytest.fixture()
def world(db):
    p = make_personas(db)
    kb_a = make_kb(db, p.workspace, p.owner, title="A")
    kb_b = make_kb(db, p.workspace, p.owner, title="B")
    return p, kb_a, kb_b


def test_create_stores_only_a_hash(db, world):
    p, kb_a, _ = world
    row, plaintext = keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, name="app", knowledge_base_ids=[str(kb_a.id)])
    assert plaintext.startswith("okdify_") and len(plaintext) > 40
    assert row.key_hash == hash_token(plaintext) and plaintext not in row.key_hash
    stored = db.execute(
        text("SELECT row_to_json(k)::text FROM dify_api_keys k WHERE id = :id"), {"id": row.id}
    ).scalar_one()
    assert plaintext not in stored
    assert row.allowed_knowledge_base_ids == [kb_a.id]
    assert row.retrieval_top_k_limit == 10 and row.status == "active"
    assert "key_hash" not in keys.key_view(row)


def test_kb_by_slug_dedup_and_other_tenant_invisible(db, world):
    p, kb_a, kb_b = world
    row, _ = keys.create_key(
        db, SYSTEM, tenant_id=p.tenant.id, name="x", knowledge_base_ids=[kb_a.slug, str(kb_a.id), kb_b.slug]
    )
    assert row.allowed_knowledge_base_ids == [kb_a.id, kb_b.id]
    with pytest.raises(NotFound):
        keys.create_key(db, SYSTEM, tenant_id=p.other_tenant.id, name="x", knowledge_base_ids=[str(kb_a.id)])
    with pytest.raises(NotFound):
        keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, name="x", knowledge_base_ids=[str(uuid.uuid4())])


def test_no_kb_is_allowed_and_sees_nothing(db, world):
    p, *_ = world
    row, _ = keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, name="empty")
    assert row.allowed_knowledge_base_ids == []


@pytest.mark.parametrize(
    "kw",
    [
        {"name": ""},
        {"name": "x" * 201},
        {"top_k_limit": 0},
        {"top_k_limit": 101},
        {"expires_at": datetime(2020, 1, 1, tzinfo=UTC)},
        {"expires_at": datetime(2099, 1, 1)},
        {"metadata_filters": {"conditions": [{"name": "a", "comparison_operator": "like"}]}},
        {"metadata_filters": {"lang": None}},
    ],
)
def test_create_validation(db, world, kw):
    p, *_ = world
    with pytest.raises(ValidationError):
        keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, **{"name": "ok", **kw})


def test_metadata_filter_forms_normalize():
    simple = keys.normalize_metadata_filters({"lang": "zh", "tags": ["a", "b"]})
    assert simple == {
        "logical_operator": "and",
        "conditions": [
            {"name": "lang", "comparison_operator": "is", "value": "zh"},
            {"name": "tags", "comparison_operator": "in", "value": ["a", "b"]},
        ],
    }
    full = keys.normalize_metadata_filters(
        {"logical_operator": "or", "conditions": [{"name": "n", "comparison_operator": ">=", "value": 3}]}
    )
    assert full["conditions"][0]["comparison_operator"] == "≥"
    assert keys.normalize_metadata_filters({}) == {} and keys.normalize_metadata_filters(None) == {}
    assert keys.parse_filter_args(["lang=zh", "lang=en", "team=ml"])["conditions"] == [
        {"name": "lang", "comparison_operator": "in", "value": ["zh", "en"]},
        {"name": "team", "comparison_operator": "is", "value": "ml"},
    ]
    assert keys.parse_filter_args(['{"lang": "zh"}'])["conditions"][0]["value"] == "zh"
    with pytest.raises(ValidationError):
        keys.parse_filter_args(["nonsense"])
    for bad in ('{"lang": ', '{"n": ' + "9" * 5000 + "}"):  # not JSON; a number Python will not convert
        with pytest.raises(ValidationError, match="--metadata-filter is not valid JSON"):
            keys.parse_filter_args([bad])


def test_parse_expires():
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert keys.parse_expires("90d", now) == now + timedelta(days=90)
    assert keys.parse_expires("12h", now) == now + timedelta(hours=12)
    assert keys.parse_expires("2031-02-03") == datetime(2031, 2, 3, tzinfo=UTC)
    assert keys.parse_expires("2031-02-03T04:05:06+02:00").utcoffset() is not None
    assert keys.parse_expires(None) is None
    for bad in ("soon", "12", "3y", "99999999999d", "9" * 5000 + "h"):  # the last two: past year 9999
        with pytest.raises(ValidationError):
            keys.parse_expires(bad)


def test_lifecycle_disable_enable_revoke_rotate(db, world):
    p, kb_a, _ = world
    row, old = keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, name="life", knowledge_base_ids=[str(kb_a.id)])
    ch = keys.do_disable_key(db, SYSTEM, p.tenant.id, row.id)
    assert (ch.before, ch.after) == ("active", "disabled")
    assert keys.do_enable_key(db, SYSTEM, p.tenant.id, row.id).after == "active"
    rotated, new = keys.do_rotate_key(db, SYSTEM, p.tenant.id, row.id)
    assert rotated.id == row.id and new != old and rotated.key_hash == hash_token(new)
    assert keys.do_revoke_key(db, SYSTEM, p.tenant.id, row.id).after == "revoked"
    with pytest.raises(Conflict):
        keys.do_enable_key(db, SYSTEM, p.tenant.id, row.id)
    with pytest.raises(Conflict):
        keys.do_rotate_key(db, SYSTEM, p.tenant.id, row.id)
    # other tenant: same NOT_FOUND as an unknown id
    with pytest.raises(NotFound):
        keys.do_disable_key(db, SYSTEM, p.other_tenant.id, row.id)
    with pytest.raises(NotFound):
        keys.access_key(db, p.tenant.id, "not-a-uuid")


def test_update_and_expired_status(db, world):
    p, kb_a, kb_b = world
    row, _ = keys.create_key(
        db,
        SYSTEM,
        tenant_id=p.tenant.id,
        name="u",
        knowledge_base_ids=[str(kb_a.id)],
        expires_at=datetime.now(UTC) + timedelta(days=1),
    )
    keys.do_update_key(
        db,
        SYSTEM,
        p.tenant.id,
        row.id,
        knowledge_base_ids=[str(kb_b.id)],
        top_k_limit=3,
        metadata_filters={"lang": "zh"},
        expires_at=None,
    )
    assert row.allowed_knowledge_base_ids == [kb_b.id] and row.retrieval_top_k_limit == 3
    assert row.expires_at is None and row.allowed_metadata_filters["conditions"][0]["name"] == "lang"
    row.expires_at = datetime.now(UTC) - timedelta(seconds=1)
    assert keys.effective_status(row) == "expired" and not keys.is_live(row)


def test_touch_last_used_is_throttled(db, world):
    p, *_ = world
    row, _ = keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, name="t")
    assert keys.touch_last_used(db, row)
    db.refresh(row)
    assert row.last_used_at is not None
    assert not keys.touch_last_used(db, row)  # within the minute: no write
    row.last_used_at = datetime.now(UTC) - timedelta(minutes=2)
    assert keys.touch_last_used(db, row)


def test_mappings_upsert_disable_and_tenant_isolation(db, world):
    p, kb_a, kb_b = world
    res = mappings.do_map(db, SYSTEM, tenant_id=p.tenant.id, knowledge_id="  team-docs ", kb=str(kb_a.id))
    assert res.created and res.row.dify_knowledge_id == "team-docs"
    again = mappings.do_map(db, SYSTEM, tenant_id=p.tenant.id, knowledge_id="team-docs", kb=kb_b.slug)
    assert not again.created and again.row.id == res.row.id and again.row.knowledge_base_id == kb_b.id
    assert again.before == {"knowledge_base_id": str(kb_a.id), "status": "active"}
    row, before = mappings.do_disable_mapping(db, SYSTEM, p.tenant.id, "team-docs")
    assert (before, row.status) == ("active", "disabled")
    assert (
        mappings.do_map(db, SYSTEM, tenant_id=p.tenant.id, knowledge_id="team-docs", kb=str(kb_b.id)).row.status
        == "active"
    )
    with pytest.raises(NotFound):
        mappings.access_mapping(db, p.other_tenant.id, "team-docs")
    with pytest.raises(NotFound):
        mappings.access_mapping(db, p.other_tenant.id, str(res.row.id))
    with pytest.raises(NotFound):  # a knowledge base of another tenant cannot be the target
        mappings.do_map(db, SYSTEM, tenant_id=p.other_tenant.id, knowledge_id="x", kb=str(kb_a.id))
    # the same knowledge id may exist in another tenant, independently
    from tests.factories import make_kb as mk
    from tests.factories import make_user, make_workspace

    u = make_user(db, p.other_tenant)
    other_kb = mk(db, make_workspace(db, p.other_tenant, u), u)
    other = mappings.do_map(db, SYSTEM, tenant_id=p.other_tenant.id, knowledge_id="team-docs", kb=str(other_kb.id))
    assert other.created and other.row.id != res.row.id
    assert [m.dify_knowledge_id for m in mappings.list_mappings(db, p.tenant.id)] == ["team-docs"]
    for bad in ("", "   ", "x" * 256, "a\nb"):
        with pytest.raises(ValidationError):
            mappings.do_map(db, SYSTEM, tenant_id=p.tenant.id, knowledge_id=bad, kb=str(kb_a.id))


def _audits(db, object_id) -> list[tuple[str, str, dict]]:
    from sqlmodel import select

    rows = db.exec(select(AuditLog).where(AuditLog.object_id == object_id).order_by(AuditLog.created_at)).all()
    return [(r.action, r.actor_type, r.meta) for r in rows]


def test_each_key_change_is_audited_once_by_the_service(db, world):
    """The service writes the row (adapters don't): one per change, none for a no-op, never the secret."""
    p, kb_a, kb_b = world
    admin = Principal.user(p.tenant_admin, p.tenant.id)
    row, plaintext = keys.create_key(db, admin, tenant_id=p.tenant.id, name="app", knowledge_base_ids=[str(kb_a.id)])
    assert row.created_by == p.tenant_admin.id
    keys.do_update_key(db, admin, p.tenant.id, row.id, knowledge_base_ids=[str(kb_b.id)])
    keys.do_disable_key(db, admin, p.tenant.id, row.id)
    keys.do_disable_key(db, admin, p.tenant.id, row.id)  # already disabled: nothing changes, nothing audited
    _, rotated = keys.do_rotate_key(db, SYSTEM, p.tenant.id, row.id)
    got = _audits(db, row.id)
    assert [(a, t) for a, t, _ in got] == [
        ("dify.key.create", "user"),
        ("dify.key.update", "user"),
        ("dify.key.disable", "user"),
        ("dify.key.rotate", "system"),
    ]
    assert got[1][2]["changes"] == {"knowledge_base_ids": {"before": [str(kb_a.id)], "after": [str(kb_b.id)]}}
    assert got[2][2]["before"] == "active" and got[2][2]["after"] == "disabled"
    assert all(plaintext not in str(m) and rotated not in str(m) for _, _, m in got)


def test_key_and_mapping_changes_authorize_the_principal(db, world):
    """Not an administrator of the key's tenant: refused before anything is written or audited."""
    from openkb.errors import PermissionDenied

    p, kb_a, _ = world
    row, _ = keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, name="app", knowledge_base_ids=[str(kb_a.id)])
    member = Principal.user(p.member, p.tenant.id)
    with pytest.raises(PermissionDenied):
        keys.create_key(db, member, tenant_id=p.tenant.id, name="mine")
    with pytest.raises(PermissionDenied):
        keys.do_revoke_key(db, member, p.tenant.id, row.id)
    with pytest.raises(PermissionDenied):
        mappings.do_map(db, member, tenant_id=p.tenant.id, knowledge_id="k", kb=str(kb_a.id))
    other_admin = Principal.user(p.other_tenant_user, p.other_tenant.id)
    from sqlalchemy import text as sql

    db.execute(
        sql("UPDATE tenant_memberships SET role = 'tenant_admin' WHERE user_id = :u"), {"u": p.other_tenant_user.id}
    )
    with pytest.raises(NotFound):  # another tenant's administrator: the key's tenant does not exist for them
        keys.do_revoke_key(db, other_admin, p.tenant.id, row.id)
    with pytest.raises(NotFound):
        mappings.do_map(db, other_admin, tenant_id=p.tenant.id, knowledge_id="k", kb=str(kb_a.id))
    assert [a for a, _, _ in _audits(db, row.id)] == ["dify.key.create"]
    assert row.status == "active"


def test_mapping_changes_are_audited_by_the_service(db, world):
    p, kb_a, kb_b = world
    res = mappings.do_map(db, SYSTEM, tenant_id=p.tenant.id, knowledge_id="docs", kb=str(kb_a.id))
    mappings.do_map(db, SYSTEM, tenant_id=p.tenant.id, knowledge_id="docs", kb=str(kb_b.id))
    mappings.do_disable_mapping(db, SYSTEM, p.tenant.id, "docs")
    mappings.do_disable_mapping(db, SYSTEM, p.tenant.id, "docs")  # no-op
    got = _audits(db, res.row.id)
    assert [a for a, _, _ in got] == ["dify.mapping.create", "dify.mapping.update", "dify.mapping.disable"]
    assert got[1][2]["before"] == {"knowledge_base_id": str(kb_a.id), "status": "active"}
    assert got[1][2]["knowledge_base_id"] == str(kb_b.id) and got[0][2]["knowledge_id"] == "docs"


def test_admin_scopes_keys_only_to_readable_kbs_and_names_resolve_among_them(db, world):
    """Being an administrator grants no content access (docs/permissions.md#administrators,
    docs/dify.md#keys): a key reads what its creator could, and a name never reveals a private
    knowledge base the administrator cannot read."""
    from tests.factories import make_workspace

    p, kb_a, _ = world
    admin = Principal.user(p.tenant_admin, p.tenant.id)  # a workspace admin: private KBs stay closed
    secret = make_kb(db, p.workspace, p.owner, visibility="private", title="Secret plans")
    elsewhere = make_workspace(db, p.tenant, p.owner)
    twin = make_kb(db, elsewhere, p.owner, visibility="private", title="A")  # same title as kb_a

    for refs in ([str(secret.id)], [secret.slug], ["Secret plans"]):
        with pytest.raises(NotFound) as exc:
            keys.create_key(db, admin, tenant_id=p.tenant.id, name="x", knowledge_base_ids=refs)
        assert refs == [str(secret.id)] or str(secret.id) not in str(exc.value)
    # kb_a's title is shared with a private KB: it resolves among what the admin reads, naming nothing else
    row, _ = keys.create_key(db, admin, tenant_id=p.tenant.id, name="ok", knowledge_base_ids=["a"])
    assert row.allowed_knowledge_base_ids == [kb_a.id]
    with pytest.raises(NotFound):
        keys.do_update_key(db, admin, p.tenant.id, row.id, knowledge_base_ids=[str(kb_a.id), str(twin.id)])
    assert row.allowed_knowledge_base_ids == [kb_a.id]
    # a mapping grants nothing: an id may name any KB of the tenant, a name only a readable one
    assert mappings.do_map(db, admin, tenant_id=p.tenant.id, knowledge_id="s", kb=str(secret.id)).row
    with pytest.raises(NotFound):
        mappings.do_map(db, admin, tenant_id=p.tenant.id, knowledge_id="t", kb="Secret plans")
    # the operator at the command line administers (and reads) everything
    row, _ = keys.create_key(db, SYSTEM, tenant_id=p.tenant.id, name="op", knowledge_base_ids=[secret.slug])
    assert row.allowed_knowledge_base_ids == [secret.id]


def test_a_name_shared_by_several_kbs_names_only_readable_ones(db, world):
    from tests.factories import add_member, make_workspace

    p, kb_a, _ = world
    admin = Principal.user(p.tenant_admin, p.tenant.id)
    ws2, ws3 = make_workspace(db, p.tenant, p.owner), make_workspace(db, p.tenant, p.owner)
    add_member(db, ws2, p.tenant_admin, "member")
    seen = make_kb(db, ws2, p.owner, title="A")
    hidden = make_kb(db, ws3, p.owner, visibility="private", title="A")
    with pytest.raises(Conflict) as exc:
        keys.create_key(db, admin, tenant_id=p.tenant.id, name="x", knowledge_base_ids=["A"])
    message = str(exc.value)
    assert str(kb_a.id) in message and str(seen.id) in message and str(hidden.id) not in message
    assert "2 knowledge bases" in message
