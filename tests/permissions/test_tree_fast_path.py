"""Property test: the knowledge-base fast path (``tree_access`` / ``readable_tree``, used by the
tree and the trash) answers exactly what the generic batch functions answer, for every principal
of random worlds and every knowledge base: the same readable set, the same capabilities per
document, the same knowledge-base capabilities, and the very same placements."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings

from openkb.permissions import (
    Action,
    document_capabilities,
    filter_documents,
    filter_readable_documents,
    knowledge_base_capabilities,
    readable_tree,
    rules,
    tree_access,
)
from openkb.permissions.loader import load_kb_snapshot, load_snapshot
from openkb.permissions.principal import Principal
from openkb.permissions.rules import DocFacts, KbFacts, Snapshot, Viewer
from tests.permissions.test_oracle import principals_of, to_principal
from tests.permissions.worlds import World, insert_world, uid, worlds

FAST_PATH_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def check_world(db, w: World) -> None:
    all_docs = [uid("doc", d.n) for d in w.docs]
    by_kb = {uid("kb", k.n): {uid("doc", d.n) for d in w.docs if d.kb == k.n} for k in w.kbs}
    missing_kb = uuid.UUID(int=0x4B << 48 | 0xFFFF)  # no such knowledge base
    by_kb[missing_kb] = set()
    for who in principals_of(w):
        p = to_principal(w, who)
        ctx = f"\n{w.describe()}\nprincipal: {who}"
        caps = document_capabilities(db, p, all_docs)
        readable = filter_readable_documents(db, p, all_docs)
        trash = filter_documents(db, p, all_docs, Action.TRASH)
        kb_caps = knowledge_base_capabilities(db, p, list(by_kb))
        snap = load_snapshot(db, p, doc_ids=all_docs)
        for kid, docs in by_kb.items():
            fast = tree_access(db, p, kid)
            assert set(fast.documents) == docs, f"{ctx}\nk{kid}: documents {set(fast.documents) ^ docs}"
            for d in docs:
                assert fast.documents[d] == caps[d], (
                    f"{ctx}\ndocument {d}: fast {sorted(fast.documents[d])}, batch {sorted(caps[d])}"
                )
            assert fast.allowed(Action.READ) == readable & docs, f"{ctx}\nk{kid}: readable differs"
            for d in all_docs:  # the lookups the tree uses, by UUID and by string; other KBs' ids: nothing
                expected = caps[d] if d in docs else frozenset()
                assert fast.capabilities(d) == fast.capabilities(str(d)) == expected, f"{ctx}\n{d}"
                assert fast.allows(d, Action.READ) == (Action.READ in expected), f"{ctx}\n{d}"
            assert fast.allowed(Action.TRASH) == trash & docs, f"{ctx}\nk{kid}: trash differs"
            assert readable_tree(db, p, kid) == readable & docs, f"{ctx}\nk{kid}: readable_tree differs"
            assert fast.kb_actions == kb_caps[kid], f"{ctx}\nk{kid}: kb {fast.kb_actions} vs {kb_caps[kid]}"
            # a narrower action list is the same answer restricted to it
            only_read = tree_access(db, p, kid, (Action.READ,))
            assert {d: c for d, c in only_read.documents.items()} == {
                d: c & {Action.READ} for d, c in fast.documents.items()
            }, f"{ctx}\nk{kid}: READ-only differs"
            # and the fast placements are the generic ones, object for object
            placed = rules.place_tree(load_kb_snapshot(db, p, kid), str(kid))
            for d in docs:
                generic = rules.place(snap, str(d))
                got = placed[str(d)]
                assert (got[0] if got else None) == generic, f"{ctx}\nplacement of {d} differs"
                if got is not None:
                    assert got[1] == rules.region_access(snap.viewer, generic.customs, generic.kb)


@FAST_PATH_SETTINGS
@given(world=worlds(max_docs=12))
def test_tree_fast_path_agrees_with_batch(db, world: World) -> None:
    nested = db.begin_nested()
    try:
        insert_world(db, world)
        check_world(db, world)
    finally:
        nested.rollback()


# -- broken trees, which the database never holds but the rules must still refuse -------------------


def _doc(
    n: int, parent: int | None, *, kb: str = "k1", tenant: str = "t1", mode: str = "inherit", status: str = "published"
) -> DocFacts:
    return DocFacts(f"d{n}", None if parent is None else f"d{parent}", kb, "w1", tenant, "page", status, mode, None)


def test_place_tree_matches_place_on_broken_trees() -> None:
    docs = [
        _doc(1, None),
        _doc(2, 1, mode="custom"),
        _doc(3, 2, status="draft"),
        _doc(4, 3, status="weird"),
        _doc(5, 4, status="deleted"),
        _doc(6, 7),
        _doc(7, 6),  # a cycle
        _doc(8, 8),  # its own parent
        _doc(9, 99),  # a missing parent
        _doc(10, 11),
        _doc(11, None, kb="k2"),  # parent in another knowledge base
        _doc(12, 1, tenant="t2"),
        _doc(13, 12),  # a document of another tenant, and its child
    ]
    kbs = {"k1": KbFacts("k1", "w1", "t1", "workspace", "active"), "k2": KbFacts("k2", "w1", "t1", "public", "active")}
    viewer = Viewer(principal=Principal.user(uuid.uuid4(), uuid.uuid4()), user_active=True)
    snap = Snapshot(docs={d.id: d for d in docs}, kbs=kbs, viewer=viewer)
    placed = rules.place_tree(snap, "k1")
    assert set(placed) == {d.id for d in docs if d.kb_id == "k1"}
    for did, got in placed.items():
        assert (got[0] if got else None) == rules.place(snap, did), did
    assert placed["d6"] is None and placed["d8"] is None and placed["d9"] is None and placed["d10"] is None
    assert placed["d12"] is None and placed["d13"] is not None
    assert placed["d5"][0].status == "deleted" and placed["d4"][0].status == "weird"
    assert rules.place_tree(Snapshot(docs=snap.docs, kbs={}, viewer=viewer), "k1") == dict.fromkeys(placed, None)
