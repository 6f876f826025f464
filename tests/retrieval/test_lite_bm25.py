"""BM25 on the embedded Milvus Lite scores with the whole collection's statistics, not each
segment's (docs/retrieval.md#bm25-statistics): a page saved after an import is found for its own
words, and a chunk's score does not depend on how its collection was cut into segments."""

from __future__ import annotations

import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from pymilvus import MilvusClient
from sqlmodel import Session

from openkb.db import session_scope
from openkb.indexing import milvus as mv
from openkb.indexing import service
from openkb.indexing.lexical import lexical_text
from openkb.indexing.profiles_spec import make_profile
from openkb.permissions import Principal
from openkb.retrieval import forget_active_profile, search
from tests.factories import make_doc, make_kb, make_personas

ROOT = Path(__file__).resolve().parents[2]
FILLER = "north south east west river stone field cloud lamp door hill tree".split()


def _row(text: str, kb: str) -> dict:
    ids = str(uuid.uuid4())
    return mv.chunk_row(
        chunk_id=ids,
        tenant_id=kb,
        workspace_id=kb,
        knowledge_base_id=kb,
        document_id=ids,
        version_id=ids,
        doc_status="published",
        visibility_eff="workspace",
        content_text=text,
    )


def _doc(words: list[str], n: int = 12) -> str:
    """``words`` padded with filler to ``n`` terms: every document the same length."""
    return " ".join(words + FILLER[: n - len(words)])


def _scores(client: MilvusClient, collection: str, query: str) -> dict[str, float]:
    """Every matching row's raw BM25 score, by its text."""
    raw = client.search(
        collection,
        data=[lexical_text(query)],
        anns_field=mv.SPARSE_FIELD,
        limit=50,
        output_fields=["content_text"],
        search_params={"metric_type": "BM25"},
    )[0]
    assert raw, f"no hit for {query!r}"
    return {h["entity"]["content_text"]: abs(h["distance"]) for h in raw}


@pytest.fixture()
def lite(app_ctx):
    client = app_ctx.milvus
    made: list[str] = []

    def collection() -> str:
        spec = make_profile(model_name=None, dim=0)
        spec = replace(spec, collection_name=f"test_bm25_stats_{uuid.uuid4().hex[:10]}")
        mv.ensure_collection(client, spec)
        made.append(spec.collection_name)
        return spec.collection_name

    yield client, collection
    for name in made:
        mv.drop_collection(client, name)


def test_the_pinned_lite_takes_the_collection_wide_scorer():
    """In a fresh process, as the server starts: if a Lite upgrade moved what the scorer needs,
    this fails instead of search quietly going back to per-segment statistics."""
    out = subprocess.run(
        [sys.executable, "-c", "from openkb.runtime import lite_bm25; print(lite_bm25.install())"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True", out.stderr


def test_scores_do_not_depend_on_how_rows_were_cut_into_segments(lite):
    client, new = lite
    kb = str(uuid.uuid4())
    # 40 older rows (one has "alpha" once), then 2 newer rows (one has "alpha" twice), then 1 row
    # still in the memtable: per segment, the older "alpha" won (its segment made the word rare)
    older = [_doc(["alpha"])] + [_doc([f"word{i}"]) for i in range(39)]
    newer = [_doc(["alpha", "alpha"]), _doc(["beta"])]
    pending = [_doc(["alpha", "gamma"])]
    split = new()
    mv.upsert_rows(client, split, [_row(t, kb) for t in older])  # flushed: a segment
    mv.upsert_rows(client, split, [_row(t, kb) for t in newer])  # flushed: another one
    mv.upsert_rows(client, split, [_row(t, kb) for t in pending], flush=False)  # the memtable
    whole = new()
    mv.upsert_rows(client, whole, [_row(t, kb) for t in older + newer + pending])  # one segment

    for query in ("alpha", "alpha gamma", "beta north", "word7 alpha"):
        got, want = _scores(client, split, query), _scores(client, whole, query)
        assert got.keys() == want.keys(), query
        for text, score in want.items():
            assert got[text] == pytest.approx(score, rel=1e-4), (query, text)
    # the newer row with the word twice ranks first; the two with it once score alike, wherever they sit
    scores = _scores(client, split, "alpha")
    assert max(scores, key=scores.get) == _doc(["alpha", "alpha"])
    assert scores[_doc(["alpha"])] == pytest.approx(scores[_doc(["alpha", "gamma"])], rel=1e-4)


def test_a_page_saved_after_an_import_is_found_for_its_own_phrase(app_ctx, engine):
    """The case that showed the problem: pages written in one go (an import), then a page saved on
    its own, whose segment holds only its chunks."""
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    tag = uuid.uuid4().hex[:6]
    with session_scope(engine) as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, visibility="workspace")
        imported = [
            make_doc(s, kb, p.owner, title=f"Notes {tag} {i}", markdown=f"# Notes {i}\n\n{_doc([f'topic{tag}{i}'])}\n")
            for i in range(40)
        ] + [
            make_doc(
                s,
                kb,
                p.owner,
                title=f"Survey {tag} {i}",
                markdown=f"# Survey {i}\n\nA large request for the survey{tag} fields.\n",
            )
            for i in range(4)
        ]
        service.sync_documents(app_ctx, s, [d.id for d in imported])
        client = app_ctx.milvus
        collection = mv.alias_target(client, app_ctx.settings.milvus_active_alias)
        client.flush(collection)
        page = make_doc(
            s,
            kb,
            p.owner,
            title=f"Proxy limits {tag}",
            markdown=f"# Proxy limits\n\nThe proxy{tag} answers 413 Request Entity Too Large past its cap.\n",
        )
        service.sync_documents(app_ctx, s, [page.id])
        client.flush(collection)
        member = Principal.user(p.member.id, p.tenant.id)
        target = str(page.id)
    with Session(engine) as s:
        got = search(app_ctx, s, member, "request entity too large", top_k=5)
    assert got and str(got[0].document_id) == target, [h.title for h in got]


def lite_collection(path: str):
    """An in-process Milvus Lite at ``path`` with one BM25 collection, loaded: ``(db, collection)``."""
    from milvus_lite.db import MilvusLite
    from milvus_lite.schema.types import CollectionSchema, DataType, FieldSchema, Function, FunctionType

    db = MilvusLite(path)
    schema = CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=64),
            FieldSchema("content_text", DataType.VARCHAR, max_length=1024, enable_analyzer=True),
            FieldSchema("sparse_vector", DataType.SPARSE_FLOAT_VECTOR, is_function_output=True),
            FieldSchema("dense_vector", DataType.FLOAT_VECTOR, dim=2),
        ],
        functions=[Function("bm25", FunctionType.BM25, ["content_text"], ["sparse_vector"])],
    )
    col = db.create_collection("chunks", schema)
    col.create_index("sparse_vector", {"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "BM25"})
    col.create_index("dense_vector", {"index_type": "HNSW", "metric_type": "COSINE"})
    col.load()
    return db, col


def test_the_memtable_is_read_as_its_public_snapshot_reads_it(tmp_path):
    """The scorer reads the unflushed rows' sparse vectors from the memtable's batches (cheaper
    than Lite's snapshot of whole rows): the same rows, versions and vectors, after inserts,
    replacements and deletions."""
    from openkb.runtime.lite_bm25 import _memtable_vectors

    db, col = lite_collection(str(tmp_path / "lite"))
    try:
        col.insert([{"id": f"r{i}", "content_text": _doc([f"w{i}"]), "dense_vector": [1.0, 0.0]} for i in range(6)])
        col.flush()
        col.insert([{"id": f"m{i}", "content_text": _doc([f"m{i}"]), "dense_vector": [0.0, 1.0]} for i in range(5)])
        col.upsert([{"id": "m1", "content_text": _doc(["changed", "m1"]), "dense_vector": [0.0, 1.0]}])
        col.upsert([{"id": "r2", "content_text": _doc(["moved", "r2"]), "dense_vector": [0.0, 1.0]}])
        col.delete(["m3"])
        fast = sorted(_memtable_vectors(col._memtable, "sparse_vector"))
        assert all(
            v is None
            for _, _, v in _memtable_vectors(col._memtable, "sparse_vector", {(pk, seq) for pk, seq, _ in fast})
        )
        public = sorted((pk, seq, rec["sparse_vector"]) for pk, seq, rec in col._memtable.active_record_snapshots())
        assert fast == public
        assert {pk for pk, _, _ in fast} == {"m0", "m1", "m2", "m4", "r2"}
    finally:
        db.close()


_FAILING_STATS = """
import sys
sys.path.insert(0, sys.argv[2])
from openkb.runtime import lite_bm25
from tests.retrieval.test_lite_bm25 import lite_collection

told = []
lite_bm25.reporter = lambda how, reason: told.append((how, reason))
assert lite_bm25.install()
gather = lite_bm25.collect
def broken(*args, **kwargs):
    raise RuntimeError("statistics broke")
lite_bm25.collect = broken
db, col = lite_collection(sys.argv[1])
col.insert([{"id": "a", "content_text": "alpha beta", "dense_vector": [1.0, 0.0]}])
col.flush()
def search():
    hits = col.search(["alpha"], top_k=5, anns_field="sparse_vector", output_fields=["id"])
    print([h["id"] for h in hits[0]])
for _ in range(3):
    search()
lite_bm25.collect = gather  # the fault passes
search()
search()
db.close()
print(told)
"""


def test_a_search_whose_statistics_fail_is_answered_per_segment_and_logged_once(tmp_path):
    """Each search is answered while gathering fails; the failure is logged and reported once
    (doctor and /readyz show it), and so is the recovery."""
    out = subprocess.run(
        [sys.executable, "-c", _FAILING_STATS, str(tmp_path / "lite"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().split("\n")
    assert lines[:5] == ["['a']"] * 5
    assert out.stderr.count("BM25 statistics could not be gathered") == 1, out.stderr
    assert out.stderr.count("statistics broke") == 1
    assert out.stderr.count("BM25 statistics are gathered again") == 1, out.stderr
    told = eval(lines[5])  # noqa: S307 - the list of tuples the script printed
    assert told == [
        ("collection-wide", ""),
        ("per-segment", "statistics could not be gathered: RuntimeError: statistics broke"),
        ("collection-wide", ""),
    ]


def test_doctor_and_readyz_say_how_the_embedded_lite_scores_bm25(app_ctx, tmp_path):
    """What the Lite server that ``openkb up`` started recorded (run/milvus-bm25.json) is part of
    the Milvus check: said when collection-wide, with a fix when per segment; a record left by a
    process that is gone says nothing."""
    from openkb.health import check_milvus
    from openkb.runtime.home import Home
    from openkb.runtime.lite_server import BM25_RECORD, _recorder

    settings = app_ctx.settings.model_copy(update={"openkb_home": tmp_path, "milvus_uri": None})
    ctx = replace(app_ctx, settings=settings)
    record = Home(tmp_path).ensure().record_path(BM25_RECORD)
    assert "BM25" not in check_milvus(ctx).detail  # no record: nothing said

    _recorder(Home(tmp_path))("collection-wide", "")
    check = check_milvus(ctx)
    assert check.ok and "BM25 scored with the whole collection's statistics" in check.detail
    assert check.fix == ""

    _recorder(Home(tmp_path))("per-segment", "this Milvus Lite is not the one OpenKB knows (it has no X._y)")
    check = check_milvus(ctx)
    assert check.ok  # search works; only the ranking of recent pages suffers
    assert "BM25 scored per segment (this Milvus Lite is not the one OpenKB knows (it has no X._y))" in check.detail
    assert "milvus-lite version OpenKB pins" in check.fix
    _recorder(Home(tmp_path))("per-segment", "statistics could not be gathered: RuntimeError: boom")
    check = check_milvus(ctx)
    assert "BM25 scored per segment (statistics could not be gathered: RuntimeError: boom)" in check.detail
    assert "logs/milvus.log" in check.fix and "pins" not in check.fix

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    data = record.read_text().replace(f'"pid": {__import__("os").getpid()}', f'"pid": {int(gone.stdout)}')
    record.write_text(data)
    assert "BM25" not in check_milvus(ctx).detail
