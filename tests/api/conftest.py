"""The HTTP world most API test modules share (a module may define its own ``w`` instead)."""

from __future__ import annotations

import pytest

from tests.content.http_world import HttpWorld


@pytest.fixture()
def w(live_server, committed):
    world = HttpWorld(live_server, committed)
    yield world
    world.close()
