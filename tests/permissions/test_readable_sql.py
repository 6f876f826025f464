"""The PostgreSQL read predicate (openkb/permissions/sql.py) equals the read rule, in every world.

For every principal of random permission worlds (tests/permissions/worlds.py: custom folders
and pages with their own visibility, groups, guests, other tenants, suspended users, loops and
broken chains are not generated but draft/archived/deleted statuses are), ``readable_documents``
must return exactly the documents the naive oracle and the Python service both let it read.
Non-user principals get nothing from the predicate (the service decides for them)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from sqlalchemy import text

from openkb.permissions import Action, filter_documents
from openkb.permissions.sql import readable_documents
from tests.permissions.oracle import Oracle
from tests.permissions.test_oracle import principals_of, to_principal
from tests.permissions.worlds import World, insert_world, uid, worlds


def check_world(db, w: World) -> None:
    oracle = Oracle(w)
    doc_ids = {uid("doc", d.n): d.n for d in w.docs}
    for who in principals_of(w):
        p = to_principal(w, who)
        got = readable_documents(db, p, doc_ids)
        if who.kind != "user":
            assert got == set(), f"{who}: the predicate is for user principals only"
            continue
        expected = {did for did, n in doc_ids.items() if oracle.allows(who, n, "read")}
        service = set(filter_documents(db, p, list(doc_ids), Action.READ))
        ctx = f"\n{w.describe()}\nprincipal: {who}"
        assert service == expected, f"{ctx}\nservice and oracle disagree (not this module's bug)"
        missing = sorted(doc_ids[d] for d in expected - got)
        extra = sorted(doc_ids[d] for d in got - expected)
        assert not missing and not extra, f"{ctx}\npredicate misses d{missing}, admits d{extra}"


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=worlds())
def test_predicate_equals_the_read_rule(db, world: World) -> None:
    nested = db.begin_nested()
    try:
        insert_world(db, world)
        check_world(db, world)
    finally:
        nested.rollback()


def test_broken_chains_place_nothing(db) -> None:
    """A parent loop or a parent in another knowledge base hides the document (``place`` gives
    None), also for its owner."""
    from hypothesis import find

    world = find(worlds(), lambda w: len(w.docs) >= 2 and any(d.parent is not None for d in w.docs))
    nested = db.begin_nested()
    try:
        insert_world(db, world)
        child = next(d for d in world.docs if d.parent is not None)
        owner = next(who for who in principals_of(world) if who.kind == "user")
        p = to_principal(world, owner)
        # a loop: the parent's parent is the child
        db.execute(
            text("UPDATE documents SET parent_id = :c WHERE id = :p"),
            {"c": uid("doc", child.n), "p": uid("doc", child.parent)},
        )
        looped = {uid("doc", child.n), uid("doc", child.parent)}
        assert readable_documents(db, p, looped) == set() == set(filter_documents(db, p, list(looped), Action.READ))
    finally:
        nested.rollback()
