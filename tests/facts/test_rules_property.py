"""The write rules of docs/facts.md#writing as a property: any sequence of puts by the user and
by apps, and retractions, gives the statuses and the current values a small reference model
predicts (same value -> duplicate, except the user confirming an app's value, which becomes user-said;
cardinality one with a user-said value -> conflict for an app; cardinality one otherwise -> the
old value expires; many -> values accumulate)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openkb.facts import service as F
from openkb.facts import vocabulary as V
from tests.facts.conftest import make_person

PREDS = {"location.home.city": "one", "pref.food.like": "many"}
VALUES = ["Utrecht", "Delft", 1, True, {"k": [1, 2]}]  # true and 1 are two JSON values
PERMS = [f"facts.{a}:self:{p}" for a in ("read", "write") for p in PREDS]

ops = st.lists(
    st.tuples(
        st.sampled_from(["user", "app1", "app2", "retract"]),
        st.sampled_from(sorted(PREDS)),
        st.sampled_from(range(len(VALUES))),
    ),
    min_size=1,
    max_size=12,
)


@dataclass
class Model:
    """(predicate) -> current [(value index, said by, writer)] in write order."""

    current: dict[str, list[tuple[int, str, str]]] = field(default_factory=lambda: {p: [] for p in PREDS})

    def put(self, who: str, pred: str, v: int) -> str:
        cur = self.current[pred]
        said = "user" if who == "user" else "app"
        same = next((x for x in cur if x[0] == v), None)
        if same is not None and not (said == "user" and same[1] == "app"):
            return "duplicate"
        if same is not None:  # the user confirms an app's value: it becomes user-said
            cur.remove(same)
        if PREDS[pred] == "one":
            if said == "app" and any(x[1] == "user" for x in cur):
                return "conflict"
            self.current[pred] = [(v, said, who)]
        else:
            cur.append((v, said, who))
        return "applied"

    def retract_first(self, pred: str) -> tuple[int, str, str] | None:
        cur = self.current[pred]
        return cur.pop(0) if cur else None


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=ops)
def test_statuses_and_current_values_follow_the_reference_model(db, steps) -> None:
    me = make_person(db)
    V.seed_core(db, me.tenant_id)
    apps = {"app1": me.install("app1", PERMS), "app2": me.install("app2", PERMS)}
    model = Model()
    for who, pred, v in steps:
        if who == "retract":
            # the user retracts the oldest current value (their own page can retract anything)
            want = model.retract_first(pred)
            rows = F.user_facts(db, me.user, prefix=pred)
            rows = [r for r in rows if r["predicate"] == pred]
            assert (want is None) == (not rows)
            if rows:
                assert rows[0]["value"] == VALUES[want[0]]
                assert F.user_retract(db, me.user, rows[0]["id"]) == {"status": "retracted"}
            continue
        expected = model.put(who, pred, v)
        if who == "user":
            got = F.user_put(db, me.user, predicate=pred, value=VALUES[v])["status"]
        else:
            got = F.put(db, apps[who], predicate_hint=pred, value=VALUES[v])["status"]
        assert got == expected, (who, pred, VALUES[v])
        for p in PREDS:
            now = [r for r in F.user_facts(db, me.user, prefix=p) if r["predicate"] == p]
            assert [(r["value"], r["said_by"], r["app"] or "user") for r in now] == [
                (VALUES[x[0]], x[1], x[2]) for x in model.current[p]
            ]
            seen = [f["value"] for f in F.lookup(db, apps["app1"], "self", p)]
            assert seen == [VALUES[x[0]] for x in model.current[p]]
