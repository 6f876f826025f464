"""FastAPI app factory.

The app receives a built ``AppContext``; it does not start embedded services itself (the
``openkb serve``/``up`` commands do), so tests can build it against their own components.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from openkb import __version__
from openkb.context import AppContext
from openkb.db import bound_requests
from openkb.errors import CsrfFailed, InsufficientScope, TransactionConflict, Unauthenticated
from openkb.indexing.service import warm_active
from openkb.jobs import JobQueue, set_queue
from openkb.retrieval import segment
from server import docs_ui, errors
from server.auth import SAFE_METHODS, check_scopes, get_auth
from server.body_limit import BodyLimitMiddleware, document_413
from server.head import HeadAsGet
from server.hsts import StrictTransportSecurity
from server.logs import configure_logging
from server.mcp import mount as mount_mcp
from server.mcp import openapi_path as mcp_openapi_path
from server.nostore import NoStoreByDefault
from server.retry import RetryOnConflict
from server.routers import (
    account,
    admin,
    admin_roles,
    app_facts,
    apps,
    assets,
    auth,
    changes,
    content,
    dify,
    export,
    groups,
    health,
    imports,
    kb_index,
    mcp_admin,
    milvus_admin,
    oauth,
    search,
    sharing,
)
from server.web import router as web_router

log = logging.getLogger("openkb.server")

# Every router, imported plainly: a missing or broken one fails the start, not one route later.
ROUTERS = (
    health.router,
    auth.router,
    account.router,
    admin.router,
    admin_roles.router,
    groups.router,
    content.router,
    kb_index.router,
    sharing.router,
    assets.router,
    changes.router,
    search.router,
    milvus_admin.router,
    mcp_admin.router,
    dify.router,
    oauth.router,
    imports.router,
    export.router,
    apps.router,
    app_facts.router,
    web_router,
)  # last: the web app's pages and assets (server/web)


def create_app(ctx: AppContext, *, queue: JobQueue, warm: bool = True) -> FastAPI:
    """``queue`` is where services' after-commit jobs go (``workers.queue.HueyQueue`` in
    ``openkb serve``; a ``RecordingQueue`` in tests): the caller chooses it, so the server never
    imports the worker package."""
    configure_logging(ctx.settings.openkb_log_level)
    set_queue(queue)
    bound_requests(ctx.engine)  # statement and idle-transaction bounds on request work (openkb/db.py)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def do_warm() -> None:
            t = time.perf_counter()
            # Chinese segmentation's dictionary loads beside the index (openkb/retrieval/segment.py)
            words = asyncio.create_task(asyncio.to_thread(segment.warm)) if warm else None
            try:
                app.state.warm["result"] = (
                    await asyncio.to_thread(warm_active, ctx) if warm else {"skipped": "disabled"}
                )
            except Exception as exc:  # noqa: BLE001 - readiness reports it
                log.exception("warm-up failed")
                app.state.warm["error"] = str(exc)
            if words is not None:
                try:
                    app.state.warm["segmenter_s"] = round(await words, 2)
                except Exception:  # noqa: BLE001 - highlights load it on first use instead
                    log.exception("loading the word segmenter failed")
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

    app = FastAPI(
        title="OpenKB",
        version=__version__,
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    app.state.warm = {"done": False}
    errors.install(app)
    oauth.install(app)  # OAuth endpoints answer errors in OAuth's wire shape (docs/oauth.md#errors)
    docs_ui.install(app)  # /api/docs with Swagger UI assets from a package, no CDN
    # A write PostgreSQL rolled back to break a deadlock is run again (server/retry.py). Inside the
    # body limit, which has read (and bounded in size and time) the body it replays.
    app.add_middleware(RetryOnConflict)
    # Before RequestFrame below, so that it wraps this one and a 413 still gets X-Request-Id.
    app.add_middleware(BodyLimitMiddleware, limit=lambda: ctx.settings.json_body_limit)

    # the request's id, and one 500 for an unexpected exception from any layer below (server/errors.py)
    app.add_middleware(errors.RequestFrame)
    app.add_middleware(
        HeadAsGet, routes=lambda: app.router.routes
    )  # every layer below sees the GET it answers (server/head.py)
    # API answers are the caller's: not kept by caches unless a route says so (server/nostore.py)
    app.add_middleware(NoStoreByDefault)
    # outermost: HSTS on every answer when APP_BASE_URL is https (server/hsts.py, docs/web.md#security)
    app.add_middleware(StrictTransportSecurity, base_url=lambda: ctx.settings.app_base_url)

    # before the routers: the web app's catch-all pages come last among them
    if ctx.settings.openkb_mcp_enabled:  # OPENKB_MCP_ENABLED=false switches the endpoint off
        mount_mcp(app, ctx)  # /mcp (docs/mcp.md); its session manager runs in the lifespan above
    for router in ROUTERS:
        if router is dify.router and not ctx.settings.openkb_dify_enabled:
            # OPENKB_DIFY_ENABLED=false: /retrieval is not served (docs/dify.md); keys stay manageable
            app.include_router(dify.admin)
            continue
        app.include_router(router)

    base_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = base_openapi()
            if ctx.settings.openkb_mcp_enabled:
                schema["paths"]["/mcp"] = mcp_openapi_path()  # its body passes the body guard too (408, 422)
            app.openapi_schema = _document_auth_errors(app, document_413(schema))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _calls(dependant: Any) -> Iterator[Any]:
    """Every callable a route runs before and as its body: its dependencies (recursively), itself."""
    for dep in dependant.dependencies:
        yield from _calls(dep)
    if dependant.call is not None:
        yield dependant.call


def _document_auth_errors(app: FastAPI, schema: dict[str, Any]) -> dict[str, Any]:
    """List the credential errors on the operations that can answer them (``x-error-codes``).

    They come from dependencies, not from the routes' own ``responses=``: a route that resolves
    the caller (``get_auth``) answers 401 ``UNAUTHENTICATED`` for a bad bearer token and, for an
    unsafe method, 403 ``CSRF_FAILED`` (cookie without the header); one whose dependencies or
    body call ``check_scopes`` answers 403 ``INSUFFICIENT_SCOPE``. Found from the dependency
    graph, so a new route is documented the moment it uses them.
    """
    for route in iter_route_contexts(app.routes):  # FastAPI >= 0.16x: included routers are lazy
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        calls = list(_calls(route.dependant))
        if get_auth not in calls:
            continue
        scoped = any(check_scopes.__name__ in getattr(getattr(c, "__code__", None), "co_names", ()) for c in calls)
        for method in route.methods:
            op = schema["paths"].get(route.path_format, {}).get(method.lower())
            if op is None:
                continue
            extra = errors.errors_for(Unauthenticated)
            if method not in SAFE_METHODS:
                # any write may meet a deadlock the server could not retry away (server/retry.py)
                extra = errors.errors_for(extra, CsrfFailed, TransactionConflict)
            if scoped:
                extra = errors.errors_for(extra, InsufficientScope)
            responses = op.setdefault("responses", {})
            for status, entry in extra.items():
                mine = responses.setdefault(
                    str(status),
                    {
                        "description": entry["description"],
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                    },
                )
                codes = mine.setdefault("x-error-codes", [])
                codes.extend(c for c in entry["x-error-codes"] if c not in codes)
                mine["description"] = ", ".join(codes)
    return schema
