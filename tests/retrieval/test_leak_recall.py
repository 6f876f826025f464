"""Leak and recall over random permission worlds (the permission helper's generator and oracle).

For every principal of a world: a query matching every document returns exactly the documents
the oracle says it may find in search (nothing more: no leak; nothing less: the Milvus prefilter
misses nothing), a word unique to one readable document finds it, and the empty-query listing
stays inside the readable set. Each example's PostgreSQL rows live in a rolled-back savepoint;
its Milvus rows (tenants A and B of the world generator) are deleted before the next example.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, text

from openkb.db import session_scope
from openkb.indexing import milvus as mv
from openkb.indexing import service
from openkb.models import DocumentVersion
from openkb.retrieval import forget_active_profile, search
from tests.permissions.oracle import Oracle
from tests.permissions.test_oracle import principals_of, to_principal
from tests.permissions.worlds import WGrant, World, insert_world, uid, worlds

TENANTS = f'tenant_id in ["{uid("tenant", "A")}", "{uid("tenant", "B")}"]'


@pytest.fixture(scope="module")
def target(app_ctx):
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
        targets = service.write_targets(app_ctx, s)
    forget_active_profile()
    return targets[0]


def _add_versions(db, w: World, salt: int) -> dict[int, str]:
    """One version per page: a word unique to the page and a word shared by all of them."""
    words: dict[int, str] = {}
    rows = []
    for d in w.docs:
        if d.type != "page":
            continue
        words[d.n] = f"uniq{salt}x{d.n}"
        md = f"# d{d.n}\n\n{words[d.n]} shared{salt} 共享文本 text.\n"
        rows.append(
            {
                "id": uuid.uuid4(),
                "tenant_id": uid("tenant", w.kb_tenant(d.kb)),
                "document_id": uid("doc", d.n),
                "version_no": 1,
                "title": f"d{d.n}",
                "markdown": md,
                "markdown_hash": hashlib.sha256(md.encode()).hexdigest(),
                "source_type": "manual",
                "created_by": uid("user", w.users[0].n),
            }
        )
    if rows:
        db.execute(insert(DocumentVersion.__table__), rows)
        db.execute(
            text(
                "UPDATE documents d SET current_version_id = v.id FROM document_versions v "
                "WHERE v.document_id = d.id AND d.id = ANY(:ids)"
            ),
            {"ids": [r["document_id"] for r in rows]},
        )
    return words


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(w=worlds(max_docs=8), salt=st.integers(0, 10**9), friendly=st.booleans())
def test_search_never_leaks_and_misses_nothing(db, app_ctx, target, w: World, salt: int, friendly: bool) -> None:
    assume(sum(d.type == "page" for d in w.docs) >= 2)
    if friendly:  # most generated people can read nothing; half the worlds give them more to read
        w.users = [replace(u, status="active", tenant_role=u.tenant_role or "member") for u in w.users]
        kb = w.kbs[0].n
        have = {(g.object_type, g.object_n, g.subject_type, g.subject_n) for g in w.grants}
        w.grants = w.grants + [
            WGrant("knowledge_base", kb, "user", u.n, "viewer")
            for u in w.users
            if u.tenant == "A" and ("knowledge_base", kb, "user", u.n) not in have
        ]
    client = app_ctx.milvus
    mv.delete_rows(client, target.collection, filter=TENANTS)
    nested = db.begin_nested()
    try:
        insert_world(db, w)
        words = _add_versions(db, w, salt)
        service.sync_documents(app_ctx, db, [uid("doc", n) for n in words], targets=[target])
        oracle = Oracle(w)
        by_id = {str(uid("doc", n)): n for n in words}
        rnd = random.Random(salt)
        for who in principals_of(w):
            if who.kind == "system":
                continue
            p = to_principal(w, who)
            expected = {n for n in words if oracle.allows(who, n, "search")}
            ctx = f"\n{w.describe()}\nprincipal: {who}\nexpected {sorted(expected)}"
            got = [r for r in search(app_ctx, db, p, f"shared{salt}", top_k=50)]
            got_n = {by_id.get(r.document_id, -1) for r in got}
            assert got_n <= expected, f"LEAK {sorted(got_n - expected)}{ctx}"
            assert got_n == expected, f"MISSED {sorted(expected - got_n)}{ctx}"
            if expected:
                n = rnd.choice(sorted(expected))
                top = search(app_ctx, db, p, words[n], top_k=3)
                assert top and by_id.get(top[0].document_id) == n, f"unique word of d{n} not first: {top}{ctx}"
            listed = {by_id.get(r.document_id, -1) for r in search(app_ctx, db, p, "", top_k=20)}
            assert listed <= expected, f"LEAK in recent listing {sorted(listed - expected)}{ctx}"
    finally:
        nested.rollback()
        mv.delete_rows(client, target.collection, filter=TENANTS)
