"""Liveness and readiness. ``/readyz`` is 200 only once every dependency answers and the active
Milvus collection has been loaded and warmed (so no user pays Lite's first-search warm-up)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from openkb.health import check_milvus, check_postgresql, check_queue

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "alive"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    ctx = request.app.state.ctx
    checks = await asyncio.to_thread(lambda: [check_postgresql(ctx), check_milvus(ctx), check_queue(ctx)])
    warm = request.app.state.warm
    body = {"status": "ready" if all(c.ok for c in checks) and warm["done"] else "not_ready",
            "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in checks},
            "warmup": warm}
    return JSONResponse(body, status_code=200 if body["status"] == "ready" else 503)
