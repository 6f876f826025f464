"""Deep trees of long CJK titles (docs/export.md#the-zip): every entry path, with the top folder
unzipping ``X.zip`` makes, stays within Windows' limit (``MAX_PATH_CHARS`` UTF-16 units) and each
name within 255 UTF-8 bytes; names cut to fit are stable and unique, links between them work,
and the zip goes back in and out unchanged."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter

import pytest
from sqlmodel import Session

from openkb.exporting.names import MAX_PATH_CHARS, units
from openkb.exporting.service import Target, plan_export
from openkb.importing.openkb_export import split_front_matter
from openkb.markdown import validate
from tests.export.conftest import Node, kb_target, members, png, snapshot
from tests.factories import grant, make_kb

LONG = "知识库长标题测试" * 13  # 104 characters, 312 bytes in UTF-8
DEPTH = 10  # the default max_folder_depth: pages at the tenth level


def _tree() -> list[Node]:
    nodes = [Node("top", "首页 " + LONG, body="Down: [deep]({doc:deep})\n")]
    parent = None
    for level in range(1, DEPTH):
        key = f"f{level}"
        nodes.append(Node(key, f"{LONG} 第{level}层", type="folder", parent=parent))
        if level == 3:  # siblings whose titles differ only past any cut
            nodes.append(Node("twin", f"{LONG} 第{level}层 twin", type="folder", parent=parent))
            nodes.append(Node("twin-page", "孪生 " + LONG, parent="twin", body="Up: [top]({doc:top})\n"))
        parent = key
    nodes.append(
        Node(
            "deep",
            LONG + " 最深的页面",
            parent=parent,
            body="# 深\n\nUp: [top]({doc:top}) and [twin]({doc:twin-page}).\n\n![图]({asset:" + LONG + ".png})\n",
            assets={LONG + ".png": (png("green"), "image/png")},
        )
    )
    nodes.append(Node("same", LONG + " 最深的页面 2", parent=parent, body="a sibling with the same beginning\n"))
    return nodes


@pytest.fixture(scope="module")
def deep(world):
    with Session(world.engine, expire_on_commit=False) as s:
        kb = make_kb(s, world.ws, world.owner, title="导出 " + LONG)
        grant(s, "knowledge_base", kb.id, world.editor, "editor", tenant_id=world.tenant.id)
        s.commit()
    ids = world.build(kb, _tree())
    return kb, ids, world.export(kb_target(kb))


def test_every_path_fits_windows_and_every_name_fits_a_file_system(world, deep):
    kb, _ids, data = deep
    files = members(data)
    with world.units() as s:
        plan = plan_export(s, world.principal(), kb_target(kb), audit=False)
    stem = plan.filename.removesuffix(".zip")
    assert units(stem) <= 60 and stem.startswith("导出 ")
    for path in files:
        assert units(f"{stem}/{path}") <= MAX_PATH_CHARS, (units(f"{stem}/{path}"), path)
        for part in path.rstrip("/").split("/"):
            assert len(part.encode()) <= 255, part
    folded = Counter(unicodedata.normalize("NFC", p).casefold() for p in files)
    assert max(folded.values()) == 1
    pages = sorted(p for p in files if p.endswith(".md"))
    assert len(pages) == 4 and max(p.count("/") for p in pages) == DEPTH - 1
    assert any("~" in p for p in pages)  # names were cut, with their hash
    (asset,) = [p for p in files if p.startswith("assets/")]
    assert asset.endswith(".png")  # a cut file name keeps its extension
    m = json.loads(files["openkb-export.json"])
    by_title = {d["title"]: d["path"] for d in m["documents"]}
    deep_path = by_title[LONG + " 最深的页面"]
    fm, body = split_front_matter(files[deep_path].decode())
    assert fm["title"] == LONG + " 最深的页面" and validate(body) == []
    top_path = by_title["首页 " + LONG]
    assert "../" * (DEPTH - 1) + top_path in body  # relative links across the cut names
    assert by_title[LONG + " 最深的页面"] != by_title[LONG + " 最深的页面 2"]


def test_cut_names_round_trip(world, deep, tmp_path):
    kb, ids, data = deep
    assert world.export(kb_target(kb)) == data  # the same cut names again
    empty = world.new_kb()
    report = world.import_zip(data, empty, tmp_path)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    assert snapshot(world.engine, empty.id) == snapshot(world.engine, kb.id)
    again = members(world.export(kb_target(empty)))
    first = members(data)
    assert {p: d for p, d in again.items() if p != "openkb-export.json"} == {
        p: d for p, d in first.items() if p != "openkb-export.json"
    }
    # a subtree exported on its own fits as well, under its own (shorter) top folder
    sub = members(world.export(Target("document", ids["f5"])))
    assert any(p.endswith(".md") for p in sub)
    assert all(units(p) <= MAX_PATH_CHARS - 61 for p in sub)
