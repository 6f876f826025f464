"""The batched write path (``content.upsert.KeyedBatch`` and the importer's batches,
docs/importing.md#speed): same rows as the one-by-one upsert, a constant number of statements
per batch, the permission checks still made, and a page that fails leaves its batch-mates."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import Session, col, select

from openkb.content.actor import Actor
from openkb.content.documents import trash_document
from openkb.content.upsert import KeyedBatch, KeyedItem, upsert_by_key
from openkb.errors import DocumentInTrash, NotFound, PermissionDenied, ValidationError
from openkb.importing.pipeline import key_prefix, run_import
from openkb.importing.sources import open_source
from openkb.markdown import validate_and_normalize
from openkb.models import Change, Document, DocumentAsset, DocumentVersion
from openkb.permissions import Principal
from tests.factories import grant
from tests.importing.conftest import by_path, uid
from tests.importing.test_vault import png


def _page(n: int) -> str:
    return f"# Page {n}\n\nSome *text* with a [link](https://example.org/{n}).\n"


def _row(s: Session, kb_id: uuid.UUID, key: str) -> tuple[Document, DocumentVersion, list[Change]]:
    d = s.exec(
        select(Document).where(col(Document.knowledge_base_id) == kb_id, col(Document.external_key) == key)
    ).one()
    v = s.get(DocumentVersion, d.current_version_id)
    ch = s.exec(select(Change).where(col(Change.object_id) == d.id)).all()
    return d, v, list(ch)


def test_batch_creates_what_the_single_upsert_creates(world, queue):
    kb = world.new_kb()
    actor = world.actor()
    with world.units() as s:
        upsert_by_key(s, actor, kb.id, "single", title="T", markdown=_page(1))
    queue.jobs.clear()
    with world.units() as s:
        b = KeyedBatch(s, actor, kb.id, ["batched", "other"])
        r = b.upsert(KeyedItem("batched", "T", _page(1)))
        b.upsert(KeyedItem("other", "T2", _page(2)))
        assert r.status == "created"
        b.flush()
    with Session(world.engine) as s:
        d1, v1, c1 = _row(s, kb.id, "single")
        d2, v2, c2 = _row(s, kb.id, "batched")
        fields = ("type", "status", "parent_id", "index_status", "meta", "tags", "created_by", "tenant_id")
        assert {f: getattr(d2, f) for f in fields} == {f: getattr(d1, f) for f in fields}
        assert d2.sort_order == d1.sort_order + 1  # after the one before, in the order written
        assert _row(s, kb.id, "other")[0].sort_order == d2.sort_order + 1
        assert (v2.version_no, v2.markdown, v2.markdown_hash, v2.source_type) == (
            v1.version_no,
            v1.markdown,
            v1.markdown_hash,
            v1.source_type,
        )
        assert [c.op for c in c2] == [c.op for c in c1] == ["document.create"]
        assert c2[0].after_version_id == v2.id and c2[0].after_state["external_key"] == "batched"
    assert ("index_document", {"document_id": str(d2.id)}) in queue.jobs


def test_batch_statements_do_not_grow_with_the_pages(world, count_queries):
    kb = world.new_kb()
    actor = world.actor()

    def write(n: int, keys: str) -> int:
        with count_queries() as c, world.units() as s:
            b = KeyedBatch(s, actor, kb.id, [f"{keys}{i}" for i in range(n)])
            statuses = {b.upsert(KeyedItem(f"{keys}{i}", f"t{i}", _page(i))).status for i in range(n)}
            b.flush()
        assert statuses == {"created"}
        return c["n"]

    assert write(40, "big") == write(4, "small")
    with count_queries() as c, world.units() as s:  # a re-run of unchanged pages: nothing per page
        b = KeyedBatch(s, actor, kb.id, [f"big{i}" for i in range(40)])
        assert {b.upsert(KeyedItem(f"big{i}", f"t{i}", _page(i))).status for i in range(40)} == {"unchanged"}
        b.flush()
    assert c["n"] <= 6


def test_batch_updates_refuses_and_hides_like_the_single_upsert(world):
    kb = world.new_kb()
    owner = world.actor()
    with world.units() as s:
        b = KeyedBatch(s, owner, kb.id, ["a", "gone"])
        b.upsert(KeyedItem("a", "A", _page(1)))
        gone = b.upsert(KeyedItem("gone", "G", _page(2))).document.id
        b.flush()
    with world.units() as s:
        trash_document(s, owner, gone)
    with world.units() as s:
        b = KeyedBatch(s, owner, kb.id, ["a", "gone"])
        r = b.upsert(KeyedItem("a", "A", _page(9)))
        assert r.status == "updated" and r.version.version_no == 2
        with pytest.raises(DocumentInTrash):
            b.upsert(KeyedItem("gone", "G", _page(2)))
    outsider = Actor.of(Principal.user(world.outsider.id, world.tenant.id), None, source="import")
    with world.units() as s, pytest.raises(NotFound):  # the private knowledge base stays unseen
        KeyedBatch(s, outsider, kb.id, ["a"])


def test_batch_needs_create_rights_in_the_target_folder(world):
    kb = world.new_kb()
    with world.units() as s:
        folder = upsert_by_key(s, world.actor(), kb.id, "f/", title="F", type="folder").document.id
    viewer = world.guest
    with Session(world.engine) as s:
        grant(s, "knowledge_base", kb.id, viewer, "viewer", tenant_id=world.tenant.id)
        s.commit()
    actor = world.actor(viewer)
    with world.units() as s:
        b = KeyedBatch(s, actor, kb.id, ["p"])
        with pytest.raises(PermissionDenied):
            b.upsert(KeyedItem("p", "P", _page(1), parent_id=folder))


def test_a_failing_page_leaves_its_batch_mates(world, tmp_path):
    """One page of a batch is in the trash: it fails with its code, its batch-mates (and their
    images) are imported, and no upload of the failed page is left behind."""
    kb = world.new_kb()
    root = tmp_path / f"b{uid()}"
    root.mkdir()
    (root / "img.png").write_bytes(png("green"))
    for i in range(6):
        (root / f"p{i}.md").write_text(f"# P{i}\n\n![pic {i}](img.png)\n\n[next](p{(i + 1) % 6}.md#a(b))\n")
    first = world.run(root, kb=kb)
    assert first.counts()["created"] == 6
    gone = uuid.UUID(by_path(first)["p3.md"].document_id)
    with world.units() as s:
        trash_document(s, world.actor(), gone)
    for i in range(6):
        (root / f"p{i}.md").write_text(f"# P{i} again\n\n![pic {i}](img.png)\n")
    opened = []

    def units():
        opened.append(1)
        return world.units()

    src = open_source(root, 50 * 1024 * 1024)
    try:
        second = run_import(units, world.blobs, world.actor(), kb.id, src)
    finally:
        src.close()
    res = by_path(second)
    assert res["p3.md"].status == "failed" and res["p3.md"].code == "DOCUMENT_IN_TRASH"
    assert {res[f"p{i}.md"].status for i in (0, 1, 2, 4, 5)} == {"updated"}
    # the page in the trash was refused before anything was written for it: the batch went on
    # (checks, plan, one batch), it was not redone page by page
    assert len(opened) == 3
    with Session(world.engine) as s:
        stray = s.exec(select(DocumentAsset).where(col(DocumentAsset.document_id).is_(None))).all()
        assert [a for a in stray if a.created_by == world.owner.id] == []
        assert len(s.exec(select(DocumentAsset).where(col(DocumentAsset.document_id) == gone)).all()) == 1


def test_stored_bodies_are_what_a_save_stores(world, tmp_path):
    """The batch trusts the importer's normalized bodies (no second parse): every stored body is
    its own normalization, links with odd fragments included."""
    kb = world.new_kb()
    root = tmp_path / f"n{uid()}"
    (root / "d").mkdir(parents=True)
    (root / "pic one.png").write_bytes(png("white"))
    (root / "a.md").write_text(
        '# A\n\n[b](d/b.md#x(1)&y) [c](d/c%20c.md) [ext](https://e.org/(x)) ![p](pic%20one.png "t")\n\n'
        "* [b again](d/b.md)\n",
        encoding="utf-8",
    )
    (root / "d" / "b.md").write_text("# B\n\n[[a]] and [up](../a.md#top)\n", encoding="utf-8")
    (root / "d" / "c c.md").write_text('# C\n\n> [a](../a.md "title (x)")\n', encoding="utf-8")
    rep = world.run(root, kb=kb)
    assert not rep.failed
    with Session(world.engine) as s:
        docs = s.exec(
            select(Document).where(
                col(Document.knowledge_base_id) == kb.id, col(Document.external_key).like(key_prefix(None) + "%")
            )
        ).all()
        bodies = [s.get(DocumentVersion, d.current_version_id).markdown for d in docs if d.type == "page"]
    assert len(bodies) == 3
    for body in bodies:
        assert validate_and_normalize(body) == body
    assert any("openkb://document/" in b and "#x" in b for b in bodies)


def test_worker_processes_give_what_one_process_gives(world, tmp_path):
    """``jobs=2``: the files are converted in worker processes and by the importing process
    itself while they start; every file is reported once and the pages are the same."""
    root = tmp_path / f"j{uid()}"
    for i in range(24):
        d = root / f"d{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"n{i:02d}.md").write_text(f"# N{i}\n\n[next](../d{(i + 1) % 3}/n{(i + 1) % 24:02d}.md) 第{i}页\n")
    seen: list[str] = []

    def progress(p):
        if p.phase == "prepare":
            seen.append(p.current)

    reports = {}
    for jobs in (1, 2):
        kb = world.new_kb()
        reports[jobs] = (kb, world.run(root, kb=kb, jobs=jobs, progress=progress if jobs == 2 else None))
    assert sorted(seen) == sorted(f"d{i % 3}/n{i:02d}.md" for i in range(24))

    def bodies(kb):
        with Session(world.engine) as s:
            docs = s.exec(select(Document).where(col(Document.knowledge_base_id) == kb.id)).all()
            ids = {d.id: d.external_key for d in docs}
            out = {}
            for d in docs:
                if d.type == "page":
                    body = s.get(DocumentVersion, d.current_version_id).markdown
                    for i, k in ids.items():  # ids differ per knowledge base: compare by key
                        body = body.replace(str(i), k.split(":", 2)[2])
                    out[d.external_key.split(":", 2)[2]] = body
            return out

    (kb1, r1), (kb2, r2) = reports[1], reports[2]
    assert not r1.failed and not r2.failed
    assert {f.path: f.status for f in r1.files} == {f.path: f.status for f in r2.files}
    assert bodies(kb1) == bodies(kb2) and len(bodies(kb1)) == 24


def test_a_document_id_taken_in_the_batch_or_by_a_fetched_document_is_refused(world):
    """The id check is a set lookup now (it scanned the batch per document); it still refuses an
    id given twice in one batch and the id of a document the batch fetched, before adding rows."""
    kb = world.new_kb()
    actor = world.actor()
    with world.units() as s:
        old = upsert_by_key(s, actor, kb.id, "old", title="Old", markdown=_page(1)).document.id
    with world.units() as s:
        b = KeyedBatch(s, actor, kb.id, ["old", "n1", "n2", "n3"])
        mine = uuid.uuid4()
        assert b.upsert(KeyedItem("n1", "N1", _page(2), document_id=mine)).status == "created"
        with pytest.raises(ValidationError):
            b.upsert(KeyedItem("n2", "N2", _page(3), document_id=mine))
        with pytest.raises(ValidationError):
            b.upsert(KeyedItem("n3", "N3", _page(4), document_id=old))
        b.flush()
    with Session(world.engine) as s:
        keys = s.exec(select(Document.external_key).where(col(Document.knowledge_base_id) == kb.id)).all()
    assert sorted(keys) == ["n1", "old"]


def _pages(tmp_path, n: int = 3):
    for i in range(n):
        (tmp_path / f"p{i}.md").write_text(_page(i))
    return tmp_path


def test_an_interrupt_wrapped_by_what_it_landed_in_stops_the_import(world, tmp_path, monkeypatch):
    """Ctrl-C landing in code that wraps it (an import's ``__set_name__``) reached the batch's
    ``except Exception``; the batch was redone page by page and the run finished with exit 0."""
    import openkb.importing.pipeline as pipeline

    def interrupted(*_a, **_kw):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__") from exc

    monkeypatch.setattr(pipeline, "_page_body", interrupted)
    kb = world.new_kb()
    with pytest.raises(KeyboardInterrupt):
        world.run(_pages(tmp_path), kb=kb)


def test_an_interrupt_in_the_batch_commit_stops_the_import(world, tmp_path, monkeypatch):
    """The interrupt lands in an after-commit hook (the job queue's first, slow import): the
    import stops there instead of writing the batch again page by page and finishing."""
    from openkb.db import after_commit

    original = KeyedBatch.flush
    written: list[int] = []

    def flush(self):
        out = original(self)
        written.append(1)

        def interrupted():
            raise KeyboardInterrupt

        after_commit(self.session, interrupted)
        return out

    monkeypatch.setattr(KeyedBatch, "flush", flush)
    kb = world.new_kb()
    with pytest.raises(KeyboardInterrupt):
        world.run(_pages(tmp_path), kb=kb)
    assert written == [1]
