"""The scope expression algebra: rendering, evaluation, and the widening of very long id lists."""

from __future__ import annotations

import uuid

from openkb.permissions import filters as F
from openkb.permissions.scope import ReadableScope


def test_long_id_lists_widen_soundly_but_never_cross_the_tenant():
    many = frozenset(str(uuid.uuid4()) for _ in range(F.MAX_LIST + 1))
    few = frozenset(list(many)[:3])
    assert F.one_of(F.SCOPE_DOC, many) is F.TRUE
    assert isinstance(F.one_of(F.SCOPE_DOC, few), F.In)
    wide = ReadableScope(tenant_id="t1", doc_read=many)
    narrow = ReadableScope(tenant_id="t1", doc_read=few)
    row = {"tenant_id": "t1", "doc_status": "published", "scope_doc": next(iter(few)), "visibility_eff": "private"}
    other = dict(row, scope_doc="not-granted")
    assert narrow.matches(row) and not narrow.matches(other)
    assert wide.matches(row) and wide.matches(other)  # wider: a superset, checked again in PostgreSQL
    assert not wide.matches(dict(row, tenant_id="t2"))  # but never another tenant's rows
    assert not wide.matches(dict(row, doc_status="archived"))
    expr = wide.to_milvus_filter()
    assert len(expr) < 500 and 'tenant_id == "t1"' in expr
