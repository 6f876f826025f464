"""A profile's RERANK function is applied at search time; when the rerank service fails, search
returns the unreranked hybrid results and logs it (docs/retrieval.md#degradation) — never an error, never a leak."""

from __future__ import annotations

import dataclasses
import logging
import uuid

import pytest
from sqlmodel import Session

from openkb.db import session_scope
from openkb.indexing import service
from openkb.indexing.profiles_spec import RerankSpec
from openkb.permissions import Principal
from openkb.retrieval import forget_active_profile, search
from openkb.retrieval import service as retrieval
from tests.factories import make_doc, make_kb, make_personas


@pytest.fixture(scope="module")
def world(app_ctx, engine):
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    word = f"rerankword{uuid.uuid4().hex[:8]}"
    with session_scope(engine) as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, visibility="workspace")
        docs = [
            make_doc(s, kb, p.owner, markdown=f"# R{i}\n\n{word} variant {i} " + "filler " * i + "\n") for i in range(4)
        ]
        service.sync_documents(app_ctx, s, [d.id for d in docs])
        ids = {str(d.id) for d in docs}
        member, tenant, outsider = p.member.id, p.tenant.id, p.outsider.id
    return {
        "word": word,
        "ids": ids,
        "member": Principal.user(member, tenant),
        "outsider": Principal.user(outsider, tenant),
    }


def _with_rerank(monkeypatch, app_ctx, engine, endpoint: str) -> None:
    with Session(engine) as s:
        coll, spec = retrieval.active_spec(app_ctx, s)
    rr = dataclasses.replace(
        spec, rerank=RerankSpec(provider="cohere", endpoint=endpoint, model_name=app_ctx.settings.openkb_embedder_model)
    )
    monkeypatch.setattr(retrieval, "active_spec", lambda ctx, session: (coll, rr))


def _search(app_ctx, engine, who, q):
    with Session(engine) as s:
        return search(app_ctx, s, who, q, top_k=4)


def test_rerank_failure_falls_back_to_unreranked_results(world, app_ctx, engine, monkeypatch, caplog):
    plain = {r.document_id for r in _search(app_ctx, engine, world["member"], world["word"])}
    assert plain == world["ids"]
    _with_rerank(monkeypatch, app_ctx, engine, "http://127.0.0.1:9/v1")  # nothing listens there
    with caplog.at_level(logging.WARNING, logger="openkb.indexing.milvus"):
        got = _search(app_ctx, engine, world["member"], world["word"])
    assert {r.document_id for r in got} == world["ids"]
    assert any("rerank" in r.getMessage() for r in caplog.records)
    assert {r.ranking for r in got} == {"hybrid"}  # the response says the rerank was skipped
    assert all(0.0 <= r.score <= 1.0 for r in got)
    assert _search(app_ctx, engine, world["outsider"], world["word"]) == []


def test_working_rerank_function_is_used(world, app_ctx, engine, monkeypatch):
    if not app_ctx.endpoints.embedder_url:
        pytest.skip("no local embedder (its /v1/rerank serves the test)")
    _with_rerank(monkeypatch, app_ctx, engine, app_ctx.endpoints.embedder_url)
    got = _search(app_ctx, engine, world["member"], world["word"])
    assert {r.document_id for r in got} == world["ids"]
    assert all(0.0 <= r.score <= 1.0 for r in got)  # relevance scores, not RRF ranks
    assert {r.ranking for r in got} == {"hybrid+rerank"}
    assert _search(app_ctx, engine, world["outsider"], world["word"]) == []
