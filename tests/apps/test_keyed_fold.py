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
