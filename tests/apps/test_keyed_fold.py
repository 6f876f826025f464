"""The keyed write into ``diary``/``keep`` whose document is found in the credential's own
statement (``resolve_caller(keyed=...)``, docs/apps.md#figures): it must answer exactly what
``reach.locate_key`` answers, and the whole write must behave as without it."""

from __future__ import annotations

import pytest

from openkb.apps import knowledge as K
from openkb.apps import quotas, registry
from openkb.apps import reach as RC
from openkb.errors import KnowledgePermissionMissing, ValidationError
from tests.apps.conftest import SECRET, AppWorld


def _keyed(aw: AppWorld, collection: str, key: str):
    return registry.resolve_caller(aw.db, aw.token, SECRET, keyed=(collection, key))


def _coll(c, builtin: str) -> K.Coll:
    return K.Coll(c.keep_kb_id if builtin == "keep" else c.diary_kb_id, None, (), builtin)


def test_the_folded_lookup_answers_what_locate_key_answers(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.read:keep", "collections.create", "collections.write:diary")
    other = aw.install_another("journal")
    oc = other.grant("collections.write:keep")
    K.documents_upsert(aw.db, c, collection="keep", key="mine", title="t", body="b")
    K.documents_upsert(aw.db, oc, collection="keep", key="theirs", title="t", body="b")
    sub = K.collections_create(aw.db, c, "sub", parent="keep")["ref"]
    K.documents_upsert(aw.db, c, collection=sub, key="nested", title="t", body="b")
    gone = K.documents_upsert(aw.db, c, collection="keep", key="gone", title="t", body="b")["ref"]
    K.documents_delete(aw.db, c, gone)
    K.documents_upsert(aw.db, c, collection="diary", key="2026-03-01", title="t", body="b")
    seen_folded = 0
    for builtin, key in [
        ("keep", "mine"), ("keep", "theirs"), ("keep", "nested"), ("keep", "gone"), ("keep", "absent"),
        ("diary", "2026-03-01"), ("diary", "mine"), ("keep", "2026-03-01"),
    ]:  # fmt: skip
        kc = _keyed(aw, builtin, key)
        coll = _coll(kc, builtin)
        got = K._prelocated(kc, coll, key)
        want = RC.locate_key(aw.db, coll.knowledge_base_id, key)
        if key == "nested":
            assert got is K._UNKNOWN  # its ancestors need locate_key
            continue
        assert got == want, (builtin, key)
        seen_folded += 1
        assert K._prelocated(kc, coll, key + "x") is K._UNKNOWN  # another key: not looked for
    assert seen_folded == 7


def test_a_folded_keyed_write_keeps_every_rule(aw: AppWorld) -> None:
    aw.grant("collections.write:keep")
    other = aw.install_another("journal")
    other.grant("collections.write:keep")

    def up(world: AppWorld, key: str, body: str) -> str:
        c = _keyed(world, "keep", key)
        assert c.keyed is not None and c.keyed[:2] == ("keep", key)
        return K.documents_upsert(world.db, c, collection="keep", key=key, title=key, body=body)["status"]

    assert up(aw, "n", "one") == "created"
    assert up(aw, "n", "one") == "unchanged"
    assert up(aw, "n", "two") == "updated"
    assert up(other, "n", "two") == "unchanged"  # the same content: nothing is overwritten
    with pytest.raises(KnowledgePermissionMissing, match="lacks knowledge permission changes.manage"):
        with aw.db.begin_nested():
            up(other, "n", "three")  # another writer's document
    # the writer row went in with the quota charge
    loc = RC.locate_key(aw.db, aw.caller().keep_kb_id, "n")
    assert loc is not None and loc.writer == aw.installation_id
    assert quotas.usage(aw.db, aw.installation_id)["writes"] == 2  # created + updated; unchanged is free


def test_a_key_the_write_refuses_is_refused_by_the_write(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep")
    for bad in ("a\x00b", " padded "):
        kc = _keyed(aw, "keep", bad)  # not looked for in the credential's statement
        assert kc.keyed is None and kc.grants == c.grants
    with pytest.raises(ValidationError):
        K.documents_upsert(aw.db, _keyed(aw, "keep", "a\x00b"), collection="keep", key="a\x00b", title="t", body="b")


def test_the_credentials_statement_takes_the_keys_lock(aw: AppWorld, engine) -> None:
    """The lock ``upsert_by_key`` would take (``key_locked=True`` then skips its statement): held
    by this transaction after the keyed lookup, so another transaction cannot have it."""
    from sqlalchemy import text

    from openkb.content.upsert import KEY_LOCK_CLASS

    c = _keyed(aw, "keep", "locked-key")
    assert K._locked(c, _coll(c, "keep"), "locked-key") and not K._locked(c, _coll(c, "keep"), "other")
    with engine.connect() as other:
        for key, free in (("locked-key", False), ("other", True)):
            got = other.execute(
                text(f"SELECT pg_try_advisory_xact_lock(hashtextextended(:k, {KEY_LOCK_CLASS}))"),
                {"k": f"key:{c.keep_kb_id}:{key}"},
            ).scalar()
            assert got is free, key
        other.rollback()


def test_a_keyed_app_write_costs_no_more_statements_than_the_content_service(aw: AppWorld, count_queries) -> None:
    """docs/apps.md#figures: unchanged, the app's credential, grant and document lookups cost no
    statement beyond the content service's own keyed upsert; created, only the quota charge
    (which records the writer too)."""
    from openkb.content.actor import Actor
    from openkb.content.upsert import upsert_by_key

    aw.grant("collections.write:keep")
    keep = aw.caller().keep_kb_id

    def app(key: str) -> int:
        with count_queries() as n:
            assert K.documents_upsert(aw.db, _keyed(aw, "keep", key), collection="keep", key=key, title=key, body="b")
        return n["n"]

    def service(key: str) -> int:
        with count_queries() as n:
            upsert_by_key(aw.db, Actor.of(aw.user, source="api"), keep, key, title=key, markdown="b")
        return n["n"]

    created_app, created_svc = app("a"), service("s")
    unchanged_app, unchanged_svc = app("a"), service("s")
    assert unchanged_app <= unchanged_svc
    assert created_app <= created_svc + 1


def test_a_document_created_after_the_lookup_is_still_someone_elses(aw: AppWorld) -> None:
    """The race the key's lock leaves open: this call looked (no document), another app created
    it before this call's write. The write must still need ``changes.manage``."""
    aw.grant("collections.write:keep")
    other = aw.install_another("journal")
    other.grant("collections.write:keep")
    stale = _keyed(aw, "keep", "raced")  # looked before the other app's write
    assert stale.keyed == ("keep", "raced", None)
    K.documents_upsert(aw.db, other.caller(), collection="keep", key="raced", title="t", body="theirs")
    with pytest.raises(KnowledgePermissionMissing, match="lacks knowledge permission changes.manage"):
        with aw.db.begin_nested():
            K.documents_upsert(aw.db, stale, collection="keep", key="raced", title="t", body="mine")
    # the same content is no change: allowed, as without the race
    assert K.documents_upsert(aw.db, stale, collection="keep", key="raced", title="t", body="theirs")["status"] == (
        "unchanged"
    )
