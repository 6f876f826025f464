"""The HTTP world most API test modules share (a module may define its own ``w`` instead)."""

from __future__ import annotations

import pytest

from tests.content.http_world import HttpWorld


@pytest.fixture()
def w(live_server, committed):
    world = HttpWorld(live_server, committed)
    yield world
    world.close()


@pytest.fixture(scope="module")
def app(app_ctx):
    """A second, never-served instance of the app, built like the live server's, for tests that
    inspect its routes (the live server's instance is not reachable from a test)."""
    from server.app import create_app
    from workers.queue import HueyQueue

    return create_app(app_ctx, queue=HueyQueue(), warm=False)
