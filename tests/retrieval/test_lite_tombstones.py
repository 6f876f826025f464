"""Reads of the embedded Milvus Lite share one copy of a collection's tombstones until a flush or
a compaction changes them, instead of copying the whole map for every search and query
(docs/retrieval.md#flushes); deleted rows stay hidden. Real Lite, in this process as its server
runs it (that the server installs it: tests/retrieval/test_lite_vectors.py)."""

from __future__ import annotations

import numpy as np
import pytest

DIM = 8


@pytest.fixture()
def lite(tmp_path):
    from milvus_lite.db import MilvusLite
    from milvus_lite.schema.types import CollectionSchema, DataType, FieldSchema

    from openkb.runtime import lite_tombstones

    assert lite_tombstones.install()
    db = MilvusLite(str(tmp_path / "lite"))
    schema = CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=64),
            FieldSchema("tenant_id", DataType.VARCHAR, max_length=64),
            FieldSchema("dense_vector", DataType.FLOAT_VECTOR, dim=DIM),
        ]
    )
    col = db.create_collection("chunks", schema)
    col.create_index("dense_vector", {"index_type": "HNSW", "metric_type": "COSINE"})
    col.load()
    yield col
    db.close()


def _rows(ids: list[str]) -> list[dict]:
    rng = np.random.default_rng(7)
    return [
        {"id": i, "tenant_id": "t", "dense_vector": rng.standard_normal(DIM).astype("float32").tolist()} for i in ids
    ]


def _ids(col) -> set[str]:
    return {r["id"] for r in col.query(expr='tenant_id == "t"', output_fields=["id"])}


def _found(col) -> set[str]:
    q = np.ones(DIM, dtype="float32").tolist()
    hits = col.search([q], top_k=50, expr='tenant_id == "t"', anns_field="dense_vector", output_fields=["id"])
    return {h["id"] for h in hits[0]}


def test_reads_share_one_copy_until_the_tombstones_change(lite):
    col = lite
    ids = [f"r{i}" for i in range(20)]
    col.insert(_rows(ids))
    col.flush()
    col.delete(ids[:5])
    col.flush()  # the deletions become tombstones in the collection's map
    first = col._delta_index.frozen_copy()
    assert len(first) == 5
    assert _ids(col) == _found(col) == set(ids[5:])
    assert col._delta_index.frozen_copy() is first  # searches and queries took no copy of their own

    col.delete(ids[5:8])
    col.flush()  # a change: the next read copies once, and sees it
    second = col._delta_index.frozen_copy()
    assert second is not first and len(second) == 8 and len(first) == 5
    assert _ids(col) == _found(col) == set(ids[8:])
    assert col._delta_index.frozen_copy() is second

    col._delta_index.gc_below(0)  # compaction's garbage collection is a change too (here it drops none)
    assert col._delta_index.frozen_copy() is not second
    assert _ids(col) == set(ids[8:])
