"""The export's stream reads its pages in batches in a reader thread (openkb/exporting/ahead.py,
docs/export.md#speed): the zip does not depend on the batching, a page showing an asset from
another page in a later batch gets it, and a stream abandoned half-way (a client that went
away) leaves the session usable — no read of the reader's is still running on its connection."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from openkb.exporting import service
from openkb.exporting.service import iter_export, plan_export
from tests.export.conftest import Node, kb_target, members


@pytest.fixture(scope="module")
def many(world):
    kb = world.new_kb()
    nodes = [Node("f", "Folder", type="folder")]
    for i in range(9):
        nodes.append(
            Node(
                f"p{i}",
                f"Page {i}",
                parent="f" if i % 2 else None,
                body=f"# Page {i}\n\nNext [n]({{doc:p{(i + 1) % 9}}})\n",
            )
        )
    world.build(kb, nodes)
    return kb


def test_the_zip_does_not_depend_on_the_batch_size(world, many, monkeypatch):
    whole = world.export(kb_target(many))
    monkeypatch.setattr(service, "_BATCH", 2)  # five batches, the reader up to two ahead
    assert world.export(kb_target(many)) == whole
    monkeypatch.setattr(service, "_BATCH", 1)
    assert world.export(kb_target(many)) == whole
    assert sum(1 for p in members(whole) if p.endswith(".md")) == 9


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
