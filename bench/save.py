"""What a save costs on top of the Markdown work, and what the tree of a big knowledge base costs.

One run, on an embedded PostgreSQL (pgserver) started in a temporary OPENKB_HOME and migrated
with Alembic:

* ``validate_and_normalize()`` (what a save runs: one parse, the dialect check, the normalizer)
  alone on a 10 KB and a 100 KB mixed Chinese/English document
  (the same generator as ``bench/markdown_bench.py``), and ``parse()`` alone;
* a full save of the same documents through ``openkb.content.versions.save_version``: permission
  check, limits, hash, validation, normalization, row lock, new version, pointer move, change
  row, commit, ``index_document`` enqueued after commit (into a recording queue). Each save
  changes one line so none is ``unchanged``. "save minus Markdown alone" subtracts the
  interleaved stand-alone validate+normalize of the same text; "save minus its own Markdown
  step" subtracts the validate+normalize timed inside that very save (what the save adds:
  hashing, permission check, lock, version row, change row, commit, enqueue);
* ``openkb.content.tree.get_tree`` of a knowledge base with 5,000 documents (100 folders in two
  levels, pages under them) for a workspace member, i.e. with the permission batch decision.

The process freezes its heap after setup (``openkb.runtime.memory.freeze_startup_heap``), as
the API server and the worker do once started, so collections walk only what requests allocate.

Targets: a save adds <= 15 ms to the Markdown work; a 10 KB save p95 <= 50 ms; the 5,000-document
tree p95 <= 100 ms. Run: ``python bench/save.py``; the last line is a JSON summary.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_HOME = tempfile.mkdtemp(prefix="openkb-bench-save-")
os.environ["OPENKB_HOME"] = _HOME
os.environ["OPENKB_ENV"] = "test"
for _v in ("DATABASE_URL", "MILVUS_URI", "REDIS_URL", "S3_ENDPOINT", "SMTP_HOST"):
    os.environ.pop(_v, None)

from sqlalchemy import text  # noqa: E402
from sqlmodel import Session  # noqa: E402

from bench.markdown_bench import build_document  # noqa: E402
from openkb.config import Settings, reset_settings_cache  # noqa: E402
from openkb.content import Actor, documents, tree, versions  # noqa: E402
from openkb.db import get_engine  # noqa: E402
from openkb.jobs import RecordingQueue, set_queue  # noqa: E402
from openkb.markdown import validate_and_normalize  # noqa: E402
from openkb.markdown.parser import parse  # noqa: E402
from openkb.migrate import upgrade  # noqa: E402
from openkb.models import (  # noqa: E402
    Collaborator,
    KnowledgeBase,
    Tenant,
    TenantMembership,
    User,
    Workspace,
    WorkspaceMember,
)
from openkb.permissions import Principal  # noqa: E402
from openkb.runtime.embedded import EmbeddedServices  # noqa: E402
from openkb.runtime.memory import freeze_startup_heap  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def fmt(name: str, vals: list[float]) -> str:
    return f"  {name:<34} p50 {statistics.median(vals):7.2f} ms   p95 {pct(vals, 0.95):7.2f} ms   (n={len(vals)})"


def seed_world(engine) -> dict:
    with Session(engine, expire_on_commit=False) as s:
        t = Tenant(name="bench", slug=f"bench-{uuid.uuid4().hex[:6]}")
        s.add(t)
        s.flush()
        owner = User(email=f"owner-{uuid.uuid4().hex[:6]}@bench.local", display_name="Owner", status="active")
        member = User(email=f"member-{uuid.uuid4().hex[:6]}@bench.local", display_name="Member", status="active")
        s.add_all([owner, member])
        s.flush()
        s.add_all([TenantMembership(tenant_id=t.id, user_id=u.id, role="member") for u in (owner, member)])
        ws = Workspace(tenant_id=t.id, name="Bench", slug="bench", created_by=owner.id)
        s.add(ws)
        s.flush()
        s.add_all(
            [
                WorkspaceMember(tenant_id=t.id, workspace_id=ws.id, user_id=owner.id, role="owner"),
                WorkspaceMember(tenant_id=t.id, workspace_id=ws.id, user_id=member.id, role="member"),
            ]
        )
        kbs = []
        for title in ("saves", "tree"):
            kb = KnowledgeBase(
                tenant_id=t.id,
                workspace_id=ws.id,
                title=title,
                slug=title,
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
            kbs.append(kb)
        s.commit()
        return {"tenant": t, "owner": owner, "member": member, "ws": ws, "kb": kbs[0], "tree_kb": kbs[1]}


def seed_tree(engine, world: dict, n: int = 5000) -> None:
    """20 top folders, 80 sub-folders under them, pages spread under the sub-folders (bulk SQL)."""
    kb, owner = world["tree_kb"], world["owner"]
    rows = []
    tops = [uuid.uuid4() for _ in range(20)]
    subs = [(uuid.uuid4(), tops[i % 20]) for i in range(80)]
    for i, fid in enumerate(tops):
        rows.append((fid, None, "folder", f"目录 Folder {i}", i))
    for i, (fid, parent) in enumerate(subs):
        rows.append((fid, parent, "folder", f"子目录 Sub {i}", i))
    for i in range(n - len(rows)):
        rows.append((uuid.uuid4(), subs[i % len(subs)][0], "page", f"文档 Page {i}", i))
    custom = {rows[-1][0], rows[-2][0]}  # a couple of custom-mode pages (hidden from the member)
    with Session(engine) as s:
        s.execute(
            text(
                "INSERT INTO documents (id, tenant_id, workspace_id, knowledge_base_id, parent_id, type, title, slug, "
                "status, permission_mode, visibility, sort_order, metadata, tags, index_status, created_by, updated_by) "
                "VALUES (:id, :t, :w, :kb, :p, :type, :title, :slug, 'published', :mode, :vis, :so, '{}'::jsonb, "
                "'{}'::text[], 'indexed', :u, :u)"
            ),
            [
                {
                    "id": r[0],
                    "t": kb.tenant_id,
                    "w": kb.workspace_id,
                    "kb": kb.id,
                    "p": r[1],
                    "type": r[2],
                    "title": r[3],
                    "slug": r[0].hex[:12],
                    "mode": "custom" if r[0] in custom else "inherit",
                    "vis": "private" if r[0] in custom else None,
                    "so": r[4],
                    "u": owner.id,
                }
                for r in rows
            ],
        )
        s.commit()


def bench_saves(engine, world: dict, label: str, size: int, repeat: int) -> dict[str, list[float]]:
    owner = world["owner"]
    principal = Principal.user(owner, world["tenant"].id)
    doc_md = build_document(size)
    with Session(engine, expire_on_commit=False) as s:
        doc, v = documents.create_document(
            s, Actor.of(principal), knowledge_base_id=world["kb"].id, title=f"Bench {label}", markdown=doc_md
        )
        s.commit()
        base = v.id
    variants = [doc_md + f"\n修订 revision {i} 版本\n" for i in range(repeat + 1)]

    def markdown_only(md: str) -> str:  # exactly the Markdown step a save runs (one parse)
        return validate_and_normalize(md)

    md_times, parse_times, save_times, overhead, beyond = [], [], [], [], []
    inner: list[float] = []
    real_prepare = versions.prepare_markdown

    def timed_prepare(*a, **kw):  # the Markdown work inside the save, timed where it happens
        t = time.perf_counter()
        try:
            return real_prepare(*a, **kw)
        finally:
            inner.append((time.perf_counter() - t) * 1000)

    versions.prepare_markdown = timed_prepare
    markdown_only(variants[0])
    parse(variants[0])
    # interleaved, so both sides see the same machine load
    for i, md in enumerate(variants[1:]):
        t0 = time.perf_counter()
        parse(md)
        parse_times.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        markdown_only(md)
        md_ms = (time.perf_counter() - t0) * 1000
        digest = hashlib.sha256(md.encode()).hexdigest()
        t0 = time.perf_counter()
        with Session(engine, expire_on_commit=False) as s:
            res = versions.save_version(
                s,
                Actor.of(principal),
                doc.id,
                base_version_id=base,
                title=f"Bench {label}",
                markdown=md,
                markdown_hash=digest,
            )
            s.commit()
        elapsed = (time.perf_counter() - t0) * 1000
        assert res.status == "created", res.status
        base = res.version.id
        if i > 0:  # the first save warms the connection pool and statement caches
            md_times.append(md_ms)
            save_times.append(elapsed)
            overhead.append(elapsed - md_ms)
            beyond.append(elapsed - inner[-1])
    versions.prepare_markdown = real_prepare
    return {
        "markdown": md_times,
        "parse": parse_times,
        "save": save_times,
        "overhead": overhead,
        "beyond": beyond,
        "bytes": [len(doc_md.encode())],
    }


def bench_tree(engine, world: dict, repeat: int = 40) -> tuple[list[float], int]:
    member = Principal.user(world["member"], world["tenant"].id)
    times, n = [], 0
    for i in range(repeat + 2):
        with Session(engine) as s:  # a fresh session per fetch, like a request
            t0 = time.perf_counter()
            items = tree.get_tree(s, member, world["tree_kb"].id)
            elapsed = (time.perf_counter() - t0) * 1000
        n = len(items)
        if i >= 2:
            times.append(elapsed)
    return times, n


def main() -> None:
    settings = Settings()
    svc = EmbeddedServices(settings, components=("postgresql",))
    ep = svc.start()
    try:
        upgrade(ep.database_url)
        os.environ["DATABASE_URL"] = ep.database_url
        reset_settings_cache()
        engine = get_engine(ep.database_url)
        queue = RecordingQueue()
        set_queue(queue)
        world = seed_world(engine)
        freeze_startup_heap()  # as a started server does
        summary: dict[str, float] = {"cpus": os.cpu_count() or 0, "loadavg_1m": round(os.getloadavg()[0], 2)}
        for label, size, repeat in (("10k", 10_000, 60), ("100k", 100_000, 30)):
            r = bench_saves(engine, world, label, size, repeat)
            print(f"{label}: {r['bytes'][0]} bytes of mixed Chinese/English Markdown")
            print(fmt("parse() alone", r["parse"]))
            print(fmt("validate_and_normalize() alone", r["markdown"]))
            print(fmt("save (full, committed, enqueued)", r["save"]))
            print(fmt("save minus Markdown alone", r["overhead"]))
            print(fmt("save minus its own Markdown step", r["beyond"]))
            over50, over95 = statistics.median(r["overhead"]), pct(r["overhead"], 0.95)
            summary[f"save_db{label}_p50_ms"] = round(statistics.median(r["beyond"]), 2)
            summary[f"save_db{label}_p95_ms"] = round(pct(r["beyond"], 0.95), 2)
            summary[f"save{label}_p50_ms"] = round(statistics.median(r["save"]), 2)
            summary[f"save{label}_p95_ms"] = round(pct(r["save"], 0.95), 2)
            summary[f"markdown{label}_p95_ms"] = round(pct(r["markdown"], 0.95), 2)
            summary[f"parse{label}_p95_ms"] = round(pct(r["parse"], 0.95), 2)
            # the normalizer's own speed: the Markdown step of a save against a bare parse, same run
            summary[f"markdown_to_parse{label}_p95_ratio"] = round(pct(r["markdown"], 0.95) / pct(r["parse"], 0.95), 2)
            summary[f"save_overhead{label}_p50_ms"] = round(over50, 2)
            summary[f"save_overhead{label}_p95_ms"] = round(over95, 2)
        jobs = [j for j in queue.jobs if j[0] == "index_document"]
        print(f"index_document jobs enqueued after commit: {len(jobs)}")
        seed_tree(engine, world)
        freeze_startup_heap()
        times, n = bench_tree(engine, world)
        print(f"tree of a 5,000-document knowledge base (member; {n} visible items)")
        print(fmt("get_tree()", times))
        summary["tree5000_p50_ms"] = round(statistics.median(times), 2)
        summary["tree5000_p95_ms"] = round(pct(times, 0.95), 2)
        summary["tree5000_visible"] = n
        print(json.dumps(summary))
    finally:
        from openkb.db import dispose_engines

        dispose_engines()
        svc.stop()
        shutil.rmtree(_HOME, ignore_errors=True)


if __name__ == "__main__":
    main()
