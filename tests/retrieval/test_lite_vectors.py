"""A partial update on the embedded Milvus Lite keeps a row's stored dense vector when its text does
not change (docs/retrieval.md#partial-updates): rewriting who may read a chunk does not send it
through the embedder again. Real Lite (in this process, as its server runs it) and the real
embedder; the embedder's provider is only counted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DIM = 512


@pytest.fixture()
def lite(tmp_path, milvus_services, monkeypatch):
    """A Lite collection with OpenKB's TEXT_EMBEDDING (the local embedder) and BM25, and the list
    of text batches the embedder was sent."""
    from milvus_lite.db import MilvusLite
    from milvus_lite.embedding.openai_provider import OpenAIProvider
    from milvus_lite.schema.types import CollectionSchema, DataType, FieldSchema, Function, FunctionType

    from openkb.config import get_settings
    from openkb.runtime import lite_vectors

    assert lite_vectors.install()
    sent: list[list[str]] = []
    real = OpenAIProvider.embed_documents

    def counted(self, texts):
        sent.append(list(texts))
        return real(self, texts)

    monkeypatch.setattr(OpenAIProvider, "embed_documents", counted)
    db = MilvusLite(str(tmp_path / "lite"))
    schema = CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=64),
            FieldSchema("doc_status", DataType.VARCHAR, max_length=32),
            FieldSchema("content_text", DataType.VARCHAR, max_length=65535, enable_analyzer=True),
            FieldSchema("sparse_vector", DataType.SPARSE_FLOAT_VECTOR, is_function_output=True),
            FieldSchema("dense_vector", DataType.FLOAT_VECTOR, dim=DIM, is_function_output=True),
        ],
        functions=[
            Function("bm25", FunctionType.BM25, ["content_text"], ["sparse_vector"]),
            Function(
                "embed",
                FunctionType.TEXT_EMBEDDING,
                ["content_text"],
                ["dense_vector"],
                params={
                    "provider": "openai",
                    "model_name": get_settings().openkb_embedder_model,
                    "api_key": "openkb-local-embedder",
                    "base_url": milvus_services["embedder_url"],
                    "dimensions": DIM,
                },
            ),
        ],
    )
    col = db.create_collection("chunks", schema)
    col.create_index("dense_vector", {"index_type": "HNSW", "metric_type": "COSINE"})
    col.create_index("sparse_vector", {"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "BM25"})
    col.load()
    yield col, sent
    db.close()


def _vectors(col) -> dict[str, np.ndarray]:
    rows = col.query(expr='id in ["a", "b", "c"]', output_fields=["id", "dense_vector", "doc_status"])
    return {r["id"]: (np.asarray(r["dense_vector"], dtype=np.float32), r["doc_status"]) for r in rows}


def test_a_partial_update_that_leaves_the_text_embeds_nothing(lite):
    col, sent = lite
    texts = {"a": "river stone field", "b": "cloud lamp door", "c": "hill tree north"}
    col.insert([{"id": k, "doc_status": "published", "content_text": t} for k, t in texts.items()])
    assert sorted(t for batch in sent for t in batch) == sorted(texts.values())
    before = _vectors(col)
    sent.clear()

    # who may read them changed (the visibility of their knowledge base, a status): scalars only
    col.upsert([{"id": k, "doc_status": "draft"} for k in texts])
    assert sent == []  # nothing embedded again (Lite alone embedded all three)
    col.flush()
    after = _vectors(col)
    for k in texts:
        assert after[k][1] == "draft"
        assert np.array_equal(after[k][0], before[k][0]), k

    # the same text sent again embeds nothing either; a new text is embedded, alone
    col.upsert([{"id": "a", "doc_status": "published", "content_text": texts["a"]}])
    col.upsert([{"id": "b", "content_text": "a new paragraph"}, {"id": "c", "doc_status": "published"}])
    assert sent == [["a new paragraph"]]
    after = _vectors(col)
    assert np.array_equal(after["a"][0], before["a"][0]) and after["a"][1] == "published"
    assert not np.array_equal(after["b"][0], before["b"][0])
    assert np.array_equal(after["c"][0], before["c"][0]) and after["c"][1] == "published"

    # the kept vectors are the ones the text gives: a dense search finds the row by its own text
    q = col._embedding_providers[0][2].embed_query(texts["c"])  # noqa: SLF001
    hits = col.search([q], top_k=1, anns_field="dense_vector", output_fields=["id"])
    assert hits[0][0]["id"] == "c"


def test_the_lite_server_installs_it():
    """``openkb up``'s Lite (``openkb.runtime.lite_server``) keeps vectors on partial updates, and
    shares one copy of the tombstones among reads (``lite_tombstones``): the check runs in a fresh
    interpreter, as the server does."""
    code = (
        "from openkb.runtime import lite_server, lite_tombstones, lite_vectors\n"
        "import milvus_lite.engine.collection as c\n"
        "from milvus_lite.storage.delta_index import DeltaIndex\n"
        "lite_server._install_patches()\n"
        "assert lite_vectors._INSTALLED and c.Collection.upsert.__name__ == '_upsert'\n"
        "assert lite_tombstones._INSTALLED and DeltaIndex.frozen_copy.__name__ == '_frozen_copy'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
