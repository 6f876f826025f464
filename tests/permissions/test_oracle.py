"""Property test: the service agrees with the naive oracle on every (principal, document, action)
of random worlds, and the search scopes never miss a readable document."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import insert
from sqlmodel import col, select

from openkb.errors import NotFound
from openkb.models import Change
from openkb.permissions import (
    Action,
    KbAction,
    Principal,
    WsAction,
    access_change,
    change_scope,
    chunk_access_many,
    readable_scope,
    rules,
)
from openkb.permissions.loader import load_snapshot
from tests.permissions.oracle import DOC_ACTIONS, KB_ACTIONS, WS_ACTIONS, Oracle, Who
from tests.permissions.worlds import World, insert_world, uid, worlds

WORLD_SETTINGS = settings(
    max_examples=500,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def principals_of(w: World) -> list[Who]:
    a_users = [u.n for u in w.users if u.tenant == "A"]
    b_user = next(u.n for u in w.users if u.tenant == "B")
    out = [Who("user", "A", user=n) for n in a_users]
    out += [
        Who("user", "A", user=a_users[0], scopes=frozenset({"kb:search"})),
        Who("user", "A", user=a_users[-1], scopes=frozenset({"kb:write"})),
        Who("user", "B", user=b_user),
        Who("user", "A", user=b_user),
        Who("anonymous", "A"),
        Who("anonymous", "B"),
        Who("system"),
    ]
    for link in w.links:
        tenant = w.object_tenant(link.object_type, link.object_n)
        out += [Who("share_link", tenant, link=link.n), Who("share_link", tenant, link=link.n, user=a_users[-1])]
    out += [Who("dify_key", "A", dify=f.n) for f in w.difys]
    return out


def to_principal(w: World, who: Who) -> Principal:
    tenant = uid("tenant", who.tenant) if who.tenant else None
    user = uid("user", who.user) if who.user is not None else None
    if who.kind == "user":
        return Principal.user(user, tenant, scopes=who.scopes)
    if who.kind == "anonymous":
        return Principal.anonymous(tenant)
    if who.kind == "system":
        return Principal.system()
    if who.kind == "share_link":
        return Principal(kind="share_link", tenant_id=tenant, share_link_id=uid("link", who.link), user_id=user)
    key = next(f for f in w.difys if f.n == who.dify)
    # built directly (not Principal.dify) so a dead key proves the service re-checks it
    return Principal(
        kind="dify_key",
        tenant_id=tenant,
        dify_key_id=uid("dify", key.n),
        allowed_kb_ids=frozenset(uid("kb", k) for k in key.allowed),
    )


def change_cases(w: World) -> list[tuple[str, int | None, int | None]]:
    """(tenant, knowledge base or None, actor or None) of a change row: every combination."""
    return [
        (t, k, a) for t in ("A", "B") for k in [*(x.n for x in w.kbs), None] for a in [*(u.n for u in w.users), None]
    ]


def check_world(db, w: World) -> None:
    oracle = Oracle(w)
    doc_ids = {uid("doc", d.n): d.n for d in w.docs}
    kb_ids = {uid("kb", k.n): k.n for k in w.kbs}
    ws_ids = {uid("ws", x.n): x.n for x in w.workspaces}
    access = chunk_access_many(db, doc_ids)
    assert set(access) == set(doc_ids)
    for who in principals_of(w):
        p = to_principal(w, who)
        ctx = f"\n{w.describe()}\nprincipal: {who}"

        # One statement per principal: the same loader + rules every public function wraps
        # (test_service.py checks the wrappers themselves).
        snap = load_snapshot(db, p, doc_ids=list(doc_ids), kb_ids=list(kb_ids), ws_ids=list(ws_ids))
        for did, n in doc_ids.items():
            pl = rules.place(snap, str(did))
            caps = rules.capabilities(snap.viewer, pl)
            for action in DOC_ACTIONS:
                expected = oracle.allows(who, n, action)
                got = Action(action) in caps
                assert got == expected, f"{ctx}\ndocument d{n} action {action}: service {got}, oracle {expected}"
            if who.kind == "user":
                role = rules.document_role(snap.viewer, pl)
                assert role == oracle.effective_role(who, n), f"{ctx}\nrole on d{n}: {role}"
        for kid, n in kb_ids.items():
            kcaps = rules.kb_capabilities(snap.viewer, snap.kbs.get(str(kid)))
            for action in KB_ACTIONS:
                expected = oracle.kb_allows(who, n, action)
                got = KbAction(action) in kcaps
                assert got == expected, f"{ctx}\nknowledge base k{n} action {action}: service {got}, oracle {expected}"
            if who.kind == "user":
                assert rules.kb_role(snap.viewer, snap.kbs[str(kid)]) == oracle.kb_role(who, n), f"{ctx}\nrole on k{n}"
        for wid, n in ws_ids.items():
            wcaps = rules.ws_capabilities(snap.viewer, str(wid))
            for action in WS_ACTIONS:
                expected = oracle.ws_allows(who, n, action)
                got = WsAction(action) in wcaps
                assert got == expected, f"{ctx}\nworkspace w{n} action {action}: service {got}, oracle {expected}"
            want_role = oracle.workspace_role(who, n) if who.kind == "user" else None
            assert rules.ws_role(snap.viewer, str(wid)) == want_role, f"{ctx}\nrole on w{n}"
        for tenant, kb_n, actor in change_cases(w):
            facts = snap.kbs.get(str(uid("kb", kb_n))) if kb_n is not None else None
            got = rules.change_visible(
                snap.viewer, str(uid("tenant", tenant)), str(uid("user", actor)) if actor is not None else None, facts
            )
            expected = oracle.change_visible(who, tenant, actor, kb_n)
            assert got == expected, (
                f"{ctx}\nchange of tenant {tenant} by u{actor} in k{kb_n}: service {got}, oracle {expected}"
            )

        # what search may return, plus every readable published document of the principal's
        # tenant (the prefilter ignores archived knowledge bases: the final check drops them)
        searchable = {n for n in doc_ids.values() if oracle.allows(who, n, "search")} | {
            n
            for n in doc_ids.values()
            if oracle.allows(who, n, "read")
            and oracle.status(w.doc(n)) == "published"
            and w.kb_tenant(w.doc(n).kb) == who.tenant
        }
        if not searchable:
            continue  # the superset property is vacuous; skip the statement
        scope = readable_scope(db, p)
        tokens = set(scope.principals)
        for n in searchable:
            did = uid("doc", n)
            ca = access[did]
            assert scope.matches(ca.row(did)), (
                f"{ctx}\nscalar scope misses searchable d{n}: {ca}\nfilter: {scope.to_milvus_filter()}"
            )
            if who.kind != "system":
                assert tokens & set(ca.access_principals), (
                    f"{ctx}\nprincipals miss searchable d{n}: {sorted(tokens)} vs {ca.access_principals}"
                )


@WORLD_SETTINGS
@given(world=worlds())
def test_service_agrees_with_oracle(db, world: World) -> None:
    nested = db.begin_nested()
    try:
        insert_world(db, world)
        check_world(db, world)
    finally:
        nested.rollback()


def insert_changes(db, w: World) -> dict[uuid.UUID, tuple[str, int | None, int | None]]:
    """One change row per ``change_cases`` entry; the knowledge base in ``after_state`` or, as a
    removal records it, only in ``before_state``."""
    rows, cases, now = [], {}, datetime.now(UTC)
    for i, (tenant, kb_n, actor) in enumerate(change_cases(w)):
        cid = uuid.UUID(int=(0xC4A << 48) | i)
        state = {"knowledge_base_id": str(uid("kb", kb_n))} if kb_n is not None else {}
        removal = i % 2 == 1
        rows.append(
            {
                "id": cid,
                "tenant_id": uid("tenant", tenant),
                "run_id": uuid.uuid4(),
                "actor_type": "user" if actor is not None else "system",
                "actor_id": uid("user", actor) if actor is not None else None,
                "op": "document.update",
                "object_type": "document",
                "object_id": uuid.uuid4(),
                "summary": "x",
                "before_state": state,
                "after_state": {} if removal else state,
                "status": "applied",
                "created_at": now + timedelta(microseconds=i),
            }
        )
        cases[cid] = (tenant, kb_n, actor)
    db.execute(insert(Change.__table__), rows)
    return cases


@settings(
    max_examples=25,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=worlds(max_docs=0))
def test_change_log_forms_agree_with_oracle(db, world: World) -> None:
    """``change_scope(...).clause()`` (the listings' SQL) and ``access_change`` (one row) select
    exactly the change rows the oracle's rule shows, for the whole tenant and per knowledge base."""
    nested = db.begin_nested()
    try:
        insert_world(db, world)
        cases = insert_changes(db, world)
        oracle = Oracle(world)
        for who in principals_of(world):
            p = to_principal(world, who)
            want = {cid for cid, (t, k, a) in cases.items() if oracle.change_visible(who, t, a, k)}
            got = set(
                db.exec(select(Change.id).where(col(Change.id).in_(list(cases)), change_scope(db, p).clause())).all()
            )
            assert got == want, f"{world.describe()}\nprincipal: {who}\nextra {got - want}\nmissing {want - got}"
            for kb in world.kbs:
                # a listing filtered to one knowledge base decides only that one's manage right
                scoped = {cid for cid in cases if cases[cid][1] == kb.n}
                got_kb = set(
                    db.exec(
                        select(Change.id).where(
                            col(Change.id).in_(list(scoped)), change_scope(db, p, uid("kb", kb.n)).clause()
                        )
                    ).all()
                )
                assert got_kb == want & scoped, f"{world.describe()}\nprincipal: {who}\nk{kb.n}"
            for cid in cases:
                if cid in want:
                    assert access_change(db, p, cid).id == cid
                else:
                    with pytest.raises(NotFound):
                        access_change(db, p, cid)
            with pytest.raises(NotFound):  # missing and unseen are the same error
                access_change(db, p, uuid.uuid4())
    finally:
        nested.rollback()
