"""FastAPI app factory.

The app receives a built ``AppContext``; it does not start embedded services itself (the
``openkb serve``/``up`` commands do), so tests can build it against their own components.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request

from openkb import __version__
from openkb.context import AppContext
from openkb.jobs import set_queue
from openkb.runtime import optional_module
from server import errors
from server.body_limit import BodyLimitMiddleware, document_413
from server.logs import configure_logging, request_id_var

log = logging.getLogger("openkb.server")

# Routers are found by module name so parts of the API can land independently.
ROUTER_MODULES = (
    "server.routers.health",
    "server.routers.auth",
    "server.routers.admin",
    "server.routers.groups",
    "server.routers.content",
    "server.routers.sharing",
    "server.routers.assets",
    "server.routers.changes",
    "server.routers.search",
    "server.routers.milvus_admin",
    "server.routers.dify",
)


def _warmup(ctx: AppContext) -> dict[str, Any]:
    """Load and warm the active collection; a no-op report when indexing isn't set up."""
    mod = optional_module("openkb.indexing.service")
    if mod is None:
        return {"skipped": "indexing not installed"}
    return mod.warm_active(ctx)  # type: ignore[no-any-return]


def create_app(ctx: AppContext, *, queue: Any = None, warm: bool = True) -> FastAPI:
    configure_logging(ctx.settings.openkb_log_level)
    if queue is None:
        from workers.queue import HueyQueue

        queue = HueyQueue()
    set_queue(queue)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def do_warm() -> None:
            t = time.perf_counter()
            try:
                app.state.warm["result"] = await asyncio.to_thread(_warmup, ctx) if warm else {"skipped": "disabled"}
            except Exception as exc:  # noqa: BLE001 - readiness reports it
                log.exception("warm-up failed")
                app.state.warm["error"] = str(exc)
            app.state.warm["ms"] = round((time.perf_counter() - t) * 1000)
            from openkb.runtime.memory import freeze_startup_heap

            freeze_startup_heap()  # requests then pay only for what they allocate (see the function)
            app.state.warm["done"] = True

        task = asyncio.create_task(do_warm())
        mcp = getattr(app.state, "mcp_lifespan", None)
        if mcp is not None:
            async with mcp():
                yield
        else:
            yield
        task.cancel()

    app = FastAPI(title="OpenKB", version=__version__, openapi_url="/api/openapi.json", docs_url="/api/docs",
                  redoc_url=None, lifespan=lifespan)
    app.state.ctx = ctx
    app.state.warm = {"done": False}
    errors.install(app)
    # Before request_id below, so that middleware wraps this one and a 413 still gets X-Request-Id.
    app.add_middleware(BodyLimitMiddleware, limit=lambda: ctx.settings.json_body_limit)

    @app.middleware("http")
    async def request_id(request: Request, call_next: Any) -> Any:
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex[:16]
        token = request_id_var.set(rid)
        t = time.perf_counter()
        try:
            response = await call_next(request)
        finally:
            request_id_var.reset(token)
        response.headers["X-Request-Id"] = rid
        log.debug("%s %s %s %.1fms", request.method, request.url.path, response.status_code,
                  (time.perf_counter() - t) * 1000)
        return response

    for name in ROUTER_MODULES:
        mod = optional_module(name)
        if mod is None:
            continue
        if hasattr(mod, "install"):
            mod.install(app)
        else:
            app.include_router(mod.router)

    base_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_413(base_openapi())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
