"""The MCP services over the permission oracle's random worlds: 0 leaks, 0 misses.

The worlds and the oracle are the permission tests' (tests/permissions/worlds.py, oracle.py),
indexed like tests/retrieval/test_leak_recall.py does. Every person of a world calls the MCP
services (``openkb.mcp.tools``) the way ``/mcp`` calls them, with a read-scoped token principal:
``kb_search`` finds exactly what the oracle lets them find; ``kb_get_document`` opens exactly
what they may read (``kb_get_document_changes`` compares exactly the pages they may read) (or restore from the trash) and says ``document not found`` otherwise, the
same words as for a missing id; ``kb_list_documents`` lists exactly the readable documents of a
readable knowledge base and ``knowledge base not found`` for any other; ``kb_list_shared_documents``
lists nothing they may not read. In-process on the
rolled-back ``db`` session (the live server could not see its uncommitted rows); the HTTP path
in front of these services is tests/mcp/test_mcp_endpoint.py's.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from openkb.errors import NotFound, PermissionDenied
from openkb.indexing import milvus as mv
from openkb.indexing import service
from openkb.mcp import tools
from openkb.mcp.caller import McpCaller
from tests.permissions.oracle import Oracle, Who
from tests.permissions.worlds import World, insert_world, uid, worlds
from tests.retrieval.test_leak_recall import TENANTS, _add_versions, target  # noqa: F401 - fixture

READ = frozenset({"kb:read", "kb:search", "doc:read"})


def _people(w: World) -> list[Who]:
    a_users = [u.n for u in w.users if u.tenant == "A"]
    b_user = next(u.n for u in w.users if u.tenant == "B")
    return [Who("user", "A", user=n, scopes=READ) for n in a_users] + [
        Who("user", "B", user=b_user, scopes=READ),
        Who("user", "A", user=b_user, scopes=READ),
    ]


def _caller(who: Who) -> McpCaller:
    from openkb.permissions import Principal

    p = Principal.user(uid("user", who.user), uid("tenant", who.tenant), scopes=who.scopes)
    return McpCaller(p, "pat", uuid.uuid4(), "pat:test")


@settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(w=worlds(max_docs=8), salt=st.integers(0, 10**9))
def test_mcp_tools_never_leak_and_miss_nothing(db, app_ctx, target, w: World, salt: int) -> None:  # noqa: F811
    assume(sum(d.type == "page" for d in w.docs) >= 2)
    client = app_ctx.milvus
    mv.delete_rows(client, target.collection, filter=TENANTS)
    nested = db.begin_nested()
    try:
        insert_world(db, w)
        words = _add_versions(db, w, salt)
        service.sync_documents(app_ctx, db, [uid("doc", n) for n in words], targets=[target])
        oracle = Oracle(w)
        by_id = {str(uid("doc", d.n)): d.n for d in w.docs}
        st_ = app_ctx.settings
        for who in _people(w):
            caller = _caller(who)
            ctx = f"\n{w.describe()}\nprincipal: {who}"
            found = tools.search(app_ctx, db, caller, query=f"shared{salt}", top_k=20)
            got = {by_id.get(r["document_id"], -1) for r in found["results"]}
            expected = {n for n in words if oracle.allows(who, n, "search")}
            assert got == expected, f"search LEAK {sorted(got - expected)} MISS {sorted(expected - got)}{ctx}"
            shared = tools.list_shared_documents(db, caller, st_, limit=100)["documents"]
            leaked = {by_id.get(x["id"], -1) for x in shared} - {d.n for d in w.docs if oracle.allows(who, d.n, "read")}
            assert not leaked, f"list_shared_documents LEAK {sorted(leaked)}{ctx}"
            for d in w.docs:
                visible = oracle.allows(who, d.n, "read") or oracle.allows(who, d.n, "trash")
                try:
                    out = tools.get_document(db, caller, st_, document_id=uid("doc", d.n))
                    assert visible and out["id"] == str(uid("doc", d.n)), f"get_document LEAK d{d.n}{ctx}"
                except NotFound as exc:
                    assert not visible, f"get_document MISS d{d.n}{ctx}"
                    assert exc.detail == "document not found"
                if d.n in words:  # a page with a version: what changed in it, as the oracle allows
                    readable = oracle.allows(who, d.n, "read")
                    try:
                        changes = tools.document_changes(db, caller, st_, document_id=uid("doc", d.n), from_version=0)
                        assert readable and changes["added_lines"] > 0, f"document_changes LEAK d{d.n}{ctx}"
                    except NotFound as exc:
                        assert not readable and not oracle.allows(who, d.n, "trash"), f"changes MISS d{d.n}{ctx}"
                        assert exc.detail == "document not found"
                    except PermissionDenied:  # seen in the trash (to restore it), not readable
                        assert not readable and oracle.allows(who, d.n, "trash"), f"changes MISS d{d.n}{ctx}"
            for kb in w.kbs:
                try:
                    listed = tools.list_documents(
                        db, caller, st_, knowledge_base_id=uid("kb", kb.n), recursive=True, limit=200
                    )
                except NotFound as exc:
                    assert not oracle.kb_allows(who, kb.n, "read"), f"list MISS kb{kb.n}{ctx}"
                    assert exc.detail == "knowledge base not found"
                    continue
                assert oracle.kb_allows(who, kb.n, "read"), f"list LEAK kb{kb.n}{ctx}"
                got_docs = {by_id[x["id"]] for x in listed["documents"]}
                want = {d.n for d in w.docs if d.kb == kb.n and oracle.allows(who, d.n, "read")}
                assert got_docs == want, (
                    f"list kb{kb.n} LEAK {sorted(got_docs - want)} MISS {sorted(want - got_docs)}{ctx}"
                )
    finally:
        nested.rollback()
        mv.delete_rows(client, target.collection, filter=TENANTS)
