"""An exception no handler knows is one ``500 INTERNAL_ERROR`` and one log record, and the
connection stays usable (server/errors.py ``RequestFrame``). Served by uvicorn, as in
production: the connection reset came from uvicorn closing it after Starlette re-raised."""

from __future__ import annotations

import logging
import threading
import time

import httpx
import pytest
from starlette.responses import StreamingResponse


@pytest.fixture(scope="module")
def failing_server(app_ctx):
    import uvicorn

    from openkb.runtime.embedded import free_port
    from server.app import create_app
    from workers.queue import HueyQueue

    app = create_app(app_ctx, queue=HueyQueue(), warm=False)

    @app.get("/api/test-only/broken")
    def broken() -> None:
        raise RuntimeError("a bug in a route")

    @app.get("/api/test-only/broken-stream")
    def broken_stream() -> StreamingResponse:
        def chunks():
            yield b"first part\n"
            raise RuntimeError("a bug half-way through a stream")

        return StreamingResponse(chunks(), media_type="text/plain")

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield base
    server.should_exit = True
    thread.join(10)


def test_a_bug_is_one_500_and_one_log_record_and_the_connection_lives_on(failing_server, caplog):
    caplog.set_level(logging.ERROR)
    with httpx.Client(base_url=failing_server, timeout=10) as c:
        for _ in range(3):  # the same kept-alive connection each time
            r = c.get("/api/test-only/broken")
            assert r.status_code == 500
            assert r.json() == {"error": "INTERNAL_ERROR", "detail": "internal error (see server log)"}
            assert r.headers["x-request-id"]  # to find its log record
            assert c.get("/healthz").status_code == 200  # was: connection reset by peer
    ours = [r for r in caplog.records if r.name == "openkb.server" and r.levelno >= logging.ERROR]
    assert len(ours) == 3 and all("a bug in a route" in str(r.exc_info[1]) for r in ours)
    assert "Exception in ASGI application" not in caplog.text  # no second traceback from the server


def test_a_stream_cut_short_is_logged_and_the_client_sees_it(failing_server, caplog):
    caplog.set_level(logging.ERROR)
    with httpx.Client(base_url=failing_server, timeout=10) as c:
        with pytest.raises(httpx.HTTPError):  # never taken for a complete answer
            c.get("/api/test-only/broken-stream")
        assert c.get("/healthz").status_code == 200  # a new connection
    ours = [r for r in caplog.records if r.name == "openkb.server" and r.levelno >= logging.ERROR]
    assert len(ours) == 1 and "cut short" in ours[0].getMessage()
    assert "Exception in ASGI application" not in caplog.text
