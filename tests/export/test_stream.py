"""The export's stream reads its pages in batches in a reader thread (openkb/exporting/ahead.py,
docs/export.md#speed): the zip does not depend on the batching, a page showing an asset from
another page in a later batch gets it, and a stream abandoned half-way (a client that went
away) leaves the session usable — no read of the reader's is still running on its connection."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image
from sqlalchemy import text

from openkb.exporting import service
from openkb.exporting.service import iter_export, plan_export
from tests.export.conftest import Node, kb_target, members, png


def noise_png() -> bytes:
    """A PNG of ~120 KB (noise does not compress): an asset of two blob chunks."""
    buf = io.BytesIO()
    Image.frombytes("RGB", (200, 200), random.Random(20).randbytes(200 * 200 * 3)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def many(world):
    kb = world.new_kb()
    nodes = [Node("f", "Folder", type="folder")]
    nodes.append(
        Node("big", "Big", parent="f", body="![n]({asset:n.png})\n", assets={"n.png": (noise_png(), "image/png")})
    )
    for i in range(9):
        img = {"i.png": (png(("red", "green", "blue")[i % 3], 40 + i), "image/png")} if i % 4 == 0 else {}
        nodes.append(
            Node(
                f"p{i}",
                f"Page {i}",
                parent="f" if i % 2 else None,
                body=f"# Page {i}\n\nNext [n]({{doc:p{(i + 1) % 9}}})\n" + ("\n![i]({asset:i.png})\n" if img else ""),
                assets=img,
            )
        )
    world.build(kb, nodes)
    return kb


def test_the_zip_does_not_depend_on_the_batch_size(world, many, monkeypatch):
    whole = world.export(kb_target(many))
    monkeypatch.setattr(service, "_BATCH", 2)  # five batches, the reader one ahead
    assert world.export(kb_target(many)) == whole
    monkeypatch.setattr(service, "_BATCH", 1)
    assert world.export(kb_target(many)) == whole
    files = members(whole)
    assert sum(1 for p in files if p.endswith(".md")) == 10
    assert sum(1 for p in files if p.endswith(".png")) == 4
    assert max(len(data) for data in files.values()) > (1 << 16)  # the noise image: two chunks


def test_a_stream_closed_half_way_leaves_the_session_usable(world, many, monkeypatch):
    monkeypatch.setattr(service, "_BATCH", 1)
    monkeypatch.setattr(service, "CHUNK", 1)  # a piece per member: stop after the first
    with world.units() as s:
        plan = plan_export(s, world.principal(), kb_target(many))
        stream = iter_export(s, plan, world.blobs)
        first = next(stream)
        assert first.startswith(b"PK\x03\x04")
        stream.close()  # the client went away
        assert s.execute(text("SELECT 1")).scalar_one() == 1  # no read of the reader's in flight
