"""Dify ``POST /retrieval`` over HTTP vs the same queries through the retrieval service in-process.

    python bench/dify.py [--chunks 100000] [--queries 300] [--top-k 10] [--build-budget-s 900]
                         [--compact] [--home DIR]   # --home: build into / reuse an OPENKB_HOME

Runs on the embedded default (pgserver, Milvus Lite, the embedded embedder, default index
profile) in its own OPENKB_HOME. It builds a corpus of Markdown documents (about ten ~70-token
sections each, English and Chinese words from a Zipf vocabulary), indexed through the real
indexer (``openkb.indexing.service.sync_documents``: chunker -> document_chunks -> Milvus, which
embeds through its TEXTEMBEDDING function), half of it in the knowledge base a Dify key may read
and half in one it may not. The build stops at ``--chunks`` or when ``--build-budget-s`` is used
up, whichever comes first; the figures name the number of chunks actually indexed.

Then the API server (what ``openkb serve`` runs) starts as a separate process on the same services, and every query is sent
both ways, interleaved (so drift affects both alike), one at a time:

* HTTP: ``POST /retrieval`` with a Dify-shaped body (keep-alive client, as Dify's httpx has);
* in-process: ``openkb.retrieval.search`` with the same key's principal, knowledge base and top_k.

Prints p50/p95/p99 for both and ``ratio = http_p95 / inprocess_p95`` (target <= 1.2), and checks
p95 against Dify's 5 s client timeout. The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DIFY_TIMEOUT_S = 5.0
SECTIONS_PER_DOC = 10
WORDS_PER_SECTION = 70
_EN = ("index permission search vector keyword tenant workspace document folder version markdown editor "
       "share link invite member guest owner manager viewer reader cluster collection alias rebuild embed "
       "rerank fusion score chunk heading table list code block image upload import export audit token key "
       "session login register verify password reset email domain admin system profile model dimension "
       "latency throughput replica backup restore migrate schema column constraint trigger queue worker "
       "retry backoff timeout cache warm cold storage bucket object blob stream batch commit rollback").split()
_ZH = ("知识库 权限 检索 向量 关键词 租户 空间 文档 目录 版本 编辑器 分享 链接 邀请 成员 访客 管理员 "
       "索引 重建 嵌入 排序 融合 分数 标题 表格 列表 代码 图片 上传 导入 导出 审计 令牌 会话 登录 注册 "
       "验证 密码 邮件 系统 模型 维度 延迟 吞吐 副本 备份 恢复 迁移 队列 重试 超时 缓存 存储 批量 提交").split()


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- services and corpus -------------------------------------------------------------------------


def start_services(home: Path) -> tuple[Any, Any]:
    for var in ("DATABASE_URL", "MILVUS_URI", "REDIS_URL", "S3_ENDPOINT", "SMTP_HOST", "OPENKB_EMBEDDER_URL"):
        os.environ.pop(var, None)
    os.environ["OPENKB_HOME"] = str(home)
    os.environ.setdefault("OPENKB_LOG_LEVEL", "WARNING")
    from openkb.config import Settings, reset_settings_cache
    from openkb.context import AppContext
    from openkb.jobs import RecordingQueue, set_queue
    from openkb.migrate import upgrade
    from openkb.runtime.embedded import EmbeddedServices

    reset_settings_cache()
    settings = Settings()
    svc = EmbeddedServices(settings)
    ep = svc.start()
    if ep.embedder_url is None:
        _say("warning: no embedder: the default profile will be BM25-only")
    upgrade(ep.database_url)
    set_queue(RecordingQueue())  # index jobs are run here, synchronously
    return svc, AppContext.build(settings, ep)


def _zipf_words(rng: random.Random, n: int) -> list[str]:
    vocab = _EN + _ZH
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    return rng.choices(vocab, weights=weights, k=n)


def _document(rng: random.Random, i: int) -> tuple[str, str]:
    title = f"Doc {i} " + " ".join(_zipf_words(rng, 3))
    parts = [f"# {title}", ""]
    for s in range(SECTIONS_PER_DOC):
        words = _zipf_words(rng, WORDS_PER_SECTION) + [f"marker{i % 997}"]
        rng.shuffle(words)
        parts += [f"## Section {s} {words[0]}", "", " ".join(words) + ".", ""]
    return title, "\n".join(parts)


def build_corpus(ctx: Any, n_chunks: int, budget_s: float, seed: int = 7) -> dict[str, Any]:
    """Documents inserted in bulk, then indexed by ``sync_documents`` in batches (the indexer's
    own path, embedding included). Resumable: counts what a previous run already indexed."""
    import hashlib

    from sqlalchemy import text
    from sqlmodel import Session

    from openkb.db import session_scope
    from openkb.indexing import service as index_service
    from openkb.models import Document, DocumentVersion, KnowledgeBase, Tenant, TenantMembership, User, Workspace

    with session_scope(ctx.engine) as s:
        index_service.ensure_default_profile(ctx, s)
    with Session(ctx.engine, expire_on_commit=False) as s:
        t = s.execute(text("SELECT id FROM tenants WHERE slug = 'bench'")).scalar()
        if t is None:
            tenant = Tenant(name="Bench", slug="bench")
            s.add(tenant)
            s.flush()
            user = User(email="bench@example.com", display_name="Bench", status="active")
            s.add(user)
            s.flush()
            s.add(TenantMembership(tenant_id=tenant.id, user_id=user.id, role="tenant_admin"))
            ws = Workspace(tenant_id=tenant.id, name="Bench", slug="bench", created_by=user.id)
            s.add(ws)
            s.flush()
            for slug in ("dify", "other"):
                s.add(KnowledgeBase(tenant_id=tenant.id, workspace_id=ws.id, title=slug, slug=slug,
                                    visibility="workspace", created_by=user.id))
            s.commit()
        row = s.execute(text("SELECT t.id AS tenant, u.id AS user, w.id AS ws FROM tenants t "
                             "JOIN tenant_memberships m ON m.tenant_id = t.id JOIN users u ON u.id = m.user_id "
                             "JOIN workspaces w ON w.tenant_id = t.id WHERE t.slug = 'bench'")).mappings().one()
        kbs = {r.slug: r.id for r in s.execute(text(
            "SELECT slug, id FROM knowledge_bases WHERE tenant_id = :t"), {"t": row["tenant"]}).all()}
    rng = random.Random(seed)
    t0 = time.perf_counter()
    indexed = _chunks(ctx)
    n_docs = _docs(ctx)
    batch = index_service.BATCH_DOCS
    last_report = t0
    while indexed < n_chunks and time.perf_counter() - t0 < budget_s:
        ids: list[str] = []
        with session_scope(ctx.engine) as s:
            for _ in range(batch):
                title, md = _document(rng, n_docs)
                kb = kbs["dify"] if n_docs % 2 == 0 else kbs["other"]
                d = Document(tenant_id=row["tenant"], workspace_id=row["ws"], knowledge_base_id=kb, type="page",
                             title=title, slug=f"d{n_docs}-{uuid.uuid4().hex[:6]}", status="published",
                             created_by=row["user"], updated_by=row["user"],
                             meta={"lang": "zh" if n_docs % 3 == 0 else "en", "n": n_docs},
                             tags=["even" if n_docs % 2 == 0 else "odd"])
                s.add(d)
                s.flush()
                v = DocumentVersion(tenant_id=row["tenant"], document_id=d.id, version_no=1, title=title, markdown=md,
                                    markdown_hash=hashlib.sha256(md.encode()).hexdigest(), source_type="import",
                                    created_by=row["user"])
                s.add(v)
                s.flush()
                d.current_version_id = v.id
                s.add(d)
                ids.append(str(d.id))
                n_docs += 1
        with session_scope(ctx.engine) as s:
            index_service.sync_documents(ctx, s, ids)
        indexed = _chunks(ctx)
        now = time.perf_counter()
        if now - last_report > 15:
            rate = indexed / (now - t0) if now > t0 else 0
            _say(f"  built {indexed} chunks / {n_docs} documents in {now - t0:.0f}s ({rate:.0f} chunks/s)")
            last_report = now
    return {"tenant_id": row["tenant"], "kb_id": kbs["dify"], "other_kb_id": kbs["other"], "n_chunks": _chunks(ctx),
            "n_docs": _docs(ctx), "build_s": round(time.perf_counter() - t0, 1)}


def _chunks(ctx: Any) -> int:
    from openkb.indexing import milvus as mv

    return mv.count_rows(ctx.milvus, ctx.settings.milvus_active_alias)


def _docs(ctx: Any) -> int:
    from sqlalchemy import text
    from sqlmodel import Session

    with Session(ctx.engine) as s:
        return int(s.execute(text("SELECT count(*) FROM documents")).scalar_one())


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.choice((2, 3, 4))
        words = _zipf_words(rng, k)
        if i % 4 == 0:
            words.append(f"marker{rng.randrange(997)}")
        out.append(" ".join(words))
    return out


# --- measurement ---------------------------------------------------------------------------------


def start_server(home: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MILVUS_URI", "OPENKB_EMBEDDER_URL")}
    env.update(OPENKB_HOME=str(home), OPENKB_LOG_LEVEL="WARNING")
    # What `openkb serve` does, without importing every CLI command module.
    code = ("import uvicorn\nfrom cli.context import appliance\nfrom server.app import create_app\n"
            "with appliance(migrate=False) as ctx:\n"
            f"    uvicorn.run(create_app(ctx), host='127.0.0.1', port={port}, log_level='warning', access_log=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    import httpx

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"openkb serve exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("openkb serve did not become ready")


def measure(ctx: Any, base: str, key: str, knowledge_id: str, principal: Any, kb_id: Any, qs: list[str],
            top_k: int, warmup: int) -> dict[str, list[float]]:
    import httpx
    from sqlmodel import Session

    from openkb.retrieval import search

    http_ms: list[float] = []
    inproc_ms: list[float] = []
    records: list[int] = []
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with httpx.Client(base_url=base, timeout=30, headers=headers) as client:
        for i, q in enumerate(qs[:warmup] + qs):
            body = json.dumps({"knowledge_id": knowledge_id, "query": q,
                               "retrieval_setting": {"top_k": top_k, "score_threshold": 0.0},
                               "metadata_condition": None})
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for which in order:
                t = time.perf_counter()
                if which == 0:
                    r = client.post("/retrieval", content=body)
                    dt = (time.perf_counter() - t) * 1000
                    if r.status_code != 200:
                        raise SystemExit(f"/retrieval -> {r.status_code} {r.text[:300]}")
                    n = len(r.json()["records"])
                else:
                    with Session(ctx.engine) as s:
                        search(ctx, s, principal, q, knowledge_base_ids=[kb_id], top_k=top_k)
                    dt = (time.perf_counter() - t) * 1000
                    n = -1
                if i >= warmup:
                    (http_ms if which == 0 else inproc_ms).append(dt)
                    if which == 0:
                        records.append(n)
    return {"http": http_ms, "inproc": inproc_ms, "records": [float(r) for r in records]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--build-budget-s", type=float, default=900.0)
    ap.add_argument("--compact", action="store_true", help="compact the collection before measuring")
    ap.add_argument("--home", type=Path, default=None, help="OPENKB_HOME to build into / reuse (kept)")
    args = ap.parse_args()

    home = args.home or Path(tempfile.mkdtemp(prefix="openkb-bench-dify-"))
    home.mkdir(parents=True, exist_ok=True)
    svc, ctx = start_services(home)
    server = None
    try:
        _say(f"building up to {args.chunks} chunks in {home} (budget {args.build_budget_s:.0f}s)...")
        world = build_corpus(ctx, args.chunks, args.build_budget_s)
        _say(f"corpus: {world['n_chunks']} chunks, {world['n_docs']} documents, built in {world['build_s']}s")
        if args.compact:
            from openkb.indexing import milvus as mv

            t = time.perf_counter()
            mv.compact(ctx.milvus, ctx.settings.milvus_active_alias)
            _say(f"compacted in {time.perf_counter() - t:.0f}s")

        from openkb.db import session_scope
        from openkb.dify import keys, mappings
        from openkb.dify.service import dify_principal
        from openkb.models import DifyApiKey
        from openkb.retrieval import forget_active_profile

        forget_active_profile()
        with session_scope(ctx.engine) as s:
            row, key = keys.create_key(s, tenant_id=world["tenant_id"], name=f"bench-{uuid.uuid4().hex[:6]}",
                                       knowledge_base_ids=[world["kb_id"]])
            kid = f"bench-{uuid.uuid4().hex[:6]}"
            mappings.do_map(s, tenant_id=world["tenant_id"], knowledge_id=kid, kb=world["kb_id"])
        with session_scope(ctx.engine) as s:
            principal = dify_principal(s.get(DifyApiKey, row.id), world["kb_id"])

        from openkb.runtime.embedded import free_port

        port = free_port()
        server = start_server(home, port)
        qs = queries(args.queries)
        t = time.perf_counter()
        res = measure(ctx, f"http://127.0.0.1:{port}", key, kid, principal, world["kb_id"], qs, args.top_k,
                      args.warmup)
        wall = time.perf_counter() - t
        http_ms, in_ms = res["http"], res["inproc"]
        figures = {
            "n_chunks": world["n_chunks"], "n_docs": world["n_docs"], "queries": len(qs), "top_k": args.top_k,
            "p50_ms": round(_percentile(http_ms, 0.50), 1), "p95_ms": round(_percentile(http_ms, 0.95), 1),
            "p99_ms": round(_percentile(http_ms, 0.99), 1),
            "inprocess_p50_ms": round(_percentile(in_ms, 0.50), 1),
            "inprocess_p95_ms": round(_percentile(in_ms, 0.95), 1),
            "inprocess_p99_ms": round(_percentile(in_ms, 0.99), 1),
            "ratio": round(_percentile(http_ms, 0.95) / max(_percentile(in_ms, 0.95), 1e-6), 3),
            "mean_records": round(sum(res["records"]) / max(len(res["records"]), 1), 2),
            "under_dify_timeout": _percentile(http_ms, 0.95) < DIFY_TIMEOUT_S * 1000,
            "build_s": world["build_s"], "measure_s": round(wall, 1),
            "embedded": {"embedder": ctx.endpoints.embedder_url is not None}, "cpus": os.cpu_count(),
        }
        print(f"{'':24}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
        print(f"{'POST /retrieval (HTTP)':24}{figures['p50_ms']:>10}{figures['p95_ms']:>10}{figures['p99_ms']:>10}")
        print(f"{'search() in-process':24}{figures['inprocess_p50_ms']:>10}{figures['inprocess_p95_ms']:>10}"
              f"{figures['inprocess_p99_ms']:>10}")
        print(f"ratio (p95 HTTP / p95 in-process) = {figures['ratio']} (target <= 1.2); "
              f"{figures['n_chunks']} chunks, {len(qs)} queries, top_k {args.top_k}; "
              f"p95 {'under' if figures['under_dify_timeout'] else 'OVER'} Dify's {DIFY_TIMEOUT_S:.0f} s timeout")
        print(json.dumps(figures))
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
        ctx.close()
        from openkb.db import dispose_engines

        dispose_engines()
        svc.stop()


if __name__ == "__main__":
    main()
