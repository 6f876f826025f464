"""Retrieval quality: OpenKB's search against a plain BM25 reference on a relevance-judged set.

    python bench/quality.py --set FILE [--profile default|bm25] [--limit-queries N] [--max-docs N]

``FILE`` is one JSON object ``{"name", "docs": {id: {"title", "text"}}, "queries": {id: text},
"qrels": {query_id: {doc_id: grade}}}`` (the development sets are not shipped with OpenKB).

One run, on a fresh embedded PostgreSQL + Milvus Lite (+ the local embedder for the default
profile) under a temporary home:

* every set document becomes a page (``create_document``: dialect check, normalizer, version)
  in one workspace knowledge base, then goes through the real indexing path
  (``openkb.indexing.service.sync_documents``: chunker, chunk rows, Milvus upsert with the
  profile's BM25 and TEXTEMBEDDING functions); the indexing rate (chunks/s) is printed;
* every query goes through ``openkb.retrieval.search`` as a workspace *member* (readable scope,
  Milvus prefilter, PostgreSQL final check), ``top_k`` 30 chunks; a document's rank is its best
  chunk's rank; document-level nDCG@10 and recall@10;
* in the same run, the ranking before issue 14 (Milvus RRF(60) on the same filter, raw: no
  PostgreSQL steps) for a same-run quality reference, and the whole service timed with that old
  ``hybrid_search`` patched in, interleaved with the real one (``p95_vs_before``);
* in the same run, a plain BM25 (``bm25s``, Lucene BM25 k1=1.2 b=0.75) over the same title +
  text: English stemming (PyStemmer) and stop words, jieba for Chinese.

``--profile bm25`` runs without the embedder (the BM25-only default). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_HOME = tempfile.mkdtemp(prefix="openkb-bench-quality-")
os.environ["OPENKB_HOME"] = _HOME
os.environ["OPENKB_ENV"] = "test"
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
for _v in ("DATABASE_URL", "MILVUS_URI", "REDIS_URL", "S3_ENDPOINT", "SMTP_HOST", "OPENKB_EMBEDDER_URL"):
    os.environ.pop(_v, None)

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_WORD = re.compile(r"\w+", re.UNICODE)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else 0.0


def ndcg_at_10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum((2 ** rel.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted((g for g in rel.values() if g > 0), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_10(ranked: list[str], rel: dict[str, int]) -> float:
    want = {d for d, g in rel.items() if g > 0}
    return len(want & set(ranked[:10])) / len(want) if want else 0.0


def is_chinese(texts: list[str]) -> bool:
    sample = "".join(texts[:200])
    return len(_CJK.findall(sample)) > 0.2 * max(1, len(sample))


class BM25Reference:
    """bm25s over the same title + text: stemmed English with stop words, or jieba words."""

    def __init__(self, ids: list[str], texts: list[str], chinese: bool) -> None:
        import bm25s

        self.ids, self.chinese = ids, chinese
        self.stemmer = None
        if not chinese:
            import Stemmer

            self.stemmer = Stemmer.Stemmer("english")
        self.retriever = bm25s.BM25()
        self.retriever.index(self._tok(texts), show_progress=False)

    def _tok(self, texts: list[str]):
        import bm25s

        if self.chinese:
            import jieba

            return [[w.lower() for w in jieba.lcut(t) if _WORD.fullmatch(w)] or ["_"] for t in texts]
        return bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False)

    def search(self, query: str, k: int = 10) -> list[str]:
        if self.chinese:
            vocab = self.retriever.vocab_dict
            toks = [[w for w in self._tok([query])[0] if w in vocab] or [next(iter(vocab))]]
            docs, _ = self.retriever.retrieve(toks, k=min(k, len(self.ids)), show_progress=False)
        else:
            docs, _ = self.retriever.retrieve(self._tok([query]), k=min(k, len(self.ids)), show_progress=False)
        return [self.ids[int(i)] for i in docs[0]]


def load_set(path: Path, max_docs: int | None, limit_queries: int | None):
    data = json.loads(path.read_text(encoding="utf-8"))
    qrels = {q: {d: int(g) for d, g in rel.items()} for q, rel in data["qrels"].items()}
    queries = {q: t for q, t in data["queries"].items() if q in qrels}
    if limit_queries:
        queries = dict(list(queries.items())[:limit_queries])
    judged = {d for q in queries for d in qrels[q]}
    docs = {}
    for d, v in data["docs"].items():
        if max_docs is not None and len(docs) >= max_docs and d not in judged:
            continue
        docs[d] = (v.get("title") or "").strip(), (v.get("text") or "").strip()
    return data.get("name") or path.stem, docs, queries, qrels


def _escape(text: str) -> str:
    """Plain text as Markdown paragraphs: characters the dialect would read as syntax escaped."""
    out = []
    for para in text.split("\n"):
        para = re.sub(r"([\\`*_{}\[\]<>#|~$])", r"\\\1", para.strip())
        para = re.sub(r"^(\d+)\.", r"\1\\.", para)
        para = re.sub(r"^([-+])", r"\\\1", para)
        if para:
            out.append(para)
    return "\n\n".join(out) + "\n"


def freshness(ctx, engine, writer, who, kb_id, n: int) -> dict[str, float]:
    """Save a page with a unique word (committed; its index job goes to a real huey consumer in
    this process, 2 worker threads, idle otherwise), then search for the word as the member
    every 20 ms until the page is the first hit. p50/p95 of save start -> first hit."""
    import uuid

    from sqlmodel import Session

    from openkb.content import documents
    from openkb.jobs import set_queue
    from openkb.retrieval import search
    from workers import tasks
    from workers.consumer import build_consumer
    from workers.queue import HueyQueue, get_huey

    tasks.set_context(ctx)
    consumer = build_consumer(get_huey(), workers=2, periodic=False, check_worker_health=False)
    consumer.start()
    set_queue(HueyQueue())
    times: list[float] = []
    misses = 0
    try:
        for i in range(n):
            word = f"fresh{uuid.uuid4().hex[:10]}"
            t0 = time.perf_counter()
            with Session(engine) as s:
                d, _v = documents.create_document(
                    s,
                    writer,
                    knowledge_base_id=kb_id,
                    title=f"Fresh {i}",
                    markdown=f"# Fresh {i}\n\nThe {word} note, saved just now.\n",
                )
                s.commit()
                doc_id = str(d.id)
            while True:
                with Session(engine) as s:
                    hits = search(ctx, s, who, word, top_k=1)
                if hits and hits[0].document_id == doc_id:
                    times.append(time.perf_counter() - t0)
                    break
                if time.perf_counter() - t0 > 30:
                    misses += 1
                    break
                time.sleep(0.02)
            time.sleep(0.3)  # the queue is idle before the next save
    finally:
        consumer.stop(graceful=True)
    return {
        "fresh_n": n,
        "fresh_misses": misses,
        "fresh_p50_s": round(statistics.median(times), 3) if times else None,
        "fresh_p95_s": round(pct(times, 0.95), 3) if times else None,
    }


def sweep(ctx, engine, who, queries, qrels, doc_of) -> None:
    """Re-run the queries under other fusion constants (the index is reused)."""
    from sqlmodel import Session

    from openkb.indexing import milvus as mv
    from openkb.retrieval import search

    saved = (mv.LEXICAL_WEIGHT, mv.DENSE_WEIGHT, mv.DENSE_FLOOR, mv.DENSE_CEILING, mv.LEXICAL_BASE)
    for wl, floor, ceiling, base in (
        (0.6, 0.3, 0.8, 0.0),
        (0.6, 0.2, 0.7, 0.5),
        (0.5, 0.3, 0.8, 0.5),
        (0.7, 0.3, 0.8, 0.5),
        (0.6, 0.3, 0.8, 0.3),
    ):
        mv.LEXICAL_WEIGHT, mv.DENSE_WEIGHT, mv.DENSE_FLOOR, mv.DENSE_CEILING = wl, 1 - wl, floor, ceiling
        mv.LEXICAL_BASE = base
        vals = []
        for qid, q in queries.items():
            with Session(engine) as s:
                res = search(ctx, s, who, q, top_k=30)
            vals.append(ndcg_at_10(list(dict.fromkeys(doc_of.get(r.document_id, "?") for r in res)), qrels[qid]))
        print(
            json.dumps(
                {
                    "sweep": True,
                    "lexical_weight": wl,
                    "dense_floor": floor,
                    "dense_ceiling": ceiling,
                    "lexical_base": base,
                    "ndcg10": round(statistics.mean(vals), 4),
                }
            ),
            flush=True,
        )
    mv.LEXICAL_WEIGHT, mv.DENSE_WEIGHT, mv.DENSE_FLOOR, mv.DENSE_CEILING, mv.LEXICAL_BASE = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", type=Path, required=True, help="a development set (JSON, see the docstring)")
    ap.add_argument("--profile", choices=("default", "bm25"), default="default")
    ap.add_argument("--limit-queries", type=int, default=None)
    ap.add_argument("--max-docs", type=int, default=None, help="cap the corpus (judged documents kept)")
    ap.add_argument(
        "--freshness",
        type=int,
        default=0,
        metavar="N",
        help="then save N new pages one by one and time save -> first search hit (real huey worker)",
    )
    ap.add_argument(
        "--sweep",
        action="store_true",
        help="after the run, nDCG@10 of other fusion settings (lexical weight, dense floor/ceiling)",
    )
    args = ap.parse_args()

    name, docs, queries, qrels = load_set(args.set, args.max_docs, args.limit_queries)
    chinese = is_chinese([t for _, t in docs.values()])
    print(f"{name}: {len(docs)} documents, {len(queries)} queries, {'Chinese' if chinese else 'English'}", flush=True)

    from sqlmodel import Session, select

    from openkb.config import Settings, reset_settings_cache
    from openkb.content import Actor, documents
    from openkb.context import AppContext
    from openkb.db import dispose_engines, get_engine, session_scope
    from openkb.indexing import service
    from openkb.jobs import RecordingQueue, set_queue
    from openkb.migrate import upgrade
    from openkb.models import (
        Collaborator,
        DocumentChunk,
        KnowledgeBase,
        Tenant,
        TenantMembership,
        User,
        Workspace,
        WorkspaceMember,
    )
    from openkb.permissions import Principal
    from openkb.retrieval import forget_active_profile, search
    from openkb.runtime.embedded import EmbeddedServices, Endpoints

    reset_settings_cache()
    settings = Settings()
    comps = ("postgresql", "milvus", "embedder") if args.profile == "default" else ("postgresql", "milvus")
    svc = EmbeddedServices(settings, components=comps)
    ep = svc.start()
    try:
        upgrade(ep.database_url)
        os.environ["DATABASE_URL"] = ep.database_url
        os.environ["MILVUS_URI"] = ep.milvus_uri
        reset_settings_cache()
        settings = Settings()
        endpoints = Endpoints(
            database_url=ep.database_url,
            milvus_uri=ep.milvus_uri,
            milvus_token=None,
            embedder_url=ep.embedder_url,
            queue=str(Path(_HOME) / "queue.db"),
            home=Path(_HOME),
        )
        ctx = AppContext.build(settings, endpoints)
        set_queue(RecordingQueue())
        engine = get_engine(ep.database_url)
        with Session(engine, expire_on_commit=False) as s:
            t = Tenant(name="quality", slug="quality")
            s.add(t)
            s.flush()
            owner = User(email="owner@bench.local", display_name="Owner", status="active")
            member = User(email="member@bench.local", display_name="Member", status="active")
            s.add_all([owner, member])
            s.flush()
            s.add_all([TenantMembership(tenant_id=t.id, user_id=u.id, role="member") for u in (owner, member)])
            ws = Workspace(tenant_id=t.id, name="Quality", slug="quality", created_by=owner.id)
            s.add(ws)
            s.flush()
            s.add_all(
                [
                    WorkspaceMember(tenant_id=t.id, workspace_id=ws.id, user_id=owner.id, role="owner"),
                    WorkspaceMember(tenant_id=t.id, workspace_id=ws.id, user_id=member.id, role="member"),
                ]
            )
            kb = KnowledgeBase(
                tenant_id=t.id,
                workspace_id=ws.id,
                title=name,
                slug="set",
                visibility="workspace",
                status="active",
                created_by=owner.id,
            )
            s.add(kb)
            s.flush()
            s.add(
                Collaborator(
                    tenant_id=t.id,
                    object_type="knowledge_base",
                    object_id=kb.id,
                    subject_type="user",
                    subject_id=owner.id,
                    role="owner",
                    source="system",
                )
            )
            s.commit()
        with session_scope(engine) as s:
            service.ensure_default_profile(ctx, s)
        forget_active_profile()

        # documents through the content service (dialect check + normalizer), then the indexer
        writer = Actor.of(Principal.user(owner, t.id))
        doc_of: dict[str, str] = {}  # OpenKB document id -> set id
        skipped = 0
        started = time.perf_counter()
        items = list(docs.items())
        for start in range(0, len(items), 200):
            with Session(engine, expire_on_commit=False) as s:
                for sid, (title, body) in items[start : start + 200]:
                    try:
                        d, _v = documents.create_document(
                            s, writer, knowledge_base_id=kb.id, title=(title or sid)[:200], markdown=_escape(body)
                        )
                    except Exception as exc:  # noqa: BLE001 - a bench: count and go on
                        skipped += 1
                        if skipped <= 3:
                            print(f"  skipped {sid}: {exc}", flush=True)
                        continue
                    doc_of[str(d.id)] = sid
                s.commit()
        create_s = time.perf_counter() - started
        started = time.perf_counter()
        ids = list(doc_of)
        for start in range(0, len(ids), service.BATCH_DOCS):
            with session_scope(engine) as s:
                service.sync_documents(ctx, s, ids[start : start + service.BATCH_DOCS])
        index_s = time.perf_counter() - started
        with Session(engine) as s:
            n_chunks = len(s.exec(select(DocumentChunk.id)).all())
        rate = n_chunks / index_s if index_s else 0.0
        print(
            f"created {len(ids)} pages in {create_s:.1f} s ({skipped} skipped); indexed {n_chunks} chunks in "
            f"{index_s:.1f} s = {rate:.1f} chunks/s",
            flush=True,
        )

        from openkb.indexing import milvus as mv

        mv.warm(ctx.milvus, settings.milvus_active_alias, service.default_spec(ctx), budget_s=60)

        ref = BM25Reference(list(docs), [f"{ti}\n{tx}" for ti, tx in docs.values()], chinese)
        who = Principal.user(member, t.id)
        from pymilvus import AnnSearchRequest, RRFRanker

        from openkb.retrieval import service as retrieval
        from openkb.retrieval.filters import SearchFilters

        with Session(engine) as s:
            flt = retrieval.plan(ctx, s, who, knowledge_base_ids=None, filters=SearchFilters()).filter
        spec = service.default_spec(ctx)

        def rrf_before(q: str) -> list[str]:
            """The ranking before issue 14 (Milvus RRF(60) over dense + BM25, limit 30, 120 per
            route), on the same filter: the same-run reference for quality and latency."""
            if not spec.has_dense:
                raw = ctx.milvus.search(
                    settings.milvus_active_alias,
                    data=[q],
                    anns_field=mv.SPARSE_FIELD,
                    filter=flt,
                    limit=30,
                    output_fields=["document_id"],
                    search_params={"metric_type": "BM25"},
                )
            else:
                reqs = [
                    AnnSearchRequest(
                        data=[q],
                        anns_field=mv.DENSE_FIELD,
                        limit=120,
                        expr=flt,
                        param={"metric_type": "COSINE", "params": {"ef": mv.HNSW_EF}},
                    ),
                    AnnSearchRequest(
                        data=[q], anns_field=mv.SPARSE_FIELD, limit=120, expr=flt, param={"metric_type": "BM25"}
                    ),
                ]
                raw = ctx.milvus.hybrid_search(
                    settings.milvus_active_alias, reqs, ranker=RRFRanker(60), limit=30, output_fields=["document_id"]
                )
            return list(dict.fromkeys(doc_of.get(h["entity"]["document_id"], "?") for h in raw[0]))

        def old_hybrid(
            client,
            collection,
            query_text,
            filter,
            limit,
            spec,
            *,
            candidates=None,
            output_fields=mv.DEFAULT_OUTPUT_FIELDS,
            timeout=None,
            **_later,  # arguments hybrid_search gained since (e.g. degraded), which this one ignores
        ):
            """hybrid_search as it was before issue 14 (one Milvus RRF(60) call), for a same-run
            latency reference through the whole service."""
            per_route = min(16384, candidates or max(limit * 4, 40))
            reqs = [
                AnnSearchRequest(
                    data=[query_text],
                    anns_field=mv.DENSE_FIELD,
                    limit=per_route,
                    expr=filter or None,
                    param={"metric_type": "COSINE", "params": {"ef": max(mv.HNSW_EF, per_route)}},
                ),
                AnnSearchRequest(
                    data=[query_text],
                    anns_field=mv.SPARSE_FIELD,
                    limit=per_route,
                    expr=filter or None,
                    param={"metric_type": "BM25"},
                ),
            ]
            raw = client.hybrid_search(
                collection, reqs, ranker=RRFRanker(60), limit=limit, output_fields=list(output_fields), timeout=timeout
            )
            return [mv.Hit(id=str(h["id"]), score=float(h["distance"]), fields=dict(h["entity"])) for h in raw[0]]

        def before_service_ms(q: str) -> float:
            real = retrieval.mv.hybrid_search
            retrieval.mv.hybrid_search = old_hybrid if spec.has_dense else real
            try:
                with Session(engine) as s:
                    t0 = time.perf_counter()
                    search(ctx, s, who, q, top_k=30)
                    return (time.perf_counter() - t0) * 1000
            finally:
                retrieval.mv.hybrid_search = real

        r_ndcg, r_times, before_times = [], [], []
        o_ndcg, o_rec, b_ndcg, b_rec, times = [], [], [], [], []
        scores: list[float] = []
        for n, (qid, q) in enumerate(queries.items()):
            with Session(engine) as s:
                t0 = time.perf_counter()
                res = search(ctx, s, who, q, top_k=30)
                times.append((time.perf_counter() - t0) * 1000)
            ranked = list(dict.fromkeys(doc_of.get(r.document_id, "?") for r in res))
            scores.extend(r.score for r in res[:1])
            o_ndcg.append(ndcg_at_10(ranked, qrels[qid]))
            o_rec.append(recall_at_10(ranked, qrels[qid]))
            before_times.append(before_service_ms(q))
            t0 = time.perf_counter()
            rr = rrf_before(q)
            r_times.append((time.perf_counter() - t0) * 1000)
            r_ndcg.append(ndcg_at_10(rr, qrels[qid]))
            bm = ref.search(q)
            b_ndcg.append(ndcg_at_10(bm, qrels[qid]))
            b_rec.append(recall_at_10(bm, qrels[qid]))
            if (n + 1) % 200 == 0:
                print(f"  {n + 1} queries", flush=True)
        on, bn = statistics.mean(o_ndcg), statistics.mean(b_ndcg)
        summary = {
            "set": name,
            "profile": args.profile,
            "docs": len(ids),
            "queries": len(queries),
            "chunks": n_chunks,
            "openkb_ndcg10": round(on, 4),
            "openkb_recall10": round(statistics.mean(o_rec), 4),
            "bm25_ndcg10": round(bn, 4),
            "bm25_recall10": round(statistics.mean(b_rec), 4),
            "ratio": round(on / bn, 4) if bn else None,
            "search_p50_ms": round(statistics.median(times), 1),
            "search_p95_ms": round(pct(times, 0.95), 1),
            "index_chunks_per_s": round(rate, 1),
            "rrf_before_ndcg10": round(statistics.mean(r_ndcg), 4),
            "rrf_before_raw_p50_ms": round(statistics.median(r_times), 1),
            "rrf_before_raw_p95_ms": round(pct(r_times, 0.95), 1),
            "before_service_p50_ms": round(statistics.median(before_times), 1),
            "before_service_p95_ms": round(pct(before_times, 0.95), 1),
            "p95_vs_before": round(pct(times, 0.95) / pct(before_times, 0.95), 3),
            "top_score_min": round(min(scores), 4) if scores else None,
            "top_score_max": round(max(scores), 4) if scores else None,
            "cpus": os.cpu_count() or 0,
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
        print(f"OpenKB  nDCG@10 {on:.4f}  recall@10 {summary['openkb_recall10']:.4f}")
        print(
            f"RRF(60) before issue 14 nDCG@10 {summary['rrf_before_ndcg10']:.4f}  raw Milvus p50 "
            f"{summary['rrf_before_raw_p50_ms']} ms  p95 {summary['rrf_before_raw_p95_ms']} ms (no PostgreSQL)"
        )
        print(
            f"search before issue 14 through the same service (interleaved): p50 "
            f"{summary['before_service_p50_ms']} ms  p95 {summary['before_service_p95_ms']} ms"
        )
        print(f"BM25    nDCG@10 {bn:.4f}  recall@10 {summary['bm25_recall10']:.4f}")
        print(f"ratio {summary['ratio']}   search p50 {summary['search_p50_ms']} ms  p95 {summary['search_p95_ms']} ms")
        print(json.dumps(summary), flush=True)
        if args.freshness:
            fresh = freshness(ctx, engine, writer, who, kb.id, args.freshness)
            summary.update(fresh)
            print(json.dumps({"set": name, **fresh}), flush=True)
        if args.sweep:
            sweep(ctx, engine, who, queries, qrels, doc_of)
        ctx.close()
    finally:
        dispose_engines()
        svc.stop()
        shutil.rmtree(_HOME, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
