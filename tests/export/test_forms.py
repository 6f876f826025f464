"""Export forms (openkb/exporting/forms.py, docs/export.md#speed): a page member written from its
version's form is exactly the file the text path writes (front matter + ``page_markdown``) and a
complete raw deflate stream; saved versions carry their form; an export whose versions lack
their forms (computed on the fly) or whose forms were backfilled is byte-identical."""

from __future__ import annotations

import io
import shutil
import subprocess
import zipfile
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlmodel import Session

from openkb.exporting.forms import FORM, backfill_forms, make_form
from openkb.exporting.links import fast_rewrite
from openkb.exporting.service import ExportDoc, ExportPlan, _resolver, front_matter, page_markdown, page_member
from openkb.importing.service import import_path
from openkb.markdown import normalize
from tests.export.conftest import Node, kb_target, png, sha
from tests.export.test_links import IDS, SNIPPETS

PLAN = ExportPlan(
    source={},
    include_drafts=False,
    docs=[],
    assets={},
    left_out={},
    total_bytes=0,
    filename="x.zip",
    links={IDS[0]: "目录 a/页面 (1).md", IDS[1]: "b.md", IDS[2]: "x/y/c d.md"},
    asset_paths={IDS[0]: "assets/0123456789abcdef/图 1.png", IDS[2]: "assets/fedcba9876543210/b.png"},
)
PLAN.key_refs()
HERE = ExportDoc(id="p", type="page", title="t", status="published", parent=None, path="x/页 here.md", dir="x/页 here/")


def read_back(stream: bytes) -> bytes:
    d = zlib.decompressobj(-15)
    out = d.decompress(stream) + d.flush()
    assert d.eof and not d.unused_data  # one complete stream, nothing after its final block
    return out


@st.composite
def bodies(draw):
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(SNIPPETS), st.text(alphabet="ab 中文é\n[]()`$*#-", max_size=30)),
            min_size=1,
            max_size=8,
        )
    )
    return normalize("\n\n".join(p.replace("{id}", draw(st.sampled_from(IDS))) for p in parts) + "\n")


@settings(max_examples=200, deadline=None)
@given(body=bodies(), meta=st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
def test_a_member_from_the_form_is_the_text_path_file(body, meta):
    fm = (front_matter("标题 t", "published", ["a"], meta) + "\n").encode()
    resolve = _resolver(HERE, PLAN)
    member = page_member(fm, body.encode(), make_form(body), PLAN, "x")
    if member is None:  # only when a reference the parse must place resolves
        assert fast_rewrite(body, resolve) is None
        return
    data = fm + page_markdown(body, HERE, PLAN).encode()
    assert read_back(member.body) == data
    assert (member.crc, member.size, member.sha256) == (zlib.crc32(data), len(data), sha(data))


def test_long_front_matter_and_references_span_stored_blocks():
    body = f"# 页\n\n[a](openkb://document/{IDS[0]}#{'x' * 70_000}) and ![i](asset://{IDS[2]})\n"
    fm = (front_matter("t", "published", [], {"long": "长" * 30_000}) + "\n").encode()  # > 64 KiB
    member = page_member(fm, body.encode(), make_form(body), PLAN, "x")
    assert member is not None
    assert read_back(member.body) == fm + page_markdown(body, HERE, PLAN).encode()


TREE = [
    Node("f", "文件夹", type="folder"),
    Node(
        "a",
        "页面 A",
        parent="f",
        body="# A\n\n中文 [to b]({doc:b}#part) and ![pic]({asset:p.png})\n\n```\n[in code]({doc:b})\n```\n",
        assets={"p.png": (png("green"), "image/png")},
    ),
    Node("b", "Page B", body="# B\n\n## part\n\nBack [to a]({doc:a}), [nowhere](openkb://document/" + IDS[3] + ")\n"),
]


def test_saved_versions_carry_forms_and_exports_do_not_depend_on_them(world, tmp_path):
    kb = world.new_kb()
    world.build(kb, TREE)
    versions = text(
        "SELECT v.id, v.markdown, f.form, f.refs, f.keys, f.blocks, f.deflated, f.body FROM documents d "
        "JOIN document_versions v ON v.id = d.current_version_id "
        "LEFT JOIN document_export_forms f ON f.version_id = v.id WHERE d.knowledge_base_id = :kb"
    )
    with Session(world.engine) as s:
        rows = s.execute(versions, {"kb": kb.id}).all()
    assert len(rows) == 2
    for _vid, markdown, form, refs, keys, blocks, deflated, body in rows:
        f = make_form(markdown)
        assert (form, refs, keys, blocks, bytes(deflated)) == (FORM, f.refs, f.keys, f.blocks, f.deflated)
        assert bytes(body) == markdown.encode()  # the export reads the body from the form's row

    first = world.export(kb_target(kb))
    with zipfile.ZipFile(io.BytesIO(first)) as z:
        assert z.testzip() is None
    if shutil.which("unzip"):
        path = tmp_path / "export.zip"
        path.write_bytes(first)
        assert subprocess.run(["unzip", "-tq", str(path)], capture_output=True).returncode == 0

    drop = text(
        "DELETE FROM document_export_forms f USING documents d "
        "WHERE f.version_id = d.current_version_id AND d.knowledge_base_id = :kb"
    )
    with world.engine.begin() as conn:
        conn.execute(drop, {"kb": kb.id})
    assert world.export(kb_target(kb)) == first  # computed on the fly: the same bytes

    with world.engine.begin() as conn:
        assert backfill_forms(conn) >= 2
        assert backfill_forms(conn) == 0
    with Session(world.engine) as s:
        backfilled = s.execute(versions, {"kb": kb.id}).all()
    assert [r[2] for r in backfilled] == [FORM, FORM]
    assert [bytes(r[7]) for r in backfilled] == [r[1].encode() for r in backfilled]
    assert world.export(kb_target(kb)) == first

    # a form of another layout is not read, its body neither: the version's body is
    stale = text(
        "UPDATE document_export_forms f SET form = form + 1, body = 'not the body'::bytea FROM documents d "
        "WHERE f.version_id = d.current_version_id AND d.knowledge_base_id = :kb"
    )
    with world.engine.begin() as conn:
        conn.execute(stale, {"kb": kb.id})
    assert world.export(kb_target(kb)) == first


def test_forms_are_stored_in_line_and_uncompressed(world):
    """Migration 0014: a page's form is one heap fetch for an export (no TOAST fetch, no
    decompression) while its row fits in a page (docs/export.md#speed)."""
    with Session(world.engine) as s:
        storage = dict(
            s.execute(
                text(
                    "SELECT attname, attstorage FROM pg_attribute WHERE attrelid = 'document_export_forms'::regclass "
                    "AND attname IN ('body', 'deflated')"
                )
            ).all()
        )
        options = s.execute(text("SELECT reloptions FROM pg_class WHERE relname = 'document_export_forms'")).scalar()
    assert storage == {"body": "e", "deflated": "e"}
    assert "toast_tuple_target=8160" in options


def test_imported_versions_carry_forms(world, tmp_path):
    """Both import write paths (the export zip's keyed upserts, a folder's keyed batches)."""
    src = world.new_kb()
    world.build(src, TREE)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n\nSee [two](two.md)\n")
    (folder / "two.md").write_text("# Two\n")
    for kb, source in ((world.new_kb(), "zip"), (world.new_kb(), "folder")):
        if source == "zip":
            world.import_zip(world.export(kb_target(src)), kb, tmp_path)
        else:
            import_path(world.units, world.blobs, world.actor(), kb.id, folder)
        with Session(world.engine) as s:
            forms = s.execute(
                text(
                    "SELECT f.form FROM documents d LEFT JOIN document_export_forms f "
                    "ON f.version_id = d.current_version_id WHERE d.knowledge_base_id = :kb AND d.type = 'page'"
                ),
                {"kb": kb.id},
            ).all()
        assert [f for (f,) in forms] == [FORM] * 2, source
