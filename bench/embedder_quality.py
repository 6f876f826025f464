"""Retrieval quality of BM25-only vs hybrid (BM25 + local embedder) through Milvus, as nDCG@10.

    python bench/embedder_quality.py --beir DIR [--model use-multilingual-v3] [--max-docs N]

``DIR`` is a dataset in BEIR layout (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``),
e.g. SciFact or NFCorpus. No such set can be obtained on the appliance's build machine: the
PyPI packages that offer them (``beir``, ``mteb``, ``ir-datasets``, ``c-mteb``,
``milvus-beir``, ``hydrag-benchmark``) all download the data from a hub at run time, and none
of the packages checked bundles a corpus. So the script runs only on a machine that has a copy;
without ``--beir`` it says so and exits 2.

The script starts its own Milvus Lite server and ``python -m openkb.embedder`` on free loopback
ports (or uses ``--milvus-uri`` / ``--embedder-url``), loads the corpus into two collections
(BM25-only and hybrid) with the same code the appliance uses (``openkb.indexing.milvus``), and
runs every test query through ``hybrid_search``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from pymilvus import MilvusClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openkb.indexing import milvus as mv
from openkb.indexing.profiles_spec import ProfileSpec, make_profile
from openkb.runtime.embedded import free_port
from openkb.runtime.lite_server import lite_command


def load_beir(root: Path, max_docs: int | None) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(root / "qrels" / "test.tsv", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # header
            qrels[parts[0]][parts[1]] = int(parts[2])
    relevant = {d for rel in qrels.values() for d in rel}
    corpus: dict[str, str] = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            if max_docs is not None and len(corpus) >= max_docs and doc["_id"] not in relevant:
                continue  # keep every judged document, cut only the rest
            corpus[doc["_id"]] = ((doc.get("title") or "") + "\n" + (doc.get("text") or "")).strip()
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries[q["_id"]] = q["text"]
    return corpus, queries, dict(qrels)


def ndcg_at_10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum((2 ** rel.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted((g for g in rel.values() if g > 0), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def _wait(url_ok, proc: subprocess.Popen[bytes], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            if url_ok():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} not ready after {timeout}s")


@contextmanager
def _process(cmd: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def evaluate(
    client: MilvusClient,
    spec: ProfileSpec,
    corpus: dict[str, str],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    batch: int,
) -> dict[str, float]:
    mv.ensure_collection(client, spec)
    rows = (
        mv.chunk_row(
            chunk_id=f"c{n}",
            tenant_id="bench",
            workspace_id="w",
            knowledge_base_id="kb",
            document_id=f"c{n}",
            version_id="v1",
            doc_status="published",
            visibility_eff="public",
            title=doc_id,
            content_text=text,
        )
        for n, (doc_id, text) in enumerate(corpus.items())
    )
    started = time.perf_counter()
    mv.upsert_rows(client, spec.collection_name, rows, batch_size=batch)
    load_s = time.perf_counter() - started
    mv.compact(client, spec.collection_name)
    mv.warm(client, spec.collection_name, spec)
    from openkb.permissions.scope import ReadableScope
    from openkb.retrieval.service import FIELD_MAP

    # the filter retrieval sends for a public reader of this one-tenant benchmark collection
    flt = mv.and_filters(
        ReadableScope(tenant_id="bench", public=True).to_milvus_filter(FIELD_MAP), "is_current == true"
    )
    scores, times = [], []
    for qid, text in queries.items():
        t = time.perf_counter()
        hits = mv.hybrid_search(client, spec.collection_name, text, flt, 10, spec, output_fields=["title"])
        times.append((time.perf_counter() - t) * 1000)
        scores.append(ndcg_at_10([h.fields["title"] for h in hits], qrels[qid]))
    return {
        "ndcg@10": statistics.mean(scores),
        "query_ms_p50": statistics.median(times),
        "load_rows_per_s": len(corpus) / load_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beir", type=Path, help="dataset directory in BEIR layout")
    ap.add_argument("--model", default="use-multilingual-v3")
    ap.add_argument("--max-docs", type=int, default=None, help="cap the corpus (judged documents always kept)")
    ap.add_argument("--milvus-uri", help="use this Milvus instead of starting Milvus Lite")
    ap.add_argument("--embedder-url", help="use this /v1 endpoint instead of starting the local embedder")
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    if args.beir is None:
        print(
            "no public IR benchmark is bundled in any package obtainable here (beir, mteb, ir-datasets and "
            "c-mteb download their data at run time); pass --beir DIR with a local copy",
            file=sys.stderr,
        )
        return 2
    corpus, queries, qrels = load_beir(args.beir, args.max_docs)
    print(f"{args.beir.name}: {len(corpus)} docs, {len(queries)} queries", flush=True)

    with ExitStack() as stack:
        uri, emb = args.milvus_uri, args.embedder_url
        if uri is None:
            data = Path(tempfile.mkdtemp(prefix="openkb-bench-"))
            stack.callback(shutil.rmtree, data, True)
            port = free_port()
            proc = stack.enter_context(
                _process(
                    lite_command(data, port),
                    env={**os.environ, "OPENAI_API_KEY": "bench"},
                )
            )
            uri = f"http://127.0.0.1:{port}"
            _wait(lambda: MilvusClient(uri=uri, timeout=2).list_collections() is not None, proc, "milvus-lite")
        if emb is None:
            port = free_port()
            proc = stack.enter_context(
                _process(
                    [
                        sys.executable,
                        "-m",
                        "openkb.embedder",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--model",
                        args.model,
                    ]
                )
            )
            _wait(lambda: httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200, proc, "embedder")
            emb = f"http://127.0.0.1:{port}/v1"
        dim = httpx.get(emb.rstrip("/") + "/models").json()["data"][0]["dimensions"]
        client = MilvusClient(uri=uri)
        for label, spec in (
            ("bm25", make_profile(model_name=None, dim=0, version=9001)),
            (f"hybrid[{args.model}]", make_profile(model_name=args.model, dim=dim, version=9001, base_url=emb)),
        ):
            res = evaluate(client, spec, corpus, queries, qrels, args.batch)
            print(
                f"{label:36s} nDCG@10 {res['ndcg@10']:.4f}  query p50 {res['query_ms_p50']:.0f} ms  "
                f"load {res['load_rows_per_s']:.0f} rows/s",
                flush=True,
            )
            client.drop_collection(spec.collection_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
