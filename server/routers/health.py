"""Liveness and readiness. ``/readyz`` is 200 only once every dependency answers and the active
Milvus collection has been loaded and warmed (so no user pays Lite's first-search warm-up).

``index`` in the body is asked of Milvus on every call (``openkb.health.index_readiness``): after
an alias switch or rollback it names the new collection at once, and the process warms that one
in the background (readiness stays 200 meanwhile: the switch itself loaded the collection, a
load balancer must not drop the API because an operator switched).

Under ``openkb up`` the body also carries ``parts``: the supervisor's view of each part (state,
pid, restarts, last exit reason; docs/operations.md#supervision), and readiness is 503 while a
part is being restarted (``parts_down``). An embedder given up on only degrades search."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from openkb.health import (
    check_milvus,
    check_postgresql,
    check_queue,
    dense_readiness,
    index_readiness,
    supervised_parts,
)
from openkb.runtime.supervision import parts_down

router = APIRouter(tags=["health"])
log = logging.getLogger("openkb.server.health")
_rewarms: set[asyncio.Task[Any]] = set()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "alive"}


def _rewarm(app: FastAPI, ctx: Any) -> None:
    """Warm the collection the alias points at now, once at a time per process."""
    warm = app.state.warm
    if warm.get("rewarming"):
        return
    warm["rewarming"] = True

    async def go() -> None:
        from openkb.indexing.service import warm_active

        try:
            warm["result"] = await asyncio.to_thread(warm_active, ctx)
        except Exception as exc:  # noqa: BLE001 - readiness reports it
            log.exception("re-warm after an alias switch failed")
            warm["error"] = str(exc)
        finally:
            warm["rewarming"] = False

    task = asyncio.create_task(go())
    _rewarms.add(task)
    task.add_done_callback(_rewarms.discard)


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    ctx = request.app.state.ctx
    warm = request.app.state.warm
    warmed = (warm.get("result") or {}).get("collection")
    checks, index, parts, dense = await asyncio.to_thread(
        lambda: (
            [check_postgresql(ctx), check_milvus(ctx), check_queue(ctx)],
            index_readiness(ctx, warmed),
            supervised_parts(ctx.settings),
            dense_readiness(ctx),
        )
    )
    down = parts_down(parts) if parts else []
    disabled = (warm.get("result") or {}).get("skipped") == "disabled"
    if warm["done"] and not disabled and index["collection"] and not index["warmed"]:
        _rewarm(request.app, ctx)
    body = {
        "status": "ready" if all(c.ok for c in checks) and warm["done"] and not down else "not_ready",
        "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in checks},
        "index": index,
        "warmup": warm,
        # search without dense vectors still answers (keywords): reported, readiness unchanged
        "degraded": [] if dense is None or dense.ok else ["dense"],
    }
    if dense is not None:
        body["checks"]["dense"] = {"ok": dense.ok, "detail": dense.detail}
    if parts is not None:
        body["parts"] = parts
        body["parts_down"] = down
    return JSONResponse(body, status_code=200 if body["status"] == "ready" else 503)
