"""The active profile's per-process cache (``profiles.active_spec``, docs/retrieval.md).

On a fresh install the first index job creates the default profile. A search made before that
(the web app's first page, a health probe) must not leave "no profile" cached: with the absence
cached, every search answered nothing for seconds after the page was reported ``indexed``.
Real PostgreSQL + Milvus Lite; only the "not created yet" moment is simulated."""

from __future__ import annotations

from openkb.db import session_scope
from openkb.indexing import profiles
from openkb.indexing.service import ensure_default_profile


def test_no_profile_yet_is_not_cached(app_ctx, monkeypatch):
    real = profiles.active_profile
    with session_scope(app_ctx.engine) as s:
        assert ensure_default_profile(app_ctx, s) is not None  # what the first index job does
    profiles.forget_active_profile()
    monkeypatch.setattr(profiles, "active_profile", lambda ctx, session: None)
    with session_scope(app_ctx.engine) as s:
        assert profiles.active_spec(app_ctx, s) == (None, None)
    monkeypatch.setattr(profiles, "active_profile", real)  # the first index job created it
    with session_scope(app_ctx.engine) as s:
        collection, spec = profiles.active_spec(app_ctx, s)
    assert collection is not None and spec is not None and spec.collection_name == collection
