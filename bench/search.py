"""Search latency: OpenKB's permission-checked retrieval vs. the same hybrid search issued raw.

    python bench/search.py [--n 100000] [--queries 100] [--home DIR] [--keep]

What it builds (fresh embedded PostgreSQL + Milvus Lite under a temporary home):

* a permission world: tenant A (plus a tenant B that must never show up), 2,000 users, 20
  workspaces with owner/admin/member/guest memberships, 100 groups, 200 knowledge bases (45%
  private, 40% workspace, 15% public) with 5-20 user and 0-3 group collaborators each, and
  ``n / 5`` documents in folders (3% of them custom-permission documents with their own
  collaborators and visibility; 85% published, 10% draft, 3% archived, 2% deleted);
* ``n`` chunks of synthetic mixed Chinese/English text (Zipf-sampled from jieba's dictionary and
  a generated English vocabulary), inserted into ``document_chunks``;
* the Milvus collection, filled by OpenKB's own rebuild (``run_rebuild --switch``) with the
  embedded default's shape: BM25 function (jieba analyzer) + TEXTEMBEDDING function (provider
  ``openai``, model ``use-multilingual-v3``, 512-d), then compacted, loaded and warmed.

Vectors. Milvus refuses client-supplied values for a function's output field, and embedding
100k passages through the local model takes far too long on a small machine (measured rate is
printed). So the bench embeds a pool of ``--pool`` (default 1,000) distinct base passages once,
in bulk, with the same model; every chunk's text is one base passage plus a chunk-specific
sentence, and its vector is that passage's vector plus small deterministic noise (normalised).
The collection's TEXTEMBEDDING function points at a bench-local OpenAI-compatible endpoint
(OpenKB's own embedder HTTP server code, run as a separate process like the appliance's
embedder) that returns those vectors for chunk texts and runs the real model for anything else. The bench queries are embedded by the real model once before
timing (cached), so both timed paths pay the same Milvus -> endpoint round trip per search but
no model time; the numbers compare Milvus + OpenKB, not the embedding model.

What it times (the same queries, interleaved, after warm-up):

(a) ``openkb.retrieval.search`` as a non-admin member (member of 2 workspaces, viewer/editor on
    ~10 knowledge bases, in 2 groups): readable scope from PostgreSQL, hybrid search on the
    active alias with the scope filter, the batched PostgreSQL final check and display query,
    trim to top_k=10 (over-fetch 30), each in a fresh session;
(b) raw ``MilvusClient.hybrid_search`` on the same collection with the same requests (dense +
    BM25, RRF(60), limit 30, 120 candidates per route, same output fields) and no filter.

``first_search_ms``: Milvus and PostgreSQL are restarted (cold collection), ``warm_active`` runs
as ``openkb up`` does before ``/readyz``, then the first user search is timed.

The last line is JSON: n_chunks, openkb_p50_ms, openkb_p95_ms, raw_p50_ms, raw_p95_ms, ratio
(p95/p95), first_search_ms, and more.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import pickle
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL = "use-multilingual-v3"
DIM = 512


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- text --------------------------------------------------------------------------------------------


class Vocab:
    """Zipf-distributed words: Chinese from jieba's dictionary, English generated from syllables."""

    def __init__(self, rng: random.Random, zh: int = 6000, en: int = 4000) -> None:
        import jieba

        path = Path(jieba.__file__).parent / "dict.txt"
        words = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                w, freq, *_ = line.split(" ")
                if 2 <= len(w) <= 4 and all("\u4e00" <= ch <= "\u9fff" for ch in w):
                    words.append((int(freq), w))
        words.sort(reverse=True)
        self.zh = [w for _, w in words[:zh]]
        syl = [
            "ka",
            "ri",
            "to",
            "mel",
            "van",
            "dor",
            "sin",
            "ex",
            "plo",
            "tra",
            "qui",
            "net",
            "lo",
            "gra",
            "phi",
            "bu",
            "zen",
            "cor",
            "al",
            "is",
            "mon",
            "ter",
            "ux",
            "fa",
            "ly",
            "den",
            "sa",
            "po",
            "nik",
            "ver",
        ]
        tech = [
            "milvus",
            "index",
            "search",
            "vector",
            "permission",
            "tenant",
            "workspace",
            "document",
            "chunk",
            "embedding",
            "rerank",
            "hybrid",
            "filter",
            "query",
            "alias",
            "rebuild",
            "markdown",
            "folder",
            "cluster",
            "replica",
            "backup",
            "deploy",
            "latency",
            "token",
            "schema",
            "version",
            "policy",
        ]
        en_words: list[str] = list(tech)
        seen = set(en_words)
        while len(en_words) < en:
            w = "".join(rng.choice(syl) for _ in range(rng.randint(2, 3)))
            if w not in seen:
                seen.add(w)
                en_words.append(w)
        self.en = en_words
        self._zw = list(itertools.accumulate(1.0 / (i + 1) ** 1.05 for i in range(len(self.zh))))
        self._ew = list(itertools.accumulate(1.0 / (i + 1) ** 1.05 for i in range(len(self.en))))
        self.rng = rng

    def words(self, n: int, zh_share: float = 0.55) -> list[str]:
        nz = sum(1 for _ in range(n) if self.rng.random() < zh_share)
        out = self.rng.choices(self.zh, cum_weights=self._zw, k=nz) + self.rng.choices(
            self.en, cum_weights=self._ew, k=n - nz
        )
        self.rng.shuffle(out)
        return out

    def sentence(self, n: int) -> str:
        ws = self.words(n)
        return " ".join(ws) + self.rng.choice(["。", ".", "；", "!"])


# --- the world ---------------------------------------------------------------------------------------


@dataclass
class World:
    tenant_a: uuid.UUID
    bench_user: uuid.UUID
    n_docs: int
    n_chunks: int
    texts: dict[str, tuple[int, int]] = field(default_factory=dict)  # index text -> (base passage, seed)
    pool: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


def _insert(conn: Any, model: Any, rows: list[dict[str, Any]], step: int = 5000) -> None:
    from sqlalchemy import insert

    for start in range(0, len(rows), step):
        conn.execute(insert(model.__table__), rows[start : start + step])


def build_world(
    engine: Any,
    n_chunks: int,
    *,
    seed: int = 7,
    pool_size: int = 1000,
    chunks_per_doc: int = 5,
    n_users: int = 2000,
    n_ws: int = 20,
    n_groups: int = 100,
    n_kbs: int = 200,
) -> World:
    """Bulk-insert the permission world and ``n_chunks`` chunks (see the module docstring)."""
    from openkb.indexing.chunker import CHUNKER_VERSION, count_tokens, index_text
    from openkb.models import (
        Collaborator,
        Document,
        DocumentChunk,
        DocumentVersion,
        Group,
        GroupMember,
        KnowledgeBase,
        Tenant,
        TenantMembership,
        User,
        Workspace,
        WorkspaceMember,
    )

    rng = random.Random(seed)
    vocab = Vocab(rng)
    pool = [vocab.sentence(rng.randint(18, 30)) + " " + vocab.sentence(rng.randint(8, 14)) for _ in range(pool_size)]
    now = datetime.now(UTC)
    ta, tb = uuid.uuid4(), uuid.uuid4()
    tenants = [
        {"id": ta, "name": "Bench A", "slug": f"bench-a-{ta.hex[:6]}"},
        {"id": tb, "name": "Bench B", "slug": f"bench-b-{tb.hex[:6]}"},
    ]
    users = [
        {"id": uuid.uuid4(), "email": f"bench{i}@example.com", "display_name": f"Bench {i}", "status": "active"}
        for i in range(n_users + n_users // 10)
    ]
    a_users, b_users = users[:n_users], users[n_users:]
    memberships = [{"id": uuid.uuid4(), "tenant_id": ta, "user_id": u["id"], "role": "member"} for u in a_users]
    memberships += [{"id": uuid.uuid4(), "tenant_id": tb, "user_id": u["id"], "role": "member"} for u in b_users]
    creator = a_users[0]["id"]
    workspaces = [
        {"id": uuid.uuid4(), "tenant_id": ta, "name": f"ws{i}", "slug": f"ws{i}", "created_by": creator}
        for i in range(n_ws)
    ]
    workspaces += [
        {"id": uuid.uuid4(), "tenant_id": tb, "name": f"b-ws{i}", "slug": f"b-ws{i}", "created_by": b_users[0]["id"]}
        for i in range(2)
    ]
    ws_a, ws_b = workspaces[:n_ws], workspaces[n_ws:]
    members: list[dict[str, Any]] = []
    seen_m: set[tuple[Any, Any]] = set()
    bench_user = a_users[1]["id"]
    for u in a_users:
        for w in rng.sample(ws_a, rng.choice([1, 1, 2, 3])):
            if (w["id"], u["id"]) not in seen_m:
                seen_m.add((w["id"], u["id"]))
                members.append(
                    {
                        "id": uuid.uuid4(),
                        "tenant_id": ta,
                        "workspace_id": w["id"],
                        "user_id": u["id"],
                        "role": rng.choice(["member"] * 6 + ["guest"] * 2 + ["admin", "owner"]),
                    }
                )
    # the bench user: member of exactly two workspaces
    members = [m for m in members if m["user_id"] != bench_user]
    for w in ws_a[:2]:
        members.append(
            {"id": uuid.uuid4(), "tenant_id": ta, "workspace_id": w["id"], "user_id": bench_user, "role": "member"}
        )
    for u in b_users:
        members.append(
            {"id": uuid.uuid4(), "tenant_id": tb, "workspace_id": ws_b[0]["id"], "user_id": u["id"], "role": "member"}
        )
    groups = [{"id": uuid.uuid4(), "tenant_id": ta, "name": f"g{i}", "created_by": creator} for i in range(n_groups)]
    gmembers: list[dict[str, Any]] = []
    for g in groups:
        for u in rng.sample(a_users, rng.randint(5, 30)):
            gmembers.append({"id": uuid.uuid4(), "tenant_id": ta, "group_id": g["id"], "user_id": u["id"]})
    for g in groups[:2]:
        if not any(m["group_id"] == g["id"] and m["user_id"] == bench_user for m in gmembers):
            gmembers.append({"id": uuid.uuid4(), "tenant_id": ta, "group_id": g["id"], "user_id": bench_user})

    kbs: list[dict[str, Any]] = []
    for i in range(n_kbs + n_kbs // 10):
        in_a = i < n_kbs
        w = rng.choice(ws_a) if in_a else rng.choice(ws_b)
        kbs.append(
            {
                "id": uuid.uuid4(),
                "tenant_id": ta if in_a else tb,
                "workspace_id": w["id"],
                "title": f"KB {i}",
                "slug": f"kb{i}",
                "visibility": rng.choices(["private", "workspace", "public"], [45, 40, 15])[0],
                "status": "active",
                "settings": {},
                "created_by": creator,
                "created_at": now - timedelta(days=500),
                "updated_at": now - timedelta(days=500),
            }
        )
    collabs: list[dict[str, Any]] = []
    seen_c: set[tuple[Any, Any]] = set()

    def grant(otype: str, oid: uuid.UUID, tenant: uuid.UUID, stype: str, sid: uuid.UUID, role: str) -> None:
        if (oid, sid) in seen_c:
            return
        seen_c.add((oid, sid))
        collabs.append(
            {
                "id": uuid.uuid4(),
                "tenant_id": tenant,
                "object_type": otype,
                "object_id": oid,
                "subject_type": stype,
                "subject_id": sid,
                "role": role,
                "source": "direct",
            }
        )

    for kb in kbs:
        pool_users = a_users if kb["tenant_id"] == ta else b_users
        grant("knowledge_base", kb["id"], kb["tenant_id"], "user", rng.choice(pool_users)["id"], "owner")
        for u in rng.sample(pool_users, min(len(pool_users), rng.randint(5, 20))):
            grant(
                "knowledge_base",
                kb["id"],
                kb["tenant_id"],
                "user",
                u["id"],
                rng.choice(["viewer"] * 5 + ["editor"] * 2 + ["manager"]),
            )
        if kb["tenant_id"] == ta:
            for g in rng.sample(groups, rng.randint(0, 3)):
                grant("knowledge_base", kb["id"], ta, "group", g["id"], rng.choice(["viewer", "viewer", "editor"]))
    for kb in rng.sample(kbs[:n_kbs], 10):  # the bench user's own grants
        grant("knowledge_base", kb["id"], ta, "user", bench_user, rng.choice(["viewer", "viewer", "editor"]))

    docs: list[dict[str, Any]] = []
    versions: list[dict[str, Any]] = []
    chunks: list[dict[str, Any]] = []
    texts: dict[str, tuple[int, int]] = {}
    folders: dict[Any, list[uuid.UUID]] = {kb["id"]: [] for kb in kbs}
    remaining = n_chunks
    t0 = now - timedelta(days=400)
    i = -1
    while remaining > 0:
        i += 1
        kb = kbs[rng.randrange(len(kbs))]
        parent = rng.choice(folders[kb["id"]]) if folders[kb["id"]] and rng.random() < 0.7 else None
        if rng.random() < 0.1:  # a folder
            fid = uuid.uuid4()
            docs.append(
                {
                    "id": fid,
                    "tenant_id": kb["tenant_id"],
                    "workspace_id": kb["workspace_id"],
                    "knowledge_base_id": kb["id"],
                    "parent_id": parent,
                    "type": "folder",
                    "title": " ".join(vocab.words(2)),
                    "slug": f"f{i}",
                    "status": "published",
                    "permission_mode": "inherit",
                    "visibility": None,
                    "created_by": creator,
                    "updated_by": creator,
                    "index_status": "indexed",
                }
            )
            folders[kb["id"]].append(fid)
            continue
        did, vid = uuid.uuid4(), uuid.uuid4()
        custom = rng.random() < 0.03
        updated = t0 + timedelta(minutes=rng.randrange(400 * 24 * 60))
        title = " ".join(vocab.words(rng.randint(2, 5)))
        k = min(remaining, rng.randint(1, 2 * chunks_per_doc - 1))
        remaining -= k
        docs.append(
            {
                "id": did,
                "tenant_id": kb["tenant_id"],
                "workspace_id": kb["workspace_id"],
                "knowledge_base_id": kb["id"],
                "parent_id": parent,
                "type": "page",
                "title": title,
                "slug": f"d{i}",
                "status": rng.choices(["published", "draft", "archived", "deleted"], [85, 10, 3, 2])[0],
                "permission_mode": "custom" if custom else "inherit",
                "visibility": rng.choice([None, "private", "workspace", "public"]) if custom else None,
                "current_version_id": None,
                "meta": {"source": rng.choice(["wiki", "import", "api"])},
                "tags": rng.sample(["guide", "api", "ops", "faq", "policy", "release"], rng.randint(0, 2)),
                "created_by": creator,
                "updated_by": creator,
                "index_status": "indexed",
                "indexed_version_id": vid,
                "created_at": updated - timedelta(days=3),
                "updated_at": updated,
            }
        )
        if custom:
            pool_users = a_users if kb["tenant_id"] == ta else b_users
            for u in rng.sample(pool_users, rng.randint(1, 6)):
                grant("document", did, kb["tenant_id"], "user", u["id"], rng.choice(["viewer", "editor", "manager"]))
        bodies = []
        for j in range(k):
            base = rng.randrange(pool_size)
            body = pool[base] + " " + vocab.sentence(rng.randint(8, 16))
            heading = [title, f"{' '.join(vocab.words(2))} {j}"]
            cid = uuid.uuid4()
            chunks.append(
                {
                    "id": cid,
                    "tenant_id": kb["tenant_id"],
                    "workspace_id": kb["workspace_id"],
                    "knowledge_base_id": kb["id"],
                    "document_id": did,
                    "version_id": vid,
                    "ordinal": j,
                    "heading_path": heading,
                    "content_text": body,
                    "content_markdown": body,
                    "token_count": count_tokens(body),
                    "meta": {"chunker": CHUNKER_VERSION},
                    "created_at": updated,
                }
            )
            texts[index_text(title, heading, body)] = (base, rng.randrange(2**31))
            bodies.append(f"## {heading[1]}\n\n{body}")
        md = f"# {title}\n\n" + "\n\n".join(bodies) + "\n"
        versions.append(
            {
                "id": vid,
                "tenant_id": kb["tenant_id"],
                "document_id": did,
                "version_no": 1,
                "title": title,
                "markdown": md,
                "markdown_hash": hashlib.sha256(md.encode()).hexdigest(),
                "source_type": "import",
                "created_by": creator,
                "created_at": updated,
            }
        )
    with engine.begin() as conn:
        for model, rows in (
            (Tenant, tenants),
            (User, users),
            (TenantMembership, memberships),
            (Workspace, workspaces),
            (WorkspaceMember, members),
            (Group, groups),
            (GroupMember, gmembers),
            (KnowledgeBase, kbs),
        ):
            _insert(conn, model, rows)
        # folders first (parents), then pages; current_version_id after the versions exist
        for d in docs:
            d.setdefault("meta", {})
            d.setdefault("tags", [])
        _insert(
            conn,
            Document,
            [
                {k: v for k, v in d.items() if k != "meta"} | {"metadata": d["meta"]}
                for d in docs
                if d["type"] == "folder"
            ],
        )
        _insert(
            conn,
            Document,
            [
                {k: v for k, v in d.items() if k != "meta"} | {"metadata": d["meta"]}
                for d in docs
                if d["type"] == "page"
            ],
        )
        _insert(conn, DocumentVersion, versions)
        from sqlalchemy import text as sql

        conn.execute(
            sql("UPDATE documents d SET current_version_id = v.id FROM document_versions v WHERE v.document_id = d.id")
        )
        _insert(
            conn, DocumentChunk, [{k: v for k, v in c.items() if k != "meta"} | {"metadata": c["meta"]} for c in chunks]
        )
        _insert(conn, Collaborator, collabs)
        conn.execute(sql("ANALYZE"))
    w = World(
        tenant_a=ta,
        bench_user=bench_user,
        n_docs=sum(1 for d in docs if d["type"] == "page"),
        n_chunks=len(chunks),
        texts=texts,
        pool=pool,
    )
    w.stats = {
        "users": len(users),
        "workspaces": len(workspaces),
        "groups": len(groups),
        "knowledge_bases": len(kbs),
        "documents": len(docs),
        "pages": w.n_docs,
        "custom_documents": sum(d["permission_mode"] == "custom" for d in docs),
        "collaborators": len(collabs),
    }
    w.vocab = vocab  # type: ignore[attr-defined]
    return w


# --- the vector endpoint -----------------------------------------------------------------------------


def embed_pool(real: Any, pool: Sequence[str]) -> tuple[np.ndarray, float]:
    """The base passages' vectors, computed once in bulk with the real model; and its rate."""
    log(f"embedding {len(pool)} base passages with {MODEL} ...")
    t = time.perf_counter()
    base = np.vstack([real.encode(list(pool[i : i + 64])) for i in range(0, len(pool), 64)])
    rate = len(pool) / (time.perf_counter() - t)
    log(f"  {rate:.0f} passages/s in-process; 100k chunks would take ~{100_000 / rate / 60:.0f} min through the model")
    return base, rate


class PooledEncoder:
    """Chunk texts -> their base passage's vector plus deterministic noise (normalised); texts
    given in ``cache`` -> those vectors; anything else -> the real model, loaded on first need."""

    dim = DIM

    def __init__(
        self,
        texts: dict[str, tuple[int, int]],
        base: np.ndarray,
        cache: dict[str, np.ndarray] | None = None,
        noise: float = 0.08,
        counter: Path | None = None,
    ) -> None:
        self.texts, self.base, self.noise = texts, base, noise
        self.cache = dict(cache or {})
        self.real: Any = None
        self.model_texts = 0
        self.counter = counter

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        unknown: list[int] = []
        for i, t in enumerate(texts):
            hit = self.texts.get(t)
            if hit is not None:
                b, seed = hit
                v = self.base[b] + self.noise * np.random.default_rng(seed).standard_normal(self.dim).astype(
                    np.float32
                ) / np.sqrt(self.dim)
                out[i] = v / np.linalg.norm(v)
            elif t in self.cache:
                out[i] = self.cache[t]
            else:
                unknown.append(i)
        if unknown:
            if self.real is None:
                from openkb.embedder.models import load_model

                self.real = load_model(MODEL, threads=min(4, os.cpu_count() or 1))
            vecs = self.real.encode([texts[i] for i in unknown])
            self.model_texts += len(unknown)
            if self.counter is not None:
                self.counter.write_text(str(self.model_texts))
            for i, v in zip(unknown, vecs):
                self.cache[texts[i]] = v
                out[i] = v
        return out


def serve_endpoint(workdir: Path, port: int) -> None:
    """``--serve-endpoint``: the bench's embedding endpoint as its own process (like the
    appliance's embedder), so its work never competes with the timed process for the GIL."""
    from openkb.embedder.models import REGISTRY, LoadedModel
    from openkb.embedder.server import make_server

    with open(workdir / "texts.pkl", "rb") as f:
        texts = pickle.load(f)
    with open(workdir / "cache.pkl", "rb") as f:
        cache = pickle.load(f)
    enc = PooledEncoder(texts, np.load(workdir / "base.npy"), cache, counter=workdir / "model_texts.txt")
    server = make_server(LoadedModel(info=REGISTRY[MODEL], encoder=enc, load_seconds=0.0), "127.0.0.1", port)
    server.serve_forever(poll_interval=0.2)


def start_endpoint(
    workdir: Path, texts: dict[str, tuple[int, int]], base: np.ndarray, cache: dict[str, np.ndarray]
) -> tuple[str, subprocess.Popen[bytes]]:
    import httpx

    from openkb.runtime.embedded import free_port

    workdir.mkdir(parents=True, exist_ok=True)
    np.save(workdir / "base.npy", base)
    with open(workdir / "texts.pkl", "wb") as f:
        pickle.dump(texts, f, protocol=pickle.HIGHEST_PROTOCOL)
    with open(workdir / "cache.pkl", "wb") as f:
        pickle.dump(cache, f, protocol=pickle.HIGHEST_PROTOCOL)
    (workdir / "model_texts.txt").write_text("0")
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve-endpoint", str(workdir), "--port", str(port)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the bench embedding endpoint did not start")
        time.sleep(0.2)
    return url + "/v1", proc


def model_texts(workdir: Path) -> int:
    try:
        return int((workdir / "model_texts.txt").read_text() or 0)
    except (OSError, ValueError):
        return 0


# --- environment ------------------------------------------------------------------------------------


@dataclass
class Bench:
    home: Path
    settings: Any
    services: Any
    ctx: Any


def start_services(
    home: Path, embedder_url: str | None, components: tuple[str, ...] = ("postgresql", "milvus")
) -> Bench:
    os.environ["OPENKB_HOME"] = str(home)
    for var in ("DATABASE_URL", "MILVUS_URI", "REDIS_URL"):
        os.environ.pop(var, None)
    if embedder_url:
        os.environ["OPENKB_EMBEDDER_URL"] = embedder_url
    from openkb.config import Settings, reset_settings_cache
    from openkb.context import AppContext
    from openkb.migrate import upgrade
    from openkb.runtime.embedded import EmbeddedServices

    reset_settings_cache()
    settings = Settings()
    svc = EmbeddedServices(settings, components)
    ep = svc.start()
    upgrade(ep.database_url)
    return Bench(home, settings, svc, AppContext.build(settings, ep))


def stop_services(b: Bench) -> None:
    from openkb.db import dispose_engines

    b.ctx.close()
    dispose_engines()
    b.services.stop()


def fill_collection(
    b: Bench, embedder_url: str, *, name: str = "bench", switch: bool = True, batch_size: int = 512, version: int = 1
) -> tuple[Any, float]:
    """The embedded default's collection shape, filled by OpenKB's rebuild. Returns (job, seconds)."""
    from openkb.db import session_scope
    from openkb.indexing.profiles import insert_profile
    from openkb.indexing.profiles_spec import make_profile
    from openkb.indexing.rebuild import run_rebuild, start_rebuild
    from openkb.permissions.principal import Principal

    spec = make_profile(model_name=MODEL, dim=DIM, base_url=embedder_url, name=name, version=version)
    with session_scope(b.ctx.engine) as s:
        insert_profile(s, spec)
        job = start_rebuild(b.ctx, s, Principal.system(), name, switch=switch)
    last = {"t": time.perf_counter(), "n": 0}
    t0 = time.perf_counter()

    def progress(n: int, total: int) -> None:
        if time.perf_counter() - last["t"] > 10 or n == total:
            rate = (n - last["n"]) / (time.perf_counter() - last["t"])
            log(f"  rebuild {n}/{total} chunks ({rate:,.0f}/s)")
            last.update(t=time.perf_counter(), n=n)

    phases: dict[str, float] = {}

    def phase(p: str) -> None:
        phases[p] = time.perf_counter() - t0
        log(f"  rebuild phase: {p}")

    done = run_rebuild(b.ctx, job.id, batch_size=batch_size, on_progress=progress, on_phase=phase)
    b.phases = phases  # type: ignore[attr-defined]
    return done, time.perf_counter() - t0


# --- timing -----------------------------------------------------------------------------------------


def pct(xs: Sequence[float], p: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def make_queries(w: World, n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    vocab: Vocab = w.vocab  # type: ignore[attr-defined]
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out.append(" ".join(vocab.words(rng.randint(2, 4))))
        elif kind == 1:
            base = w.pool[rng.randrange(len(w.pool))].split()
            start = rng.randrange(max(1, len(base) - 5))
            out.append(" ".join(base[start : start + rng.randint(3, 5)]))
        else:
            out.append(" ".join(vocab.words(1, zh_share=1.0) + vocab.words(2, zh_share=0.0)))
    return out


def raw_search(client: Any, collection: str, query: str, limit: int, per_route: int) -> list[Any]:
    from pymilvus import AnnSearchRequest, RRFRanker

    from openkb.indexing import milvus as mv
    from openkb.retrieval.service import OUTPUT_FIELDS

    ef = max(getattr(mv, "HNSW_EF", 64), per_route)  # exactly what milvus.hybrid_search sends
    reqs = [
        AnnSearchRequest(
            data=[query],
            anns_field=mv.DENSE_FIELD,
            limit=per_route,
            param={"metric_type": "COSINE", "params": {"ef": ef}},
        ),
        AnnSearchRequest(data=[query], anns_field=mv.SPARSE_FIELD, limit=per_route, param={"metric_type": "BM25"}),
    ]
    return client.hybrid_search(collection, reqs, ranker=RRFRanker(60), limit=limit, output_fields=list(OUTPUT_FIELDS))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="chunks to build")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--pool", type=int, default=1000, help="distinct base passages embedded by the model")
    ap.add_argument("--home", type=Path, default=None, help="working directory (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    ap.add_argument("--serve-endpoint", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_endpoint is not None:
        serve_endpoint(args.serve_endpoint, args.port)
        return 0
    home = args.home or Path(tempfile.mkdtemp(prefix="openkb-bench-search-"))
    result: dict[str, Any] = {"n_chunks": args.n}
    try:
        from openkb.embedder.models import load_model

        log(f"home {home}; loading {MODEL}")
        real = load_model(MODEL, threads=min(4, os.cpu_count() or 1))
        b = start_services(home, None)
        log(f"building the permission world with {args.n} chunks ...")
        t = time.perf_counter()
        w = build_world(b.ctx.engine, args.n, pool_size=args.pool)
        log(f"  {w.stats} in {time.perf_counter() - t:.1f}s")
        base, rate = embed_pool(real, w.pool)
        queries = make_queries(w, args.queries)
        first_query = "权限 检索 latency " + " ".join(w.vocab.words(2))  # type: ignore[attr-defined]
        extra = [*queries, first_query, "warm up 预热"]
        cache = dict(zip(extra, real.encode(extra)))  # query vectors: the real model, before timing
        url, server = start_endpoint(home / "endpoint", w.texts, base, cache)
        log("filling the collection through OpenKB's rebuild (switch on success) ...")
        job, secs = fill_collection(b, url)
        result.update(
            rebuild_seconds=round(secs, 1),
            rebuild_chunks_per_s=round(w.n_chunks / secs, 1),
            embedding_rate_passages_per_s=round(rate, 1),
        )
        log(f"  rebuild {job.status}: {job.processed_chunks} chunks in {secs:.1f}s")
        collection = job.target_collection

        log("restarting PostgreSQL and Milvus (cold collection), then warm_active as `openkb up` does ...")
        stop_services(b)
        b = start_services(home, url)
        from sqlmodel import Session

        from openkb.db import session_scope
        from openkb.indexing.service import warm_active
        from openkb.permissions import Principal
        from openkb.retrieval import search

        t = time.perf_counter()
        warm = warm_active(b.ctx)
        result["warm_ms"] = round((time.perf_counter() - t) * 1000)
        log(f"  warm_active: {warm} in {result['warm_ms']} ms")
        principal = Principal.user(w.bench_user, w.tenant_a)
        engine = b.ctx.engine
        t = time.perf_counter()
        with Session(engine) as s:
            first = search(b.ctx, s, principal, first_query, top_k=args.top_k)
        result["first_search_ms"] = round((time.perf_counter() - t) * 1000, 1)
        log(f"  first search after warm-up: {result['first_search_ms']} ms ({len(first)} results)")

        client = b.ctx.milvus
        limit, per_route = args.top_k * 3, max(args.top_k * 3 * 4, 40)
        for q in queries[:5]:  # steady state for both paths
            raw_search(client, collection, q, limit, per_route)
            with Session(engine) as s:
                search(b.ctx, s, principal, q, top_k=args.top_k)
        model_texts_before = model_texts(home / "endpoint")
        ours: list[float] = []
        raw: list[float] = []
        got: list[int] = []
        for i, q in enumerate(queries):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for which in order:
                t = time.perf_counter()
                if which == 0:
                    with Session(engine) as s:
                        res = search(b.ctx, s, principal, q, top_k=args.top_k)
                    ours.append((time.perf_counter() - t) * 1000)
                    got.append(len(res))
                else:
                    raw_search(client, collection, q, limit, per_route)
                    raw.append((time.perf_counter() - t) * 1000)
        # what the user can see, for context
        with session_scope(engine) as s:
            from openkb.permissions import readable_scope

            scope = readable_scope(s, principal)
            filt = scope.to_milvus_filter({"scope_kb": "knowledge_base_id"})
        from openkb.indexing.milvus import count_rows

        visible = count_rows(client, collection, f"({filt}) and is_current == true")
        result.update(
            openkb_p50_ms=round(pct(ours, 0.5), 1),
            openkb_p95_ms=round(pct(ours, 0.95), 1),
            raw_p50_ms=round(pct(raw, 0.5), 1),
            raw_p95_ms=round(pct(raw, 0.95), 1),
            ratio=round(pct(ours, 0.95) / pct(raw, 0.95), 2),
            ratio_p50=round(pct(ours, 0.5) / pct(raw, 0.5), 2),
            queries=len(queries),
            top_k=args.top_k,
            mean_results=round(statistics.mean(got), 1),
            prefilter_rows_visible=visible,
            prefilter_share=round(visible / max(1, w.n_chunks), 3),
            model_texts_during_timing=model_texts(home / "endpoint") - model_texts_before,
            world=w.stats,
            load_avg=round(os.getloadavg()[0], 2),
            collection=collection,
        )
        print(
            f"\nn_chunks={args.n}  visible to the bench user by prefilter: {visible} ({result['prefilter_share']:.0%})"
        )
        print(
            f"(a) openkb.retrieval.search  p50 {result['openkb_p50_ms']:.1f} ms  p95 {result['openkb_p95_ms']:.1f} ms"
        )
        print(f"(b) raw hybrid_search        p50 {result['raw_p50_ms']:.1f} ms  p95 {result['raw_p95_ms']:.1f} ms")
        print(
            f"ratio p95 {result['ratio']}  (p50 {result['ratio_p50']}); first search after warm-up "
            f"{result['first_search_ms']} ms; load average {result['load_avg']}"
        )
        stop_services(b)
        server.terminate()
        server.wait(10)
    finally:
        if not args.keep and args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
