"""OPENKB_MCP_ENABLED / OPENKB_DIFY_ENABLED switch the two AI-facing endpoints off (docs/operations.md#environment-variables).

The Helm chart's ``mcp.enabled`` / ``difyAdapter.enabled`` set them, so turning an endpoint off
in the chart removes it from every host, not only its dedicated Ingress.
"""

from __future__ import annotations

import dataclasses

import pytest
from fastapi.testclient import TestClient

import openkb.jobs


@pytest.fixture()
def build(app_ctx):
    from server.app import create_app
    from workers.queue import HueyQueue

    previous = openkb.jobs._queue  # create_app installs its queue process-wide: put the live one back

    def make(**flags):
        ctx = dataclasses.replace(app_ctx, settings=app_ctx.settings.model_copy(update=flags))
        return TestClient(create_app(ctx, queue=HueyQueue(), warm=False))

    yield make
    openkb.jobs.set_queue(previous)


def _mcp_post(client):
    return client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream", "Host": "127.0.0.1"},
    )


def test_both_on_by_default(build):
    c = build()
    assert _mcp_post(c).status_code == 401  # served: it asks for a token
    assert c.post("/retrieval", json={}).status_code == 403  # served: it asks for a Dify key


def test_mcp_off_answers_404_and_dify_stays(build):
    c = build(openkb_mcp_enabled=False)
    assert _mcp_post(c).status_code == 404
    assert c.post("/retrieval", json={}).status_code == 403


def test_dify_off_answers_404_and_keys_stay_manageable(build):
    c = build(openkb_dify_enabled=False)
    assert c.post("/retrieval", json={}).status_code == 404
    assert c.get("/api/admin/dify/keys").status_code == 401  # the console still manages keys
    assert _mcp_post(c).status_code == 401
