"""Milvus 2.6 profile variants, built into the exact CreateCollection request (protobuf) a 2.6
server would receive, and the RERANK function a 2.6 search would send. No 2.6 server can run
here (docs/deployment.md#milvus-26): these tests pin what OpenKB sends; what the server does
with it is not checked."""

from __future__ import annotations

import json

import pytest
from pymilvus import DataType
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import schema_pb2

from openkb.errors import ValidationError
from openkb.indexing import milvus as mv
from openkb.indexing.profiles_spec import SERVER_ANALYZER, ProfileSpec, RerankSpec, make_profile


def request_schema(spec: ProfileSpec) -> schema_pb2.CollectionSchema:
    req = Prepare.create_collection_request(spec.collection_name, mv.collection_schema(spec))
    schema = schema_pb2.CollectionSchema()
    schema.ParseFromString(req.schema)
    return schema


def functions(schema: schema_pb2.CollectionSchema) -> dict[str, dict[str, str]]:
    return {f.name: {p.key: p.value for p in f.params} for f in schema.functions}


def analyzer(schema: schema_pb2.CollectionSchema) -> str:
    fields = {f.name: {p.key: p.value for p in f.type_params} for f in schema.fields}
    analyzed = [v for v in fields.values() if v.get("enable_analyzer") == "true"]
    assert len(analyzed) == 1
    return analyzed[0].get("analyzer_params") or analyzed[0]["multi_analyzer_params"]


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ({"type": "chinese"}, '{"type":"chinese"}'),  # one analyzer for every row, as profiles before
        ({"type": "english"}, '{"type":"english"}'),
    ],
)
def test_server_single_analyzers(given, want):
    spec = make_profile(model_name=None, dim=0, backend="server", analyzer=given)
    assert spec.backend == "server" and not spec.multi_analyzer
    schema = request_schema(spec)
    assert analyzer(schema) == want
    assert "language" not in [f.name for f in schema.fields]
    assert mv.bm25_search_params(spec, "how to deploy") == {"metric_type": "BM25"}
    assert list(functions(schema)) == [mv.BM25_FUNCTION]  # BM25 only: no dense field, no embedding


def test_server_default_analyzes_each_row_in_its_language():
    """The 2.6 default: Milvus' multi-language analyzers, ``english`` (stemming) or ``chinese``
    (jieba) chosen by the row's ``language`` field, which OpenKB fills; the query names its own."""
    spec = make_profile(model_name=None, dim=0, backend="server")
    schema = request_schema(spec)
    params = json.loads(analyzer(schema))
    assert params["by_field"] == "language"
    assert params["analyzers"]["english"] == {"type": "english"}
    assert params["analyzers"]["chinese"] == params["analyzers"]["default"] == {"type": "chinese"}
    language = next(f for f in schema.fields if f.name == "language")
    assert language.data_type == DataType.VARCHAR
    assert mv.bm25_search_params(spec, "studies of deployment") == {"metric_type": "BM25", "analyzer_name": "english"}
    assert mv.bm25_search_params(spec, "如何部署 Milvus") == {"metric_type": "BM25", "analyzer_name": "chinese"}
    rows = [{"content_text": "Deploying Milvus on two nodes"}, {"content_text": "在两台机器上部署 Milvus 2.6"}]
    derived = [mv._derive(dict(r), frozenset({"language"})) for r in rows]
    assert [r["language"] for r in derived] == ["english", "chinese"]
    assert "lexical_text" not in derived[0]


@pytest.mark.parametrize(
    ("analyzer", "backend", "message"),
    [
        ({"analyzers": {"english": {}, "chinese": {}, "default": {}}, "by_field": "lang"}, "server", "by_field"),
        ({"analyzers": {"english": {}, "default": {}}, "by_field": "language"}, "server", "'chinese'"),
        (SERVER_ANALYZER, "lite", "2.6 server"),
    ],
)
def test_multi_analyzer_profiles_that_would_misread_rows_are_refused(analyzer, backend, message):
    with pytest.raises(ValidationError, match=message):
        make_profile(model_name=None, dim=0, backend=backend, analyzer=analyzer)


def test_textembedding_through_tei_sends_endpoint_not_base_url():
    spec = make_profile(
        model_name="Qwen/Qwen3-Embedding-0.6B", dim=1024, provider="TEI", base_url="http://tei:80", backend="server"
    )
    schema = request_schema(spec)
    assert functions(schema)[mv.EMBED_FUNCTION] == {"provider": "TEI", "endpoint": "http://tei:80"}
    dense = next(f for f in schema.fields if f.name == mv.DENSE_FIELD)
    assert {p.key: p.value for p in dense.type_params}["dim"] == "1024"
    assert spec.collection_name == "openkb_chunks_qwen_qwen3_embedding_0_6b_1024_v1"


def test_textembedding_through_an_openai_compatible_service_keeps_base_url():
    spec = make_profile(
        model_name="Qwen/Qwen3-Embedding-0.6B",
        dim=1024,
        provider="openai",
        base_url="http://vllm:8000/v1",
        backend="server",
    )
    params = functions(request_schema(spec))[mv.EMBED_FUNCTION]
    assert params == {
        "provider": "openai",
        "model_name": "Qwen/Qwen3-Embedding-0.6B",
        "dimensions": "1024",
        "base_url": "http://vllm:8000/v1",
    }


@pytest.mark.parametrize(("provider", "key"), [("tei", "endpoint"), ("vllm", "endpoint"), ("cohere", "base_url")])
def test_rerank_model_variants(provider, key):
    spec = make_profile(
        model_name=None,
        dim=0,
        backend="server",
        rerank=RerankSpec(provider=provider, endpoint="http://reranker:80", model_name="bge-reranker-v2-m3"),
    )
    fn = mv._rerank_function(spec, "部署 milvus").to_dict()
    assert fn["type"].name == "RERANK" and fn["input_field_names"] == ["content_text"]
    assert fn["params"] == {
        "reranker": "model",
        "provider": provider,
        "queries": ["部署 milvus"],
        key: "http://reranker:80",
        "model_name": "bge-reranker-v2-m3",
    }
    assert spec.to_metadata()["rerank"]["provider"] == provider  # what PostgreSQL keeps: no key


def test_provider_credentials_are_refused_in_a_profile():
    with pytest.raises(ValidationError):
        RerankSpec(provider="tei", endpoint="http://reranker:80", extra={"api_key": "sk-123"})
