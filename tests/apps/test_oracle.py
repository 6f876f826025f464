"""The permission oracle's random worlds with an app installation narrowing each user
(docs/apps.md#reach): what an app reads is exactly the user's own read permission (the naive
oracle of tests/permissions) intersected with its granted collections. 0 leaks: no read by ref,
listing or search ever returns what lies outside that intersection."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openkb.apps import knowledge as K
from openkb.apps import refs as R
from openkb.apps.registry import APP_SCOPES, AppCaller
from openkb.errors import KnowledgePermissionMissing, NotFound
from openkb.permissions import Principal
from tests.permissions.oracle import Oracle, Who
from tests.permissions.worlds import World, insert_world, uid, worlds

SECRET = "oracle-secret"


@st.composite
def narrowed(draw):
    w: World = draw(worlds(max_docs=8))
    folders = [d.n for d in w.docs if d.type == "folder"]
    a_kbs = [k.n for k in w.kbs if w.kb_tenant(k.n) == "A"]
    roots = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("kb"), st.sampled_from(a_kbs)),
                *([st.tuples(st.just("doc"), st.sampled_from(folders))] if folders else []),
            ),
            max_size=3,
            unique=True,
        )
    )
    read_on = draw(st.booleans())
    return w, roots, read_on


def _inside(w: World, n: int, roots) -> bool:
    d = w.doc(n)
    chain, cur = [], d
    while cur is not None:
        chain.append(cur.n)
        cur = w.doc(cur.parent) if cur.parent is not None else None
    return any((kind == "kb" and d.kb == x) or (kind == "doc" and x in chain) for kind, x in roots)


def _caller(w: World, user_n: int, roots, read_on: bool) -> AppCaller:
    selected = []
    for kind, x in roots:
        if kind == "kb":
            selected.append((uid("kb", x), None))
        else:
            selected.append((uid("kb", w.doc(x).kb), uid("doc", x)))
    return AppCaller(
        installation_id=uuid.UUID(int=user_n + 0xA99 << 32),
        tenant_id=uid("tenant", "A"),
        user_id=uid("user", user_n),
        app_id=uuid.uuid4(),
        app_name="oracle",
        principal=Principal.user(uid("user", user_n), uid("tenant", "A"), scopes=APP_SCOPES),
        grants=frozenset({"collections.read:user-selected"} if read_on else set()),
        selected=tuple(selected),
        created=(),
        diary_kb_id=None,
        keep_kb_id=None,
        allowed_hosts=(),
        secret=SECRET,
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(case=narrowed())
def test_app_reach_is_the_oracle_intersected_with_grants(db, case) -> None:
    w, roots, read_on = case
    oracle = Oracle(w)
    nested = db.begin_nested()
    try:
        insert_world(db, w)
        for u in (x for x in w.users if x.tenant == "A"):
            who = Who("user", "A", user=u.n, scopes=frozenset(APP_SCOPES))
            c = _caller(w, u.n, roots, read_on)
            ctx = f"\n{w.describe()}\nuser u{u.n}, roots {roots}, read grant {read_on}"
            pages = [d.n for d in w.docs if d.type == "page"]
            for n in pages:
                expected = read_on and _inside(w, n, roots) and oracle.allows(who, n, "read")
                ref = R.make_ref(SECRET, c.installation_id, R.DOCUMENT, uid("doc", n))
                try:
                    got = K.documents_get(db, c, ref)
                    assert expected, f"{ctx}\nLEAK: read d{n}"
                    assert got["ref"] == ref
                except (NotFound, KnowledgePermissionMissing) as e:
                    assert not expected, f"{ctx}\nd{n} refused ({e.code}) but the user may read it and it is granted"
            found = {uuid.UUID(str(x)) for x in _search_ids(db, c)}
            want = {
                uid("doc", n) for n in pages if read_on and _inside(w, n, roots) and oracle.allows(who, n, "search")
            }
            assert found <= want, f"{ctx}\nLEAK in search: {sorted(found - want)}"
            assert found == want, f"{ctx}\nsearch missed {sorted(want - found)}"
            for item in K.collections_list(db, c):
                kind, oid = R.read_ref(SECRET, c.installation_id, item["ref"], R.KB + R.FOLDER)
                if kind == R.FOLDER:
                    n = int(oid.int & 0xFFFFFFFFFFFF)
                    assert read_on and _inside(w, n, roots) and oracle.allows(who, n, "read"), (
                        f"{ctx}\nLEAK: folder d{n}"
                    )
                else:
                    k = int(oid.int & 0xFFFFFFFFFFFF)
                    assert read_on and ("kb", k) in roots and oracle.kb_allows(who, k, "read"), f"{ctx}\nLEAK: k{k}"
    finally:
        nested.rollback()


def _search_ids(db, c: AppCaller) -> list[uuid.UUID]:
    refs = [h["document"] for h in K.search(None, db, c, "", limit=100)]  # type: ignore[arg-type]
    return [R.read_ref(SECRET, c.installation_id, r, R.DOCUMENT)[1] for r in refs]
