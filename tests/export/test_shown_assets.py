"""Assets a page shows from elsewhere (docs/export.md#what-goes-in): found while streaming, where
the bodies are read anyway (the plan reads no body). One attached to a page of another knowledge
base the caller reads, or the caller's own unattached upload, goes in with a relative link; one
the caller cannot read, or one past the size cap, is left out, counted, its reference kept."""

from __future__ import annotations

import io
import json

import pytest
from sqlmodel import Session, col, select

from openkb.assets import upload_asset
from openkb.models import Document, DocumentAsset, DocumentVersion
from tests.export.conftest import Node, kb_target, members, png, sha


@pytest.fixture(scope="module")
def shown(world):
    other = world.new_kb()
    other_ids = world.build(
        other, [Node("p", "Elsewhere", body="![e]({asset:e.png})\n", assets={"e.png": (png("green"), "image/png")})]
    )
    with Session(world.engine) as s:
        elsewhere = s.exec(select(DocumentAsset).where(col(DocumentAsset.document_id) == other_ids["p"])).one()
    with world.units() as s:
        mine = upload_asset(
            s,
            world.actor(),
            world.blobs,
            io.BytesIO(png("blue", 9)),
            size=len(png("blue", 9)),
            filename="mine.png",
            content_type="image/png",
        )
        theirs = upload_asset(
            s,
            world.actor(world.editor),
            world.blobs,
            io.BytesIO(png("red", 7)),
            size=len(png("red", 7)),
            filename="theirs.png",
            content_type="image/png",
        )
        ids = (str(elsewhere.id), str(mine.id), str(theirs.id))
    kb = world.new_kb()
    body = "# Shows\n\n![a](asset://{})\n\n![b](asset://{})\n\n![c](asset://{})\n".format(*ids)
    world.build(kb, [Node("f", "Folder 文件夹", type="folder"), Node("s", "Shows 图", parent="f", body=body)])
    return kb, ids, elsewhere.sha256, mine.sha256


def test_readable_assets_from_elsewhere_go_in(world, shown):
    kb, (elsewhere, mine, theirs), elsewhere_sha, mine_sha = shown
    files = members(world.export(kb_target(kb)))
    m = json.loads(files["openkb-export.json"])
    paths = {a["sha256"]: a["path"] for a in m["assets"]}
    assert set(paths) == {elsewhere_sha, mine_sha} and m["counts"]["assets"] == 2
    assert m["left_out"]["assets_unreadable"] == 1  # someone else's unattached upload
    for p in paths.values():
        assert sha(files[p]) in paths
    page = files["Folder 文件夹/Shows 图.md"].decode()
    assert f"](../{paths[elsewhere_sha]})" in page and f"](../{paths[mine_sha]})" in page
    assert f"asset://{theirs}" in page and f"asset://{elsewhere}" not in page
    (doc,) = [d for d in m["documents"] if d["type"] == "page"]
    assert doc["assets"] == sorted(paths.values())


def test_an_asset_past_the_cap_is_left_out_and_counted(world, shown):
    kb, (elsewhere, mine, _theirs), _e, _m = shown
    with Session(world.engine) as s:
        sizes = {str(a.id): a.size_bytes for a in s.exec(select(DocumentAsset)).all()}
        doc = s.exec(
            select(Document).where(col(Document.knowledge_base_id) == kb.id, col(Document.type) == "page")
        ).one()
        stored = len(s.get(DocumentVersion, doc.current_version_id).markdown.encode())
    # room for the page and the first asset found (unknown ids are looked up in order), not both
    first, second = sorted([elsewhere, mine])
    cap = stored + sizes[first]
    data = world.export(kb_target(kb), max_bytes=cap)
    files = members(data)
    m = json.loads(files["openkb-export.json"])
    assert m["left_out"]["assets_over_cap"] == 1 and m["counts"]["assets"] == 1
    assert f"asset://{second}" in files["Folder 文件夹/Shows 图.md"].decode()
    assert f"asset://{first}" not in files["Folder 文件夹/Shows 图.md"].decode()
    assert world.export(kb_target(kb), max_bytes=cap) == data  # still deterministic
