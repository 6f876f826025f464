"""Two writers of one subject at once (docs/facts.md#writing): the second waits for the first's
lock on the subject and then sees what the first wrote, so a subject never ends up with two
current values of a cardinality-``one`` predicate, nor the same value current twice.

Trap this guards: under READ COMMITTED a statement reads with the snapshot taken when it
*started*, so a statement that waits for the subject's lock and then reads the current values in
the same statement reads them as they were before the first writer committed. ``facts.put``
locks in its first statement and checks, in the write's own statement, that the values it
decided on are still the current ones (``openkb.facts.service._write``).

Committed sessions on two connections; the tenant is deleted at the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import Session, select

from openkb.facts import service as F
from tests.factories import make_tenant, make_user
from tests.facts.conftest import Person

PERMS = [f"facts.{a}:self:{p}" for a in ("read", "write") for p in ("location.home.*", "pref.food.*")]


@pytest.fixture(scope="module")
def two(engine) -> Iterator[dict[str, Any]]:  # noqa: ANN001
    from openkb.permissions import Principal

    with Session(engine, expire_on_commit=False) as s:
        t = make_tenant(s)
        u = make_user(s, t)
        me = Person(s, t.id, Principal.user(u.id, t.id))
        callers = [me.install("one", PERMS), me.install("two", PERMS)]
        F.put(s, callers[0], predicate_hint="location.home.city", value="Amsterdam")  # the self entity, a value
        s.commit()
        tid = t.id
    try:
        yield {"engine": engine, "callers": callers, "user": me.user}
    finally:
        with Session(engine) as s:
            s.execute(text("DELETE FROM tenants WHERE id = :t"), {"t": tid})
            s.commit()


def _race(engine, first: Any, second: Any) -> tuple[str, str]:  # noqa: ANN001
    """``first`` writes and holds its transaction open until ``second``'s write (in a thread)
    waits for the subject's lock; then ``first`` commits and ``second`` finishes. Their statuses.
    A dict is an app's ``put``; a callable gets the session and returns the status."""
    pid: list[int] = []
    ready = threading.Event()
    out: dict[str, Any] = {}

    def run_second() -> None:
        try:
            with Session(engine, expire_on_commit=False) as s:
                pid.append(s.execute(text("SELECT pg_backend_pid()")).scalar_one())
                ready.set()
                out["status"] = _do(s, second)
                s.commit()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
            ready.set()

    with Session(engine, expire_on_commit=False) as a:
        got_first = _do(a, first)
        t = threading.Thread(target=run_second)
        t.start()
        assert ready.wait(30) and pid, out
        with engine.connect() as watch:  # until the second writer waits for the first's lock
            deadline = time.monotonic() + 30
            blocked = text("SELECT cardinality(pg_blocking_pids(:p)) > 0")
            while not watch.execute(blocked, {"p": pid[0]}).scalar_one():
                assert time.monotonic() < deadline and "error" not in out, out
                time.sleep(0.005)
        a.commit()
    t.join(30)
    assert not t.is_alive() and "error" not in out, out
    return got_first, out["status"]


def _do(session: Session, write: Any) -> str:
    return write(session) if callable(write) else F.put(session, **write)["status"]


def _current(engine, caller, prefix: str) -> list[Any]:  # noqa: ANN001
    with Session(engine) as s:
        return [f["value"] for f in F.lookup(s, caller, "self", prefix)]


def test_cardinality_one_keeps_one_current_value(two) -> None:  # noqa: ANN001
    c1, c2 = two["callers"]
    first = {"caller": c1, "predicate_hint": "location.home.city", "value": "Utrecht"}
    second = {"caller": c2, "predicate_hint": "location.home.city", "value": "Delft"}
    assert _race(two["engine"], first, second) == ("applied", "applied")
    assert _current(two["engine"], c1, "location.home.city") == ["Delft"]


def test_the_same_value_at_once_is_current_once(two) -> None:  # noqa: ANN001
    c1, c2 = two["callers"]
    first = {"caller": c1, "predicate_hint": "pref.food.like", "value": "饺子"}
    second = {"caller": c2, "predicate_hint": "pref.food.like", "value": "饺子"}
    assert _race(two["engine"], first, second) == ("applied", "duplicate")
    assert _current(two["engine"], c1, "pref.food.like") == ["饺子"]


def test_the_users_value_written_at_once_wins_over_the_apps(two) -> None:  # noqa: ANN001
    """The user's write (the two-statement way) and an app's (one statement) at once: the app's
    sees the user-said value and is a conflict."""
    c1, _ = two["callers"]

    def user(s: Session) -> str:
        return F.user_put(s, two["user"], predicate="location.home.city", value="Leiden")["status"]

    second = {"caller": c1, "predicate_hint": "location.home.city", "value": "Haarlem"}
    assert _race(two["engine"], user, second) == ("applied", "conflict")
    assert _current(two["engine"], c1, "location.home.city") == ["Leiden"]


def test_a_revert_bringing_a_value_back_waits_for_a_put_about_the_subject(two) -> None:  # noqa: ANN001
    """A retraction reverted while an app puts another value of the same cardinality-``one``
    predicate: the revert decides after the put and leaves the old value expired."""
    from openkb.content import revert as R
    from openkb.content.actor import Actor
    from openkb.models import Change

    c1, _ = two["callers"]
    engine = two["engine"]
    with Session(engine, expire_on_commit=False) as s:
        F.put(s, c1, predicate_hint="location.home.address", value="Keizersgracht 1")
        ref = F.lookup(s, c1, "self", "location.home.address")[0]["ref"]
        retracted = F.retract(s, c1, ref)
        assert retracted["status"] == "retracted"
        gone = s.exec(
            select(Change).where(Change.op == "fact.retract").order_by(Change.created_at.desc())  # type: ignore[attr-defined]
        ).first()
        s.commit()
    assert _current(engine, c1, "location.home.address") == []

    def revert(s: Session) -> str:
        R.revert(s, Actor.of(two["user"]), change_id=gone.id)
        return "reverted"

    first = {"caller": c1, "predicate_hint": "location.home.address", "value": "Rue Neuve 2"}
    assert _race(engine, first, revert) == ("applied", "reverted")
    assert _current(engine, c1, "location.home.address") == ["Rue Neuve 2"]
