"""``POST /retrieval`` over HTTP against the running server, as Dify calls it.

Content is written through the content services and indexed by the real huey worker into
Milvus Lite; nothing is mocked. One world per module (its own tenant); every test uses its own
keys where it changes one, so the tests don't depend on each other's order.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, StrictFloat, StrictStr
from sqlalchemy import text
from sqlmodel import Session

import openkb.jobs as jobs
from openkb.content import Actor
from openkb.content.documents import create_document, update_document
from openkb.db import session_scope
from openkb.dify import keys, mappings
from openkb.indexing import milvus as mv
from openkb.indexing import service as index_service
from openkb.models import Document
from openkb.permissions import Principal
from openkb.retrieval import forget_active_profile, search
from tests.factories import make_kb, make_personas, make_user, make_workspace

SYSTEM = Principal.system()  # keys and mappings are set up as the operator (openkb dify ...) would

pytestmark = pytest.mark.usefixtures("worker")

PROBE = {"knowledge_id": "", "query": "", "retrieval_setting": {"top_k": 1, "score_threshold": 0.0}}


# --- what Dify's client requires of a response (its pydantic models, restated) --------------------


class DifyDocument(BaseModel):
    """Dify builds ``Document(page_content=content, metadata=metadata)`` and reads score/title."""

    model_config = ConfigDict(extra="forbid")

    content: StrictStr
    score: StrictFloat
    title: StrictStr
    metadata: dict[str, Any]


def assert_dify_shape(resp: httpx.Response, base_url: str) -> list[dict[str, Any]]:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert isinstance(body, dict) and set(body) == {"records"} and isinstance(body["records"], list)
    scores = []
    for r in body["records"]:
        DifyDocument.model_validate(r)
        assert r["title"].strip(), r
        assert r["content"].strip(), r
        m = r["metadata"]
        assert isinstance(m, dict)
        for k in ("document_id", "chunk_id", "knowledge_base_id", "path", "heading_path", "url"):
            assert k in m, (k, m)
        uuid.UUID(m["document_id"]), uuid.UUID(m["chunk_id"]), uuid.UUID(m["knowledge_base_id"])
        assert isinstance(m["heading_path"], list) and isinstance(m["path"], str)
        assert m["url"] == f"{base_url.rstrip('/')}/app/kb/{m['knowledge_base_id']}/docs/{m['document_id']}"
        assert not {"score", "title", "dataset_id", "dataset_name"} & set(m)  # Dify overwrites these
        assert 0.0 <= r["score"] <= 1.0
        scores.append(r["score"])
    assert scores == sorted(scores, reverse=True)
    return body["records"]


# --- the world -----------------------------------------------------------------------------------


def uniq(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


class World:
    def __init__(self, ctx, engine, base_url: str) -> None:
        self.ctx, self.engine, self.base_url = ctx, engine, base_url
        self.word = uniq("quokka")  # in every document of KB A (and B, draft, private)
        self.zh = uniq("") + "知识库接入说明"
        with Session(engine, expire_on_commit=False) as s:
            self.p = make_personas(s)
            self.kb_a = make_kb(s, self.p.workspace, self.p.owner, visibility="workspace", title="KB A")
            self.kb_b = make_kb(s, self.p.workspace, self.p.owner, visibility="workspace", title="KB B")
            ou = make_user(s, self.p.other_tenant)
            self.other_kb = make_kb(s, make_workspace(s, self.p.other_tenant, ou), ou, title="Other")
            s.commit()
        w = self.word
        self.d1 = self.create(
            self.kb_a,
            f"# 接入 {w}\n\n{w} 配置 MCP 的步骤，{self.zh}。\n",
            title="MCP 接入说明",
            metadata={"lang": "zh", "level": 3, "published": "2024-03-01", "team": "ml"},
            tags=["mcp", "guide"],
        )
        self.d2 = self.create(
            self.kb_a,
            f"# Setup {w}\n\nConfigure the {w} connector for Dify.\n",
            title="Dify setup",
            metadata={"lang": "en", "level": 7, "published": "2025-01-15"},
            tags=["dify"],
        )
        self.d3 = self.create(self.kb_a, f"# Notes\n\nPlain {w} notes without metadata.\n", title="Notes")
        self.draft = self.create(
            self.kb_a,
            f"# Draft\n\n{w} unpublished draft plans.\n",
            title="Draft",
            status="draft",
            metadata={"lang": "zh"},
        )
        self.private = self.create(
            self.kb_a, f"# Private\n\n{w} private salary table.\n", title="Private", metadata={"lang": "zh"}
        )
        self.write(
            lambda s: update_document(
                s, self.actor(), self.private.id, {"permission_mode": "custom", "visibility": "private"}
            )
        )
        self.wait_rows(self.private.id, lambda rows: rows and all(r["visibility_eff"] == "private" for r in rows))
        self.b1 = self.create(self.kb_b, f"# B\n\n{w} belongs to knowledge base B.\n", title="In B")
        self.visible = {str(self.d1.id), str(self.d2.id), str(self.d3.id)}
        with session_scope(engine) as s:
            t = self.p.tenant.id
            self.key_a = keys.create_key(s, SYSTEM, tenant_id=t, name="A", knowledge_base_ids=[self.kb_a.id])[1]
            self.key_b = keys.create_key(s, SYSTEM, tenant_id=t, name="B", knowledge_base_ids=[self.kb_b.id])[1]
            self.key_none = keys.create_key(s, SYSTEM, tenant_id=t, name="none")[1]
            self.key_zh = keys.create_key(
                s,
                SYSTEM,
                tenant_id=t,
                name="zh only",
                knowledge_base_ids=[self.kb_a.id],
                metadata_filters={"lang": "zh"},
            )[1]
            self.key_small = keys.create_key(
                s, SYSTEM, tenant_id=t, name="small", knowledge_base_ids=[self.kb_a.id], top_k_limit=2
            )[1]
            self.key_other = keys.create_key(
                s, SYSTEM, tenant_id=self.p.other_tenant.id, name="other", knowledge_base_ids=[self.other_kb.id]
            )[1]
            self.kid_a, self.kid_b = uniq("kb-a-"), uniq("kb-b-")
            mappings.do_map(s, SYSTEM, tenant_id=t, knowledge_id=self.kid_a, kb=self.kb_a.id)
            mappings.do_map(s, SYSTEM, tenant_id=t, knowledge_id=self.kid_b, kb=self.kb_b.id)
            self.kid_disabled = uniq("off-")
            mappings.do_map(s, SYSTEM, tenant_id=t, knowledge_id=self.kid_disabled, kb=self.kb_a.id)
            mappings.do_disable_mapping(s, SYSTEM, t, self.kid_disabled)
            self.kid_other = uniq("other-")
            mappings.do_map(
                s, SYSTEM, tenant_id=self.p.other_tenant.id, knowledge_id=self.kid_other, kb=self.other_kb.id
            )

    def actor(self) -> Actor:
        return Actor.of(Principal.user(self.p.owner, self.p.tenant.id))

    def write(self, fn):
        with session_scope(self.engine) as s:
            return fn(s)

    def create(self, kb, markdown: str, **kw) -> Document:
        doc = self.write(
            lambda s: create_document(s, self.actor(), knowledge_base_id=kb.id, markdown=markdown, **kw)[0]
        )
        deadline = time.monotonic() + 180
        while True:
            with Session(self.engine) as s:
                d = s.get(Document, doc.id)
                if d.index_status == "indexed" and d.indexed_version_id == d.current_version_id:
                    return d
                if d.index_status == "failed" and "will retry" not in (d.index_error or ""):
                    pytest.fail(f"indexing failed: {d.index_error}")
            if time.monotonic() > deadline:
                pytest.fail(f"document {doc.id} not indexed (status {d.index_status})")
            time.sleep(0.1)

    def wait_rows(self, doc_id, pred, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            rows = mv.query_rows(
                self.ctx.milvus,
                self.ctx.settings.milvus_active_alias,
                f'document_id == "{doc_id}"',
                output_fields=["visibility_eff", "doc_status"],
                limit=100,
            )
            if pred(rows):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"rows of {doc_id} never matched: {rows}")
            time.sleep(0.1)


@pytest.fixture(scope="module")
def world(app_ctx, engine, live_server):
    from workers.queue import HueyQueue

    previous = jobs._queue
    jobs.set_queue(HueyQueue())
    with session_scope(app_ctx.engine) as s:
        index_service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    yield World(app_ctx, engine, app_ctx.settings.app_base_url)
    jobs.set_queue(previous)


def post(
    http: httpx.Client,
    key: str | None,
    body: Any,
    *,
    auth: str | None = None,
    raw: bytes | None = None,
    ua: str = "Dify/1.9 test",
) -> httpx.Response:
    headers = {"Content-Type": "application/json", "User-Agent": ua}
    if auth is not None:
        headers["Authorization"] = auth
    elif key is not None:
        headers["Authorization"] = f"Bearer {key}"
    content = raw if raw is not None else json.dumps(body).encode()  # ensure_ascii: \uXXXX escapes
    return http.post("/retrieval", content=content, headers=headers)


def ask(world: World, query: str | None = None, **kw: Any) -> dict[str, Any]:
    body = {
        "knowledge_id": world.kid_a,
        "query": query or world.word,
        "retrieval_setting": {"top_k": 10, "score_threshold": 0.0},
        "metadata_condition": None,
    }
    body.update(kw)
    return body


def doc_ids(records: list[dict[str, Any]]) -> set[str]:
    return {r["metadata"]["document_id"] for r in records}


def assert_error(resp: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert set(body) == {"error_code", "error_msg"} and body["error_code"] == code and body["error_msg"], body
    return body


# --- probe and errors ----------------------------------------------------------------------------


def test_registration_probe(world, http):
    for key in (world.key_a, world.key_none, world.key_other):
        r = post(http, key, PROBE)
        assert r.status_code == 200 and r.json() == {"records": []}
    assert_error(post(http, "okdify_" + "x" * 43, PROBE), 403, 1002)  # a bad key fails registration (403)
    # older Dify probes without retrieval_setting / metadata_condition
    assert post(http, world.key_a, {"knowledge_id": "", "query": ""}).json() == {"records": []}


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Token okdify_abc",
        "Bearer Bearer {key}",
        "Bearer {key} extra",
        "{key}",
    ],
)
def test_malformed_authorization_is_1001(world, http, header):
    h = None if header is None else header.format(key=world.key_a)
    r = post(http, None, ask(world), auth=h) if h is not None else post(http, None, ask(world))
    body = assert_error(r, 403, 1001)
    if header == "Bearer Bearer {key}":
        assert "Bearer" in body["error_msg"]


def test_bearer_scheme_is_case_insensitive(world, http):
    assert post(http, None, ask(world), auth=f"bearer {world.key_a}").status_code == 200


def test_unknown_disabled_revoked_expired_keys_are_1002(world, http, committed):
    assert_error(post(http, "okdify_" + "y" * 43, ask(world)), 403, 1002)
    assert_error(post(http, "kbpat_notadifykey", ask(world)), 403, 1002)
    with committed() as s:
        t = world.p.tenant.id
        d_row, disabled = keys.create_key(s, SYSTEM, tenant_id=t, name="d", knowledge_base_ids=[world.kb_a.id])
        e_row, expired = keys.create_key(s, SYSTEM, tenant_id=t, name="e", knowledge_base_ids=[world.kb_a.id])
        r_row, revoked = keys.create_key(s, SYSTEM, tenant_id=t, name="r", knowledge_base_ids=[world.kb_a.id])
        keys.do_disable_key(s, SYSTEM, t, d_row.id)
        keys.do_revoke_key(s, SYSTEM, t, r_row.id)
        s.execute(
            text("UPDATE dify_api_keys SET expires_at = now() - interval '1 second' WHERE id = :id"), {"id": e_row.id}
        )
        s.commit()
    for key, word in ((disabled, "disabled"), (expired, "expired"), (revoked, "revoked")):
        body = assert_error(post(http, key, ask(world)), 403, 1002)
        assert word in body["error_msg"]
        assert_error(post(http, key, PROBE), 403, 1002)  # the probe too


def test_unmapped_disabled_and_other_tenant_knowledge_ids_are_2001(world, http):
    for kid in (uniq("nope-"), world.kid_disabled, world.kid_other, str(world.kb_a.id)):
        assert_error(post(http, world.key_a, ask(world, knowledge_id=kid)), 404, 2001)


def test_key_for_kb_a_asking_for_kb_b_is_1002(world, http):
    assert_error(post(http, world.key_a, ask(world, knowledge_id=world.kid_b)), 403, 1002)
    assert_error(post(http, world.key_none, ask(world)), 403, 1002)  # no knowledge base: sees nothing
    records = assert_dify_shape(post(http, world.key_b, ask(world, knowledge_id=world.kid_b)), world.base_url)
    assert doc_ids(records) == {str(world.b1.id)}  # and B's key sees only B


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"knowledge_id": 5}',
        b'{"knowledge_id": "x", "query": "q", "retrieval_setting": {"top_k": "many"}}',
        b'{"knowledge_id": "x", "query": "q", "retrieval_setting": {"top_k": 0}}',
        b'{"knowledge_id": "x", "query": "q", "metadata_condition": "lang=zh"}',
        b'{"knowledge_id": "x", "query": "q", "metadata_condition": {"conditions": '
        b'[{"name": "a", "comparison_operator": "like", "value": "x"}]}}',
        b"\xff\xfe",
        # past the 4,300 digits Python's parser converts: a ValueError that is not a syntax error
        pytest.param(
            b'{"knowledge_id": "x", "query": "q", "retrieval_setting": {"top_k": ' + b"9" * 5000 + b"}}",
            id="number-of-5000-digits",
        ),
    ],
)
def test_malformed_body_is_2002_after_auth(world, http, raw):
    assert_error(post(http, world.key_a, None, raw=raw), 400, 2002)
    assert_error(post(http, "okdify_" + "z" * 43, None, raw=raw), 403, 1002)  # strangers learn nothing
    assert_error(post(http, None, None, raw=raw), 403, 1001)


# --- retrieval -----------------------------------------------------------------------------------


def test_records_validate_field_by_field(world, http):
    records = assert_dify_shape(post(http, world.key_a, ask(world)), world.base_url)
    assert doc_ids(records) == world.visible
    by_doc = {r["metadata"]["document_id"]: r for r in records}
    r1 = by_doc[str(world.d1.id)]
    assert r1["title"] == "MCP 接入说明" and world.word in r1["content"]
    m = r1["metadata"]
    assert m["knowledge_base_id"] == str(world.kb_a.id) and m["knowledge_id"] == world.kid_a
    assert m["lang"] == "zh" and m["level"] == 3 and m["team"] == "ml"  # the document's own metadata
    assert sorted(m["tags"]) == ["guide", "mcp"] and m["heading_path"] == [f"接入 {world.word}"]
    assert by_doc[str(world.d3.id)]["metadata"]["tags"] == []


def test_unicode_query_sent_as_escapes(world, http):
    body = ask(world, query=world.zh)
    raw = json.dumps(body, ensure_ascii=True).encode()
    assert b"\\u" in raw and "知".encode() not in raw
    records = assert_dify_shape(post(http, world.key_a, None, raw=raw), world.base_url)
    assert records and records[0]["metadata"]["document_id"] == str(world.d1.id)
    assert "知识库" in records[0]["content"]


def test_draft_and_private_documents_are_never_returned(world, http):
    # both are indexed and findable by their owner through the same retrieval service...
    with Session(world.engine) as s:
        mine = {
            r.document_id
            for r in search(
                world.ctx,
                s,
                Principal.user(world.p.owner, world.p.tenant.id),
                world.word,
                knowledge_base_ids=[world.kb_a.id],
                top_k=20,
            )
        }
    assert {str(world.draft.id), str(world.private.id)} <= mine
    # ...but never by a Dify key, whatever the query, condition or top_k
    for body in (
        ask(world),
        ask(world, query=f"{world.word} draft private salary"),
        ask(
            world,
            metadata_condition={
                "logical_operator": "and",
                "conditions": [{"name": "lang", "comparison_operator": "is", "value": "zh"}],
            },
        ),
        ask(world, retrieval_setting={"top_k": 100, "score_threshold": 0.0}),
    ):
        for key in (world.key_a, world.key_zh):
            got = doc_ids(assert_dify_shape(post(http, key, body), world.base_url))
            assert not got & {str(world.draft.id), str(world.private.id), str(world.b1.id)}


def test_top_k_is_capped_by_the_key_and_null_means_the_limit(world, http):
    for setting in ({"top_k": 10, "score_threshold": 0.0}, {"top_k": None, "score_threshold": 0.0}, None):
        body = ask(world, retrieval_setting=setting)
        if setting is None:
            del body["retrieval_setting"]
        assert len(assert_dify_shape(post(http, world.key_small, body), world.base_url)) == 2
    assert (
        len(assert_dify_shape(post(http, world.key_a, ask(world, retrieval_setting={"top_k": 1})), world.base_url)) == 1
    )
    assert (
        len(assert_dify_shape(post(http, world.key_a, ask(world, retrieval_setting={"top_k": None})), world.base_url))
        == 3
    )  # key limit 10, three visible documents


def test_score_threshold(world, http):
    everything = assert_dify_shape(post(http, world.key_a, ask(world)), world.base_url)
    scores = sorted(r["score"] for r in everything)
    assert len(set(scores)) > 1 or len(scores) == 1
    # the cut lies halfway across the widest gap between two scores, not on a score: a score
    # that moves by a rounding error between two searches stays on its side of it
    levels = sorted(set(scores))
    gaps = [(hi - lo, (lo + hi) / 2) for lo, hi in zip(levels, levels[1:], strict=False)]
    cut = max(gaps)[1] if gaps else scores[0]
    above = assert_dify_shape(
        post(http, world.key_a, ask(world, retrieval_setting={"top_k": 10, "score_threshold": cut})), world.base_url
    )
    assert above and all(r["score"] >= cut for r in above)
    assert len(above) == sum(1 for s in scores if s >= cut)
    none = post(http, world.key_a, ask(world, retrieval_setting={"top_k": 10, "score_threshold": 1.01}))
    assert assert_dify_shape(none, world.base_url) == []
    # 0.0 means disabled: same as no threshold at all
    zero = assert_dify_shape(post(http, world.key_a, ask(world, retrieval_setting={"top_k": 10})), world.base_url)
    assert doc_ids(zero) == doc_ids(everything)


def test_empty_query_returns_no_records(world, http):
    assert post(http, world.key_a, ask(world, query="   ")).json() == {"records": []}


def test_metadata_condition_null_missing_and_empty_are_no_filter(world, http):
    base = ask(world)
    missing = dict(base)
    del missing["metadata_condition"]
    for body in (base, missing, ask(world, metadata_condition={"logical_operator": "and", "conditions": []})):
        assert doc_ids(assert_dify_shape(post(http, world.key_a, body), world.base_url)) == world.visible


D1, D2, D3 = "d1", "d2", "d3"
OPERATOR_CASES = [
    ("lang", "contains", "z", {D1}),
    ("lang", "not contains", "z", {D2, D3}),
    ("lang", "start with", "e", {D2}),
    ("team", "end with", "l", {D1}),
    ("lang", "is", "zh", {D1}),
    ("lang", "is not", "zh", {D2, D3}),
    ("lang", "in", ["zh", "en"], {D1, D2}),
    ("lang", "not in", ["zh"], {D2, D3}),
    ("lang", "empty", None, {D3}),
    ("lang", "not empty", None, {D1, D2}),
    ("level", "=", 3, {D1}),
    ("level", "≠", 3, {D2, D3}),
    ("level", "!=", 3, {D2, D3}),
    ("level", ">", 3, {D2}),
    ("level", "<", 7, {D1}),
    ("level", "≥", 3, {D1, D2}),
    ("level", ">=", 4, {D2}),
    ("level", "≤", 3, {D1}),
    ("level", "<=", 7, {D1, D2}),
    ("published", "before", "2024-12-31", {D1}),
    ("published", "after", 1704067200, {D1, D2}),
    ("tags", "contains", "mcp", {D1}),
    ("tags", "is", "dify", {D2}),
    ("tags", "in", ["guide", "dify"], {D1, D2}),
    ("tags", "not contains", "mcp", {D2, D3}),
    ("tags", "empty", None, {D3}),
    ("document_name", "contains", "Setup", set()),
    ("document_name", "contains", "setup", {D2}),
    ("title", "start with", "Dify", {D2}),
]


@pytest.mark.parametrize("name,op,value,expected", OPERATOR_CASES, ids=[f"{c[0]} {c[1]}" for c in OPERATOR_CASES])
def test_each_operator_over_http(world, http, name, op, value, expected):
    ids = {D1: str(world.d1.id), D2: str(world.d2.id), D3: str(world.d3.id)}
    cond = {"logical_operator": "and", "conditions": [{"name": name, "comparison_operator": op, "value": value}]}
    got = doc_ids(assert_dify_shape(post(http, world.key_a, ask(world, metadata_condition=cond)), world.base_url))
    assert got == {ids[e] for e in expected}


def test_and_or_and_the_key_filter_combine(world, http):
    ids = {str(world.d1.id): D1, str(world.d2.id): D2, str(world.d3.id): D3}

    def run(key, cond):
        return {
            ids[d]
            for d in doc_ids(assert_dify_shape(post(http, key, ask(world, metadata_condition=cond)), world.base_url))
        }

    c_zh = {"name": "lang", "comparison_operator": "is", "value": "zh"}
    c_hi = {"name": "level", "comparison_operator": ">", "value": 5}
    assert run(world.key_a, {"logical_operator": "or", "conditions": [c_zh, c_hi]}) == {D1, D2}
    assert run(world.key_a, {"logical_operator": "and", "conditions": [c_zh, c_hi]}) == set()
    assert run(world.key_zh, None) == {D1}  # the key's own filter applies alone
    assert run(world.key_zh, {"conditions": [c_hi]}) == set()  # and is AND-ed with the request's
    assert run(world.key_zh, {"logical_operator": "or", "conditions": [c_hi, c_zh]}) == {D1}


def test_tags_condition_and_key_filter_with_more_than_50_tags_still_retrieve(world, http, committed):
    """A condition may list 1000 values; one of more than 50 tags (more than the search's own
    tag filter takes) is still evaluated exactly, and a key whose filter lists that many works
    for every retrieval, not just the registration probe."""
    many = [f"t{i}" for i in range(60)]
    d1, d2 = str(world.d1.id), str(world.d2.id)
    for op in ("in", "is"):
        cond = {"conditions": [{"name": "tags", "comparison_operator": op, "value": [*many, "mcp"]}]}
        records = assert_dify_shape(post(http, world.key_a, ask(world, metadata_condition=cond)), world.base_url)
        assert doc_ids(records) == {d1}, op
    with committed() as s:
        _, key = keys.create_key(
            s,
            SYSTEM,
            tenant_id=world.p.tenant.id,
            name="many tags",
            knowledge_base_ids=[world.kb_a.id],
            metadata_filters={"tags": [*many, "dify"]},
        )
        s.commit()
    assert post(http, key, PROBE).json() == {"records": []}
    assert doc_ids(assert_dify_shape(post(http, key, ask(world)), world.base_url)) == {d2}
    cond = {"conditions": [{"name": "tags", "comparison_operator": "in", "value": [*many, "mcp", "dify"]}]}
    assert doc_ids(assert_dify_shape(post(http, key, ask(world, metadata_condition=cond)), world.base_url)) == {d2}


def _tags_is(value: str) -> dict[str, Any]:
    return {"conditions": [{"name": "tags", "comparison_operator": "is", "value": value}]}


@pytest.mark.parametrize(
    "fields",
    [
        {"knowledge_id": "kb\x00a"},
        {"knowledge_id": "\ud83d"},
        {"metadata_condition": _tags_is("mc\x00p")},
        {"metadata_condition": _tags_is("\ud83d")},
        {
            "metadata_condition": {
                "conditions": [{"name": "lang", "comparison_operator": "in", "value": ["zh", "\x00"]}]
            }
        },
        {"metadata_condition": {"conditions": [{"name": "la\x00ng", "comparison_operator": "empty"}]}},
    ],
    ids=["nul-knowledge-id", "surrogate-knowledge-id", "nul-tag", "surrogate-tag", "nul-in-value", "nul-name"],
)
def test_nul_or_lone_surrogate_is_2002_after_the_key_check(world, http, fields):
    """PostgreSQL takes neither a NUL nor a lone surrogate: sent in knowledge_id or a condition
    (as JSON escapes, \\u0000 and \\ud83d) they are a bad request (2002, which Dify does not
    retry), and a stranger still meets the key check first (1002)."""
    body = ask(world, **fields)
    assert_error(post(http, world.key_a, body), 400, 2002)
    assert_error(post(http, "okdify_" + "n" * 43, body), 403, 1002)


# --- lifecycle, audit, rate limit ----------------------------------------------------------------


def test_revocation_disable_and_rotation_take_effect_on_the_next_call(world, http, committed):
    with committed() as s:
        row, key = keys.create_key(
            s, SYSTEM, tenant_id=world.p.tenant.id, name="life", knowledge_base_ids=[world.kb_a.id]
        )
        s.commit()
    assert post(http, key, ask(world)).status_code == 200
    with committed() as s:
        keys.do_disable_key(s, SYSTEM, world.p.tenant.id, row.id)
        s.commit()
    assert_error(post(http, key, ask(world)), 403, 1002)
    with committed() as s:
        keys.do_enable_key(s, SYSTEM, world.p.tenant.id, row.id)
        _, new = keys.do_rotate_key(s, SYSTEM, world.p.tenant.id, row.id)
        s.commit()
    assert_error(post(http, key, ask(world)), 403, 1002)
    assert post(http, new, ask(world)).status_code == 200
    with committed() as s:
        keys.do_revoke_key(s, SYSTEM, world.p.tenant.id, row.id)
        s.commit()
    assert_error(post(http, new, ask(world)), 403, 1002)


def test_mapping_and_scope_changes_take_effect_on_the_next_call(world, http, committed):
    kid = uniq("moving-")
    with committed() as s:
        row, key = keys.create_key(
            s, SYSTEM, tenant_id=world.p.tenant.id, name="scope", knowledge_base_ids=[world.kb_a.id]
        )
        mappings.do_map(s, SYSTEM, tenant_id=world.p.tenant.id, knowledge_id=kid, kb=world.kb_a.id)
        s.commit()
    assert doc_ids(assert_dify_shape(post(http, key, ask(world, knowledge_id=kid)), world.base_url)) == world.visible
    with committed() as s:
        mappings.do_map(s, SYSTEM, tenant_id=world.p.tenant.id, knowledge_id=kid, kb=world.kb_b.id)
        s.commit()
    assert_error(post(http, key, ask(world, knowledge_id=kid)), 403, 1002)  # remapped to a KB the key lacks
    with committed() as s:
        keys.do_update_key(s, SYSTEM, world.p.tenant.id, row.id, knowledge_base_ids=[world.kb_b.id])
        s.commit()
    assert doc_ids(assert_dify_shape(post(http, key, ask(world, knowledge_id=kid)), world.base_url)) == {
        str(world.b1.id)
    }
    with committed() as s:
        mappings.do_disable_mapping(s, SYSTEM, world.p.tenant.id, kid)
        s.commit()
    assert_error(post(http, key, ask(world, knowledge_id=kid)), 404, 2001)


def test_every_identified_call_is_audited(world, http, committed):
    with committed() as s:
        row, key = keys.create_key(
            s, SYSTEM, tenant_id=world.p.tenant.id, name="audited", knowledge_base_ids=[world.kb_a.id]
        )
        s.commit()
    ua = f"Dify-audit-{uuid.uuid4().hex[:6]}"
    records = assert_dify_shape(post(http, key, ask(world), ua=ua), world.base_url)
    post(http, key, PROBE, ua=ua)
    post(http, key, ask(world, knowledge_id=world.kid_b), ua=ua)
    post(http, key, ask(world, knowledge_id=uniq("nope-")), ua=ua)
    with committed() as s:
        rows = (
            s.execute(
                text(
                    "SELECT actor_type, object_id, metadata, ip, user_agent, tenant_id FROM audit_logs "
                    "WHERE action = 'dify.retrieval' AND metadata->>'dify_key_id' = :k ORDER BY created_at"
                ),
                {"k": str(row.id)},
            )
            .mappings()
            .all()
        )
        last_used = s.execute(
            text("SELECT last_used_at FROM dify_api_keys WHERE id = :id"), {"id": row.id}
        ).scalar_one()
    assert len(rows) == 4
    ok, probe, denied, missing = rows
    assert all(
        r["actor_type"] == "api_key"
        and r["ip"] == "127.0.0.1"
        and r["user_agent"] == ua
        and r["tenant_id"] == world.p.tenant.id
        for r in rows
    )
    assert ok["object_id"] == world.kb_a.id and ok["metadata"]["knowledge_id"] == world.kid_a
    assert ok["metadata"]["document_ids"] == list(dict.fromkeys(r["metadata"]["document_id"] for r in records))
    assert ok["metadata"]["status"] == 200 and ok["metadata"]["key_name"] == "audited"
    assert world.word not in json.dumps(ok["metadata"])  # the query text is not stored
    assert probe["metadata"]["probe"] is True and probe["metadata"]["knowledge_id"] == ""
    assert denied["metadata"]["error_code"] == 1002 and denied["metadata"]["status"] == 403
    assert denied["metadata"]["error"] == "DIFY_KEY_REJECTED" and denied["object_id"] == world.kb_b.id
    assert missing["metadata"]["error_code"] == 2001 and missing["metadata"]["document_ids"] == []
    assert missing["metadata"]["error"] == "DIFY_KNOWLEDGE_NOT_FOUND" and missing["object_id"] is None
    assert last_used is not None and datetime.now(UTC) - last_used < timedelta(minutes=5)


def test_rate_limit_is_per_key_with_retry_after(world, http, committed, monkeypatch, app_ctx):
    if time.time() % 60 > 50:  # keep the burst inside one fixed window
        time.sleep(61 - time.time() % 60)
    # the live server reads OPENKB_DIFY_RATE_LIMIT_PER_MINUTE from its settings on every call
    monkeypatch.setattr(app_ctx.settings, "openkb_dify_rate_limit_per_minute", 3)
    with committed() as s:
        _, hot = keys.create_key(s, SYSTEM, tenant_id=world.p.tenant.id, name="hot", knowledge_base_ids=[world.kb_a.id])
        _, calm = keys.create_key(
            s, SYSTEM, tenant_id=world.p.tenant.id, name="calm", knowledge_base_ids=[world.kb_a.id]
        )
        s.commit()
    assert [post(http, hot, PROBE).status_code for _ in range(3)] == [200, 200, 200]
    r = post(http, hot, PROBE)
    assert_error(r, 429, 3001)
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert post(http, calm, PROBE).status_code == 200  # another key is unaffected


def test_admin_routes(world, http, live_server, committed):
    from tests.api.helpers import ALL_SCOPES, bearer_client, make_user_with_pat

    # a tenant_admin who reads the knowledge bases (workspace admin): a key may list only those
    # its administrator can read (docs/dify.md#keys)
    _, admin_token = make_user_with_pat(committed, world.p.tenant, user=world.p.tenant_admin, scopes=ALL_SCOPES)
    _, member_token = make_user_with_pat(committed, world.p.tenant, scopes=ALL_SCOPES, role="member")
    with bearer_client(live_server, admin_token) as admin, bearer_client(live_server, member_token) as member:
        assert member.get("/api/admin/dify/keys").status_code == 403
        created = admin.post(
            "/api/admin/dify/keys",
            json={"name": "via api", "knowledge_base_ids": [str(world.kb_a.id)], "top_k_limit": 5},
        )
        assert created.status_code == 201, created.text
        k = created.json()
        assert k["key"].startswith("okdify_") and k["top_k_limit"] == 5
        kid = uniq("api-")
        m = admin.post("/api/admin/dify/mappings", json={"knowledge_id": kid, "knowledge_base_id": str(world.kb_a.id)})
        assert m.status_code == 200 and m.json()["created"]
        assert post(http, k["key"], ask(world, knowledge_id=kid)).status_code == 200
        listed = admin.get("/api/admin/dify/keys").json()["items"]
        assert k["id"] in [i["id"] for i in listed] and all("key" not in i for i in listed)
        assert admin.get(f"/api/admin/dify/keys/{k['id']}").json()["last_used_at"] is not None
        patched = admin.patch(f"/api/admin/dify/keys/{k['id']}", json={"top_k_limit": 1})
        assert patched.status_code == 200 and patched.json()["top_k_limit"] == 1
        assert len(post(http, k["key"], ask(world, knowledge_id=kid)).json()["records"]) == 1
        rot = admin.post(f"/api/admin/dify/keys/{k['id']}/rotate").json()
        assert_error(post(http, k["key"], ask(world, knowledge_id=kid)), 403, 1002)
        assert admin.post(f"/api/admin/dify/keys/{k['id']}/revoke").json()["status"] == "revoked"
        assert_error(post(http, rot["key"], ask(world, knowledge_id=kid)), 403, 1002)
        assert admin.post(f"/api/admin/dify/keys/{k['id']}/enable").status_code == 409
        assert admin.post(f"/api/admin/dify/mappings/{kid}/disable").json()["status"] == "disabled"
        assert kid in [i["knowledge_id"] for i in admin.get("/api/admin/dify/mappings").json()["items"]]
        # another tenant's knowledge base, key or mapping: 404, like a missing one
        other = admin.post("/api/admin/dify/keys", json={"name": "x", "knowledge_base_ids": [str(world.other_kb.id)]})
        assert other.status_code == 404 and other.json()["error"] == "NOT_FOUND"
        assert admin.post(f"/api/admin/dify/mappings/{world.kid_other}/disable").status_code == 404
        info = admin.get("/api/admin/dify/info").json()
        assert info["endpoint"] == world.base_url.rstrip("/") and info["retrieval_url"].endswith("/retrieval")
        with committed() as s:
            actions = {
                a
                for (a,) in s.execute(
                    text("SELECT action FROM audit_logs WHERE object_id = :id"), {"id": k["id"]}
                ).all()
            }
        assert {"dify.key.create", "dify.key.update", "dify.key.rotate", "dify.key.revoke"} <= actions


def test_hot_path_is_lean(world, committed, engine, monkeypatch, request):
    """One key+mapping lookup, one rate-limit hit, the retrieval service's statements, one audit
    insert; last_used_at is written at most once a minute."""
    from sqlalchemy import event

    from openkb.indexing import profiles
    from server.routers.dify import _handle

    # the active profile is cached for PROFILE_TTL_S (5 s): an entry left by an earlier test could
    # expire between the two calls below and the counted one read it again (8 statements in CI)
    monkeypatch.setattr(profiles, "PROFILE_TTL_S", 3600.0)
    forget_active_profile()
    request.addfinalizer(forget_active_profile)  # no hour-long entry left for the next tests

    with committed() as s:
        _, key = keys.create_key(
            s, SYSTEM, tenant_id=world.p.tenant.id, name="lean", knowledge_base_ids=[world.kb_a.id]
        )
        s.commit()
    raw = json.dumps(ask(world)).encode()
    seen: list[str] = []

    me_thread = threading.get_ident()  # not a trailing Milvus flush's timer (tests/conftest.py count_queries)

    def before(conn, cursor, statement, *a):  # noqa: ANN001
        if threading.get_ident() == me_thread:
            seen.append(" ".join(statement.split()))

    assert _handle(world.ctx, f"Bearer {key}", raw, "127.0.0.1", "t").status_code == 200  # first: sets last_used_at
    event.listen(engine, "before_cursor_execute", before)
    try:
        resp = _handle(world.ctx, f"Bearer {key}", raw, "127.0.0.1", "t")
    finally:
        event.remove(engine, "before_cursor_execute", before)
    assert resp.status_code == 200 and len(json.loads(resp.body)["records"]) == 3
    mine = [s for s in seen if "dify_api_keys" in s and "documents" not in s]
    assert len(mine) == 1 and mine[0].startswith("SELECT")  # key + mapping in one statement, no UPDATE
    assert sum("rate_limit_buckets" in s for s in seen) == 1
    assert sum(s.startswith("INSERT INTO audit_logs") for s in seen) == 1
    assert len(seen) <= 7, [s[:100] for s in seen]


@pytest.mark.parametrize("path", ["//retrieval", "/retrieval/retrieval"])
def test_endpoint_registered_with_trailing_slash_or_suffix_still_works(world, live_server, path):
    with httpx.Client(timeout=30) as c:  # no base_url: keep the double slash verbatim
        r = c.post(
            live_server + path,
            content=json.dumps(PROBE),
            headers={"Authorization": f"Bearer {world.key_a}", "Content-Type": "application/json"},
        )
        assert r.status_code == 200 and r.json() == {"records": []}
        r = c.post(
            live_server + path,
            content=json.dumps(ask(world)),
            headers={"Authorization": f"Bearer {world.key_a}", "Content-Type": "application/json"},
        )
        assert doc_ids(assert_dify_shape(r, world.base_url)) == world.visible


def test_oversized_body_is_2002(world, http):
    big = json.dumps(ask(world, query="x" * 300_000)).encode()
    assert_error(post(http, world.key_a, None, raw=big), 400, 2002)

    def chunks():  # no Content-Length: the bounded read still stops it
        for i in range(0, len(big), 65536):
            yield big[i : i + 65536]

    r = http.post(
        "/retrieval",
        content=chunks(),
        headers={"Authorization": f"Bearer {world.key_a}", "Content-Type": "application/json"},
    )
    assert_error(r, 400, 2002)


def test_long_query_is_truncated_not_refused(world, http):
    q = (world.word + " ") * 600  # ~8000 characters: over the search's 2000, under the body cap
    records = assert_dify_shape(post(http, world.key_a, ask(world, query=q)), world.base_url)
    assert doc_ids(records) <= world.visible and records
