"""Rebuild + alias switch + rollback on real PostgreSQL + Milvus Lite, with edits during the
rebuild, a rebuild SIGKILLed mid-way and re-run, verify/repair, the admin routes and the CLI.

New profiles here are BM25-only (no embedding calls, so rebuilds of the whole test database take
seconds); the active default profile (dense + BM25) is restored by the rollback at the end of each
test that switches.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlmodel import Session, select

import openkb.jobs as jobs
from openkb.accounts.tokens import issue_pat
from openkb.db import session_scope
from openkb.errors import Conflict
from openkb.indexing import milvus as mv
from openkb.indexing import rebuild, service
from openkb.indexing.lexical import LEXICAL_FIELDS, LEXICAL_V1, LEXICAL_V2
from openkb.indexing.profiles import ProfileInput, create_profile, current_target, get_profile, spec_of
from openkb.models import AuditLog, Document, IndexRebuildJob
from openkb.permissions.principal import Principal
from openkb.retrieval import forget_active_profile
from tests.factories import make_doc
from tests.indexing.test_index_e2e import Env, uniq

pytestmark = pytest.mark.usefixtures("worker")
ROOT = Path(__file__).resolve().parents[2]
OPS = Principal.system()  # the operator at the console


@pytest.fixture(scope="module")
def env(app_ctx, engine):
    from workers.queue import HueyQueue

    previous = jobs._queue
    jobs.set_queue(HueyQueue())
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    e = Env(app_ctx, engine)
    # a few multi-chunk documents so the rebuild has several batches of this module's own
    e.docs = [
        e.create(f"# Doc {i}\n\n" + "\n\n".join(f"para {j} {uniq('body')} " * 20 for j in range(3)) + "\n")
        for i in range(4)
    ]
    with session_scope(engine) as s:  # bulk: 60 more small pages, indexed in one sync
        more = [make_doc(s, e.kb, e.p.owner, markdown=f"# Small {i}\n\n{uniq('small')} text.\n") for i in range(60)]
        service.sync_documents(app_ctx, s, [d.id for d in more])
    yield e
    if previous is not None:  # None: nothing was installed yet; a live server started meanwhile keeps a queue
        jobs.set_queue(previous)


def new_profile(env, prefix: str = "bm25") -> str:
    with session_scope(env.engine) as s:
        p = create_profile(env.ctx, s, OPS, ProfileInput(name=f"{prefix}-{uuid.uuid4().hex[:6]}"))
        return p.name


def active(env) -> str | None:
    return current_target(env.ctx.milvus, env.alias)


def all_ids(env, collection: str) -> list[str]:
    env.ctx.milvus.flush(collection)
    return [r["id"] for r in mv.query_rows(env.ctx.milvus, collection, 'id != ""', output_fields=["id"], limit=None)]


def pg_count(env) -> int:
    with Session(env.engine) as s:
        return service.pg_chunk_count(s)


def counts_converge(env, collection: str, within: float = 60.0, gap: int = 0) -> tuple[int, int]:
    """Milvus rows of ``collection`` and PostgreSQL chunks, once they agree (or the last pair).
    The session's worker may still be indexing other modules' pages (the reconciler re-enqueues
    pending ones at its start), so the two are compared once that work settles."""
    deadline = time.monotonic() + within
    while True:
        pair = (len(all_ids(env, collection)), pg_count(env))
        if pair[1] - pair[0] == gap or time.monotonic() > deadline:
            return pair
        time.sleep(0.5)


def test_rebuild_switch_rollback_with_edits_during_the_rebuild(env):
    original = active(env)
    # Start from a complete active collection: earlier modules of the session leave pages whose
    # indexing they made fail on purpose (chunks in PostgreSQL, no rows in Milvus); production's
    # reconciler repairs those within minutes, here the test does it first so the end compares
    # only what the rebuild, switch and rollback did.
    from openkb.indexing.verify import verify

    with session_scope(env.engine) as s:
        verify(env.ctx, s, OPS, repair=True)
    milvus_rows, pg_chunks = counts_converge(env, original)
    gap = pg_chunks - milvus_rows  # 0, unless a page's data is refused by Milvus for good
    name = new_profile(env)
    a, b = env.docs[0], env.docs[1]
    old_a, new_a, c_word, d_word = uniq("olda"), uniq("newa"), uniq("cword"), uniq("dword")
    env.save(a.id, f"# A\n\n{old_a} before the rebuild.\n")
    with session_scope(env.engine) as s:
        job = rebuild.start_rebuild(env.ctx, s, OPS, name, switch=True)
    started, go = threading.Event(), threading.Event()
    box: dict = {}

    def progress(n: int, total: int) -> None:
        if not started.is_set():
            started.set()
            assert go.wait(120)

    def run() -> None:
        try:
            box["job"] = rebuild.run_rebuild(env.ctx, job.id, batch_size=16, on_progress=progress)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc
            started.set()

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(120) and "error" not in box, box
    try:
        # edits while the rebuild is mid-way: through the normal content services and worker
        env.save(a.id, f"# A\n\n{new_a} after the edit.\n")
        from openkb.content.documents import trash_document

        env.write(lambda s: trash_document(s, env.actor(), b.id))
        env.wait_rows(b.id, lambda rows: rows == [])
        c = env.create(f"# C\n\n{c_word} created during the rebuild.\n")
        assert active(env) == original  # nothing moves before the end
    finally:
        go.set()
        t.join(300)
    assert "error" not in box, box.get("error")
    assert box["job"].status == "succeeded"
    with Session(env.engine) as s:
        prof = get_profile(s, name)
    assert active(env) == prof.collection_name and prof.status == "active"
    forget_active_profile()
    ids = all_ids(env, prof.collection_name)
    assert len(ids) == len(set(ids))  # no chunk twice
    milvus_rows, pg_chunks = counts_converge(env, prof.collection_name)
    assert milvus_rows == pg_chunks
    m = env.p.member
    assert env.finds(m, new_a, a.id) and env.finds(m, c_word, c.id)
    assert not any(old_a in r.content for r in env.search(m, old_a))
    assert not env.finds(env.p.owner, env.docs[1].title, b.id)

    # an edit after the switch reaches only the new collection; rollback carries it back
    d = env.create(f"# D\n\n{d_word} after the switch.\n")
    with session_scope(env.engine) as s:
        out = rebuild.rollback(env.ctx, s, OPS)
    assert out["collection"] == original and active(env) == original
    forget_active_profile()
    assert env.finds(m, d_word, d.id) and env.finds(m, new_a, a.id)
    milvus_rows, pg_chunks = counts_converge(env, original, gap=gap)
    assert pg_chunks - milvus_rows == gap

    with session_scope(env.engine) as s:
        with pytest.raises(Conflict):
            rebuild.drop(env.ctx, s, OPS, original)  # the active one is refused
        rebuild.drop(env.ctx, s, OPS, name)
    assert not env.ctx.milvus.has_collection(prof.collection_name)


_CHILD = """
import sys, time, uuid
from openkb.config import Settings
from openkb.context import AppContext
from openkb.runtime.embedded import Endpoints
from openkb.indexing.rebuild import run_rebuild
from pathlib import Path
import os
s = Settings()
ep = Endpoints(database_url=os.environ["DATABASE_URL"], milvus_uri=os.environ["MILVUS_URI"], milvus_token=None,
               embedder_url=os.environ.get("OPENKB_EMBEDDER_URL"), queue="", home=Path(os.environ["OPENKB_HOME"]))
ctx = AppContext.build(s, ep)
run_rebuild(ctx, uuid.UUID(sys.argv[1]), batch_size=8, on_progress=lambda n, t: time.sleep(0.5))
"""


def test_rebuild_killed_midway_resumes_and_the_alias_never_moved(env):
    original = active(env)
    name = new_profile(env, "killed")
    with session_scope(env.engine) as s:
        job = rebuild.start_rebuild(env.ctx, s, OPS, name, switch=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(job.id)],
        cwd=ROOT,
        env={**os.environ},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            with Session(env.engine) as s:
                row = s.get(IndexRebuildJob, job.id)
                if row.processed_chunks >= 16:
                    break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the child rebuild made no progress"
            time.sleep(0.05)
        with session_scope(env.engine) as s:  # while it runs, a second runner is refused
            with pytest.raises(rebuild.RebuildBusy):
                rebuild.start_rebuild(env.ctx, s, OPS, name)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    with Session(env.engine) as s:
        row = s.get(IndexRebuildJob, job.id)
        assert row.status == "running" and row.last_chunk_id is not None
    assert active(env) == original
    assert not rebuild.is_alive(env.ctx, job.id)

    with session_scope(env.engine) as s:
        again = rebuild.start_rebuild(env.ctx, s, OPS, name, switch=False)
    assert again.id == job.id  # resumed, not restarted
    done = rebuild.run_rebuild(env.ctx, job.id, batch_size=256)
    assert done.status == "succeeded" and active(env) == original
    with Session(env.engine) as s:
        coll = get_profile(s, name).collection_name
    ids = all_ids(env, coll)
    assert len(ids) == len(set(ids))
    milvus_rows, pg_chunks = counts_converge(env, coll)
    assert milvus_rows == pg_chunks
    with Session(env.engine) as s:
        assert get_profile(s, name).status == "ready"  # rebuilt and healthy, not left "building"
    with session_scope(env.engine) as s:
        rebuild.drop(env.ctx, s, OPS, name)
    with Session(env.engine) as s:
        assert get_profile(s, name).status == "dropped"


def test_verify_finds_missing_extra_and_stale_rows_and_repairs_them(env):
    from openkb.indexing.verify import verify

    client, coll = env.ctx.milvus, active(env)
    doc = env.create(f"# V\n\n{uniq('verify')} one.\n\n## Two\n\n{uniq('verify')} two " + "words " * 400 + "\n")
    rows = mv.query_rows(client, coll, f'document_id == "{doc.id}"', output_fields=["id"], limit=100)
    assert len(rows) >= 2
    gone, stale = rows[0]["id"], rows[1]["id"]
    mv.delete_rows(client, coll, [gone])
    client.upsert(coll, [{"id": stale, "scope_doc": str(doc.id)}], partial_update=True)
    bogus = mv.chunk_row(
        chunk_id=uuid.uuid4(),
        tenant_id=env.p.tenant.id,
        workspace_id=env.p.workspace.id,
        knowledge_base_id=env.kb.id,
        document_id=uuid.uuid4(),
        version_id=uuid.uuid4(),
        doc_status="published",
        visibility_eff="workspace",
        content_text="ghost row",
    )
    mv.upsert_rows(client, coll, [bogus])
    with session_scope(env.engine) as s:
        rep = verify(env.ctx, s, OPS)
    assert rep["missing"] >= 1 and rep["extra"] >= 1 and rep["stale"] >= 1 and not rep["ok"]
    with session_scope(env.engine) as s:
        rep = verify(env.ctx, s, OPS, repair=True)
    assert rep["repaired"]
    client.flush(coll)
    got = {
        r["id"]: r
        for r in mv.query_rows(client, coll, f'document_id == "{doc.id}"', output_fields=["id", "scope_doc"], limit=100)
    }
    assert gone in got and got[stale]["scope_doc"] == ""
    assert mv.query_rows(client, coll, f'id == "{bogus["id"]}"', output_fields=["id"], limit=1) == []


def test_admin_routes_are_for_admins_and_refuse_keys(env, http):
    p = env.p

    def tok(user, scopes=("kb:read", "kb:search", "admin")) -> dict:
        with session_scope(env.engine) as s:
            _, plain = issue_pat(s, tenant_id=p.tenant.id, user_id=user.id, name="t", scopes=list(scopes))
        return {"Authorization": f"Bearer {plain}"}

    admin, owner = tok(p.tenant_admin), tok(p.owner, ("kb:read", "kb:search"))
    assert http.get("/api/admin/milvus/status").status_code == 401
    assert http.get("/api/admin/milvus/status", headers=owner).status_code == 403  # a KB owner: no models
    assert http.post("/api/admin/milvus/index-profiles", json={"name": "x"}, headers=owner).status_code == 403
    r = http.get("/api/admin/milvus/status", headers=admin)
    assert r.status_code == 200, r.text
    st = r.json()
    assert st["alias"] == env.alias and st["collection"] == active(env) and st["profile"]["functions"]["bm25"]
    r = http.post(
        "/api/admin/milvus/index-profiles",
        headers=admin,
        json={"model": "m", "dim": 8, "endpoint": "http://tei/v1", "params": {"api_key": "sk-live-123456789"}},
    )
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR" and "credential" in r.json()["detail"]
    r = http.post(
        "/api/admin/milvus/index-profiles",
        headers=admin,
        json={"rerank": {"provider": "cohere", "endpoint": "http://r/v1", "params": {"Authorization": "Bearer abc"}}},
    )
    assert r.status_code == 422 and "credential" in r.json()["detail"]
    name = f"api-{uuid.uuid4().hex[:6]}"
    r = http.post("/api/admin/milvus/index-profiles", headers=admin, json={"name": name})
    assert r.status_code == 201, r.text
    assert r.json()["collection"].startswith("openkb_chunks_bm25_0_v") and "key" not in json.dumps(r.json()).lower()
    assert any(x["name"] == name for x in http.get("/api/admin/milvus/index-profiles", headers=admin).json()["items"])
    r = http.post("/api/admin/milvus/rebuild-jobs", headers=admin, json={"profile": name})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    deadline = time.monotonic() + 180
    while True:
        j = http.get(f"/api/admin/milvus/rebuild-jobs/{job_id}", headers=admin).json()
        if j["status"] in ("succeeded", "failed"):
            break
        assert time.monotonic() < deadline, j
        time.sleep(0.2)
    assert j["status"] == "succeeded", j
    original = active(env)
    with Session(env.engine) as s:
        prof = get_profile(s, name)
        assert prof.status == "ready"
        # a new Lite profile takes the latest lexical transform, its collection the field of it
        assert (prof.function_metadata or {}).get("lexical") == LEXICAL_V2
        fields = {f["name"] for f in env.ctx.milvus.describe_collection(prof.collection_name)["fields"]}
        assert LEXICAL_FIELDS[LEXICAL_V2] in fields and LEXICAL_FIELDS[LEXICAL_V1] not in fields
        # one audit row per operation, written by the service (the route adds none of its own)
        assert _audits(s, "milvus.profile.create", object_id=prof.id) == 1
        assert _audits(s, "milvus.rebuild.start", job_id=job_id) == 1
    r = http.post("/api/admin/milvus/aliases/switch", headers=admin, json={"profile": name})
    assert r.status_code == 200 and r.json()["previous"] == original, r.text
    switched = r.json()
    with Session(env.engine) as s:
        rows = _audit_rows(s, "milvus.alias.switch", history_id=switched["history_id"])
        assert len(rows) == 1 and rows[0].actor_user_id == p.tenant_admin.id and rows[0].ip
    # /readyz names the collection the alias points at now, not the one warmed at start-up
    ready = http.get("/readyz").json()
    assert ready["index"]["collection"] == prof.collection_name, ready
    _wait_ready(http, prof.collection_name)  # and this process warms the new one
    r = http.post("/api/admin/milvus/aliases/switch", headers=admin, json={"rollback": True})
    assert r.status_code == 200 and r.json()["collection"] == original and active(env) == original
    assert http.get("/readyz").json()["index"]["collection"] == original
    hist = http.get("/api/admin/milvus/aliases/history", headers=admin).json()
    assert [(h["kind"], h["from"], h["to"]) for h in hist["items"][:2]] == [
        ("rollback", prof.collection_name, original),
        ("switch", original, prof.collection_name),
    ]
    assert hist["items"][0]["reverts"] == switched["history_id"]
    assert http.get("/api/admin/milvus/aliases/history", headers=owner).status_code == 403
    forget_active_profile()
    r = http.delete(f"/api/admin/milvus/index-profiles/{name}/collection", headers=admin)
    assert r.status_code == 200 and r.json()["dropped"] == prof.collection_name, r.text
    with Session(env.engine) as s:
        assert get_profile(s, name).status == "dropped"


def _audit_rows(s: Session, action: str, object_id=None, **meta) -> list:
    from sqlmodel import select

    q = select(AuditLog).where(AuditLog.action == action)
    if object_id is not None:
        q = q.where(AuditLog.object_id == object_id)
    return [r for r in s.exec(q).all() if all(r.meta.get(k) == v for k, v in meta.items())]


def _audits(s: Session, action: str, object_id=None, **meta) -> int:
    return len(_audit_rows(s, action, object_id, **meta))


def _wait_ready(http, collection: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = http.get("/readyz").json()
        if body["index"]["warmed"] and body["index"]["collection"] == collection:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.2)


def _cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ},
        timeout=120,
    )


def test_cli_status_search_as_user_and_key_refusal(env):
    word = uniq("cliword")
    doc = env.create(f"# CLI\n\n{word} from the command line.\n")
    st = _cli(["index", "status", "--json"])
    assert st.returncode == 0, st.stderr
    out = json.loads(st.stdout)
    from openkb.embedder.models import REGISTRY

    # the active profile is the embedded default: dense vectors of the local model's size
    want_dim = REGISTRY[env.ctx.settings.openkb_embedder_model].dim if env.ctx.endpoints.embedder_url else 0
    assert want_dim > 0, "the test components run the local embedder"
    assert out["collection"] == active(env) and out["pg_chunks"] >= 1 and out["profile"]["vector_dim"] == want_dim
    dense = {f["name"]: f for f in env.ctx.milvus.describe_collection(out["collection"])["fields"]}[mv.DENSE_FIELD]
    assert int(dense["params"]["dim"]) == want_dim
    with Session(env.engine) as s:
        email = s.get(type(env.p.member), env.p.member.id).email
        assert s.get(Document, doc.id) is not None
    got = _cli(["search", word, "--as", email, "--json"])
    assert got.returncode == 0, got.stderr
    assert [r["document_id"] for r in json.loads(got.stdout)["results"]][:1] == [str(doc.id)]
    # the table: the passage after its heading, which the heading column shows (not twice)
    shown = subprocess.run(
        [sys.executable, "-m", "cli.main", "search", word, "--as", email, "--top-k", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if word in line)
    assert re.search(rf"│ CLI\s+│ {word} from the command line\.\s+│", row), shown.stdout
    bad = _cli(["profile", "create", "x", "--model", "m", "--dim", "8", "--param", "api_key=sk-abcdefghijk"])
    assert bad.returncode == 2 and "credential" in bad.stderr and "Traceback" not in bad.stderr


def test_status_and_doctor_show_the_embedded_lite_files(env, monkeypatch, capsys):
    """The embedded Lite's data and delta files, from its manifest (Lite answers no RPC that
    tells): in ``index status`` (JSON and table) and, once the delta files pile up, a rebuild
    suggested there and by ``doctor`` (docs/retrieval.md#flushes)."""
    from cli.commands.index import _print_status
    from openkb.health import check_milvus
    from openkb.runtime import lite_files

    doc = env.create(f"# Lite files\n\n{uniq('first')} words.\n")
    env.save(doc.id, f"# Lite files\n\n{uniq('second')} words.\n")  # replaces the chunk: a tombstone
    env.ctx.milvus.flush(active(env))  # the tombstone goes into a delta file at a flush
    st = _cli(["index", "status", "--json"])
    assert st.returncode == 0, st.stderr
    lite = json.loads(st.stdout)["lite"]
    assert lite["data_files"] >= 1 and lite["delta_files"] >= 1 and lite["piling_up"] is False, lite
    table = _cli(["index", "status"])
    assert re.search(r"lite files +\d+ data files? \([\d,]+ KB\), \d+ delta files? of deletions", table.stdout), (
        table.stdout
    )
    assert "pile up" not in table.stdout
    assert "delta files" not in check_milvus(env.ctx).detail

    monkeypatch.setattr(lite_files, "DELTA_FILES_WARN", lite["delta_files"])
    with session_scope(env.ctx.engine) as s:
        out = service.index_status(env.ctx, s)
    assert out["lite"]["piling_up"] is True
    capsys.readouterr()
    _print_status(out, False)
    assert "index rebuild --switch" in capsys.readouterr().out
    check = check_milvus(env.ctx)
    assert check.ok and f"{out['lite']['delta_files']} delta files of deletions" in check.detail
    assert check.fix == lite_files.REBUILD_FIX


def test_a_profile_like_the_active_one_takes_its_functions_and_the_latest_transform(env, http):
    """``openkb profile create NEW --like OLD`` / ``POST .../index-profiles {"like"}``: the same
    embedding service, rerank and analyzer without restating them, and what new profiles get
    (docs/retrieval.md#lexical-analysis); combined with function options it is refused."""
    with Session(env.engine) as s:
        old = spec_of(get_profile(s, active(env)))
    name = f"like-{uuid.uuid4().hex[:6]}"
    made = _cli(["profile", "create", name, "--like", active(env), "--json"])
    assert made.returncode == 0, made.stderr
    with Session(env.engine) as s:
        new = spec_of(get_profile(s, name))
    assert new.collection_name != old.collection_name
    assert (new.embedding, new.rerank, dict(new.bm25_analyzer), new.backend, new.vector_dim) == (
        old.embedding,
        old.rerank,
        dict(old.bm25_analyzer),
        old.backend,
        old.vector_dim,
    )
    assert new.lexical == LEXICAL_V2
    mixed = _cli(["profile", "create", "x", "--like", active(env), "--model", "m", "--dim", "8"])
    assert mixed.returncode == 2 and "leave out --model, --dim" in mixed.stderr and "Traceback" not in mixed.stderr
    missing = _cli(["profile", "create", "x", "--like", "no-such-profile"])
    assert missing.returncode == 4 and "no index profile 'no-such-profile'" in missing.stderr

    p = env.p
    with session_scope(env.engine) as s:
        _, plain = issue_pat(s, tenant_id=p.tenant.id, user_id=p.tenant_admin.id, name="t", scopes=["admin"])
    admin = {"Authorization": f"Bearer {plain}"}
    r = http.post("/api/admin/milvus/index-profiles", headers=admin, json={"like": name})
    assert r.status_code == 201, r.text
    assert r.json()["functions"]["embedding"] == json.loads(made.stdout)["functions"]["embedding"]
    assert r.json()["functions"]["bm25"]["lexical"] == LEXICAL_V2
    r = http.post("/api/admin/milvus/index-profiles", headers=admin, json={"like": name, "analyzer": {"type": "x"}})
    assert r.status_code == 422 and r.json()["field"] == "like", r.text
    r = http.post("/api/admin/milvus/index-profiles", headers=admin, json={"like": "no-such-profile"})
    assert r.status_code == 404, r.text


def _built(env, prefix: str) -> tuple[str, str]:
    """A new BM25-only profile, rebuilt (not switched): (name, collection)."""
    name = new_profile(env, prefix)
    with session_scope(env.engine) as s:
        job = rebuild.start_rebuild(env.ctx, s, OPS, name)
    assert rebuild.run_rebuild(env.ctx, job.id, batch_size=256).status == "succeeded"
    with Session(env.engine) as s:
        prof = get_profile(s, name)
        assert prof.status == "ready"
        return name, prof.collection_name


def test_rollback_walks_back_through_the_history_and_drop_guards_the_target(env):
    """Regression: two rollbacks used to flip back to the new collection, and drop removed the
    collection a rollback needs without asking."""
    original = active(env)
    one, coll_one = _built(env, "hist-one")
    two, coll_two = _built(env, "hist-two")
    with session_scope(env.engine) as s:
        first = rebuild.switch(env.ctx, s, OPS, one)
    with session_scope(env.engine) as s:
        second = rebuild.switch(env.ctx, s, OPS, two)
    assert (first["previous"], second["previous"], active(env)) == (original, coll_one, coll_two)

    # drop: the active collection and the rollback target are refused (CONFLICT, naming --force)
    with session_scope(env.engine) as s:
        with pytest.raises(Conflict) as active_err:
            rebuild.drop(env.ctx, s, OPS, two)
        with pytest.raises(Conflict) as target_err:
            rebuild.drop(env.ctx, s, OPS, one)
    assert "active collection" in active_err.value.detail and "--force" in target_err.value.detail
    assert env.ctx.milvus.has_collection(coll_one)
    cli = _cli(["index", "drop", one, "--yes"])
    assert cli.returncode == 7 and "--force" in cli.stderr and len(cli.stderr.strip().splitlines()) == 1, cli.stderr

    with session_scope(env.engine) as s:
        back = rebuild.rollback(env.ctx, s, OPS)
    assert (back["previous"], back["collection"], active(env)) == (coll_two, coll_one, coll_one)
    with session_scope(env.engine) as s:  # the second rollback goes one step further back, not forward
        back2 = rebuild.rollback(env.ctx, s, OPS)
    assert (back2["previous"], back2["collection"], active(env)) == (coll_one, original, original)
    forget_active_profile()
    with session_scope(env.engine) as s:  # only the initial creation of the alias is left: refused
        with pytest.raises(Conflict, match="nothing to roll back"):
            rebuild.rollback(env.ctx, s, OPS)
    assert active(env) == original

    hist = _cli(["index", "history", "--json"])
    assert hist.returncode == 0, hist.stderr
    out = json.loads(hist.stdout)
    assert out["collection"] == original and out["rollback_target"] is None and out["rollback_refused"]
    top = out["items"][:4]
    assert [(h["kind"], h["from"], h["to"]) for h in top] == [
        ("rollback", coll_one, original),
        ("rollback", coll_two, coll_one),
        ("switch", coll_one, coll_two),
        ("switch", original, coll_one),
    ]
    assert top[0]["reverts"] == top[3]["id"] and top[1]["reverts"] == top[2]["id"]
    assert all(h["by"]["type"] == "system" for h in top)

    # nothing points back at them any more: both drop without --force
    with session_scope(env.engine) as s:
        rebuild.drop(env.ctx, s, OPS, two)
        rebuild.drop(env.ctx, s, OPS, one)
    with Session(env.engine) as s:
        assert {get_profile(s, n).status for n in (one, two)} == {"dropped"}
        assert _audits(s, "milvus.collection.drop", profile=one) == 1


def test_an_empty_page_is_complete_with_zero_rows_and_repair_fixes_a_never_synced_one(env):
    """Regression: an empty page counted as "unchunked" forever, so verify reported ``differs``
    (exit 1) after every --repair."""
    from openkb.indexing.verify import verify

    with session_scope(env.engine) as s:
        # from a synced start: verify covers the whole database, and pages other test modules
        # saved without a worker (their jobs recorded, never run) are never-synced ones too
        verify(env.ctx, s, OPS, repair=True)
    empty = env.create("")  # through the worker: synced, no chunks
    with session_scope(env.engine) as s:
        rep = verify(env.ctx, s, OPS)
    assert rep["unchunked_documents"] == 0 and rep["ok"], rep
    with session_scope(env.engine) as s:  # a page no index job has seen yet
        never = make_doc(s, env.kb, env.p.owner, markdown="")
    with session_scope(env.engine) as s:
        rep = verify(env.ctx, s, OPS)
    assert rep["unchunked_documents"] == 1 and not rep["ok"]
    with session_scope(env.engine) as s:
        assert verify(env.ctx, s, OPS, repair=True)["repaired"]
    with session_scope(env.engine) as s:
        rep = verify(env.ctx, s, OPS)
    assert rep["ok"] and rep["unchunked_documents"] == 0, rep
    cli = _cli(["index", "verify"])
    assert cli.returncode == 0 and "ok" in cli.stdout, (cli.stdout, cli.stderr)
    assert "mvccTs" not in cli.stderr  # pymilvus' Lite notice no longer leaks
    with Session(env.engine) as s:
        assert s.get(Document, never.id).index_status == "indexed" and s.get(Document, empty.id).index_attempts == 0


def test_catch_up_carries_pages_indexed_while_another_collection_was_active(env):
    """A page indexed (not edited) while another collection was active went only there, so a
    rollback's catch-up must include it: seen as a rolled-back collection short of 84 rows when
    the session's worker indexed other modules' pending pages during the switched window."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import text as sql

    doc = env.docs[2]
    later = datetime.now(UTC) + timedelta(hours=1)  # after every edit and chunk in the database
    with session_scope(env.engine) as s:
        s.execute(sql("UPDATE documents SET index_checked_at = :t WHERE id = :i"), {"t": later, "i": doc.id})
    try:
        with Session(env.engine) as s:
            ids = {r[0] for r in s.execute(rebuild._CHANGED_SQL, {"since": later - timedelta(minutes=1)})}
        assert ids == {str(doc.id)}
    finally:
        with session_scope(env.engine) as s:
            s.execute(sql("UPDATE documents SET index_checked_at = now() WHERE id = :i"), {"i": doc.id})


def test_the_health_checks_samples_have_text_to_search_by(env):
    """A page of one stop word ("a") has a chunk a text-only profile can never find by its own
    text; the health check's sampler passes over it (it failed whole rebuilds at random)."""
    from openkb.models import DocumentChunk

    with session_scope(env.engine) as s:
        tiny = make_doc(s, env.kb, env.p.owner, markdown="a\n")
        service.sync_documents(env.ctx, s, [tiny.id])
    with Session(env.engine) as s:
        (chunk,) = s.exec(select(DocumentChunk).where(DocumentChunk.document_id == tiny.id)).all()
        assert len(chunk.content_text) < rebuild.SAMPLE_MIN_CHARS
        pick = rebuild.sample_chunk(s, chunk.id)
        assert pick is None or (pick[0] != str(chunk.id) and len(pick[1]) >= rebuild.SAMPLE_MIN_CHARS)
        # the sampler starts at the given id: a chunk with text is picked where it stands
        long_one = s.exec(
            select(DocumentChunk)
            .join(Document, Document.current_version_id == DocumentChunk.version_id)  # type: ignore[arg-type]
            .where(DocumentChunk.document_id == env.docs[3].id)
        ).first()
        assert rebuild.sample_chunk(s, long_one.id)[0] == str(long_one.id)
