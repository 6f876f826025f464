"""Dependency checks behind ``openkb doctor`` and ``/readyz``.

Each check returns a row with status, version, embedded/external and — when down — the fix an
operator should apply, so a failing doctor tells you what to do, not just what broke.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import text

from openkb.context import AppContext
from openkb.runtime.lite_files import REBUILD_FIX, home_lite, home_lite_files


@dataclass
class Check:
    name: str
    ok: bool
    mode: str
    version: str = ""
    detail: str = ""
    fix: str = ""
    ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _timed(fn: Callable[[], Check]) -> Check:
    t = time.perf_counter()
    c = fn()
    c.ms = round((time.perf_counter() - t) * 1000, 1)
    return c


def check_postgresql(ctx: AppContext) -> Check:
    mode = "embedded" if ctx.settings.embedded("postgresql") else "external"
    try:
        with ctx.engine.connect() as conn:
            version = conn.execute(text("SHOW server_version")).scalar_one()
            try:
                rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one_or_none()
            except Exception:  # noqa: BLE001
                rev = None
        from openkb.migrate import head_revision

        head = head_revision()
        if rev != head:
            return Check(
                "postgresql",
                False,
                mode,
                f"PostgreSQL {version}",
                f"schema at {rev}, code expects {head}",
                "run `openkb migrate`",
            )
        return Check("postgresql", True, mode, f"PostgreSQL {version}", f"schema {rev}")
    except Exception as exc:  # noqa: BLE001
        fix = (
            "check DATABASE_URL and that the server accepts connections"
            if mode == "external"
            else "run `openkb up`, or see $OPENKB_HOME/pg/log"
        )
        return Check("postgresql", False, mode, "", str(exc).splitlines()[0][:200], fix)


def check_milvus(ctx: AppContext) -> Check:
    mode = "embedded" if ctx.settings.embedded("milvus") else "external"
    try:
        client = ctx.milvus
        cols = client.list_collections()
        try:
            version = client.get_server_version()
        except Exception:  # noqa: BLE001
            version = "?"
        kind = "Milvus Lite" if mode == "embedded" else "Milvus"
        alias = ctx.settings.milvus_active_alias
        target = alias_target_quiet(client, alias)
        detail = f"{len(cols)} collections; {alias} -> {target or '(not set)'}"
        fix = ""
        if home_lite(ctx):
            detail += "; embedded Milvus Lite is for small knowledge bases, use Milvus 2.6 (MILVUS_URI) at scale"
            bm25, fix = _lite_bm25(ctx)
            detail += bm25
            files = home_lite_files(ctx, target)
            if files and files["piling_up"]:  # docs/retrieval.md#flushes
                detail += (
                    f"; {files['delta_files']} delta files of deletions: searches and saves slow down as they pile up"
                )
                fix = fix or REBUILD_FIX
        return Check("milvus", True, mode, f"{kind} {version}", detail, fix)
    except Exception as exc:  # noqa: BLE001
        fix = (
            "check MILVUS_URI / MILVUS_TOKEN and that Milvus 2.6 is up"
            if mode == "external"
            else "run `openkb up`, or see $OPENKB_HOME/logs/milvus.log"
        )
        return Check("milvus", False, mode, "", str(exc).splitlines()[0][:200], fix)


def _lite_bm25(ctx: AppContext) -> tuple[str, str]:
    """How the embedded Lite scores BM25 (docs/retrieval.md#bm25-statistics), as a part of the
    Milvus check's detail and, when per segment, its fix. Search works either way; per segment,
    pages saved since the last large write rank lower for their own keywords."""
    from openkb.runtime.home import Home
    from openkb.runtime.lite_server import bm25_scoring

    rec = bm25_scoring(Home(ctx.settings.openkb_home))
    if rec is None:
        return "", ""
    if rec["bm25"] == "collection-wide":
        return "; BM25 scored with the whole collection's statistics", ""
    reason = rec.get("reason") or "unknown reason"
    fix = (
        "install the milvus-lite version OpenKB pins (constraints.txt) and restart `openkb up`"
        if "not the one OpenKB knows" in reason
        else "see $OPENKB_HOME/logs/milvus.log; the next search that gathers them scores collection-wide again"
    )
    return f"; BM25 scored per segment ({reason}): pages saved lately rank lower for their own keywords", fix


def check_queue(ctx: AppContext) -> Check:
    s = ctx.settings
    if s.redis_url:
        try:
            import redis

            r = redis.Redis.from_url(s.redis_url, socket_connect_timeout=3)
            info = r.info("server")
            return Check("queue", True, "external", f"Redis {info.get('redis_version')}", "huey on Redis")
        except Exception as exc:  # noqa: BLE001
            return Check("queue", False, "external", "", str(exc)[:200], "check REDIS_URL and that Redis is up")
    path = ctx.endpoints.queue
    try:
        conn = sqlite3.connect(path, timeout=5)
        conn.execute("CREATE TABLE IF NOT EXISTS doctor_probe (x)")
        conn.execute("DROP TABLE doctor_probe")
        conn.close()
        return Check("queue", True, "embedded", f"SQLite {sqlite3.sqlite_version}", f"huey file {path}")
    except Exception as exc:  # noqa: BLE001
        return Check("queue", False, "embedded", "", str(exc)[:200], f"make {path} writable (OPENKB_HOME)")


def check_blobs(ctx: AppContext) -> Check:
    mode = "embedded" if ctx.settings.embedded("blobs") else "external"
    try:
        return Check("blobs", True, mode, ctx.blobs.kind, ctx.blobs.check())
    except Exception as exc:  # noqa: BLE001
        fix = "check S3_ENDPOINT, S3_BUCKET and the keys" if mode == "external" else "make $OPENKB_HOME/blobs writable"
        return Check("blobs", False, mode, ctx.blobs.kind, str(exc)[:200], fix)


def check_mail(ctx: AppContext) -> Check:
    mode = "embedded" if ctx.settings.embedded("mail") else "external"
    try:
        return Check("mail", True, mode, "outbox" if mode == "embedded" else "SMTP", ctx.mailer.check())
    except Exception as exc:  # noqa: BLE001
        return Check("mail", False, mode, "", str(exc)[:200], "check SMTP_HOST, SMTP_USER, SMTP_PASSWORD")


def check_embedder(ctx: AppContext) -> Check:
    """Informational: without an embedder the default profile searches with BM25 only."""
    mode = "embedded" if ctx.settings.embedded("embedder") else "external"
    url = ctx.endpoints.embedder_url
    if not url:
        return Check(
            "embedder",
            False,
            mode,
            "",
            "no embedding service: search is BM25-only" + _dense_profile_note(ctx),
            "see $OPENKB_HOME/logs/embedder.log; set OPENKB_EMBEDDER_URL to an OpenAI-compatible /v1",
        )
    try:
        import httpx

        r = httpx.get(url.rstrip("/") + "/models", timeout=3)
        r.raise_for_status()
        models = [m.get("id") for m in r.json().get("data", [])]
        return Check("embedder", True, mode, ", ".join(str(m) for m in models), f"{url} (called by Milvus, not OpenKB)")
    except Exception as exc:  # noqa: BLE001
        return Check(
            "embedder",
            False,
            mode,
            "",
            f"{url}: {exc}"[:160] + _dense_profile_note(ctx),
            "search falls back to BM25-only; see $OPENKB_HOME/logs/embedder.log",
        )


def _dense_profile_note(ctx: AppContext) -> str:
    """When the active collection was built with dense vectors, a missing embedder is worse than
    "BM25-only": every index write needs it, so jobs fail and retry until it is back."""
    try:
        from sqlmodel import Session

        from openkb.indexing.profiles import find_by_collection

        target = alias_target_quiet(ctx.milvus, ctx.settings.milvus_active_alias)
        if not target:
            return ""
        with Session(ctx.engine) as s:
            prof = find_by_collection(s, target)
        if prof is None or prof.vector_dim <= 0:
            return ""
        return (
            f"; the active profile {prof.name} ({target}) has {prof.vector_dim}-d dense vectors: "
            "index writes fail and retry until an embedder is back"
        )
    except Exception:  # noqa: BLE001 - doctor must report, not crash
        return ""


def dense_readiness(ctx: AppContext) -> Check | None:
    """The dense route of the active profile (None for a BM25-only one): down when its embedding
    service does not answer, or when this process's last search had to go without it. Search
    still answers (keywords only, ``degraded: ["dense"]``), so ``/readyz`` reports it without
    failing readiness (docs/retrieval.md#degradation)."""
    import time

    import httpx
    from sqlmodel import Session

    from openkb.indexing.milvus import DENSE_ROUTE
    from openkb.indexing.profiles import active_spec

    try:
        with Session(ctx.engine) as s:
            _, spec = active_spec(ctx, s)
    except Exception:  # noqa: BLE001 - the postgresql check reports the outage
        return None
    if spec is None or not spec.has_dense or spec.embedding is None:
        return None
    url = spec.embedding.base_url
    mode = "embedded" if ctx.settings.embedded("embedder") else "external"
    if url and url.startswith(("http://", "https://")):
        try:
            httpx.get(url.rstrip("/") + "/models", timeout=2).raise_for_status()
        except Exception as exc:  # noqa: BLE001
            return Check("dense", False, mode, "", f"{url}: {exc}"[:200], "search answers with keywords only")
    seen = DENSE_ROUTE
    if seen["failed_at"] > seen["ok_at"] and time.monotonic() - seen["failed_at"] < 60:
        return Check("dense", False, mode, "", f"the last search went without it: {seen['error']}"[:200])
    return Check("dense", True, mode, "", url or "")


def index_readiness(ctx: AppContext, warmed_collection: str | None) -> dict[str, Any]:
    """What ``/readyz`` says about the index, asked of Milvus on every call: the collection the
    active alias points at *now*, and whether that is the one this process warmed.

    Trap: the warm-up result is a snapshot from start-up; after ``openkb index switch`` or
    ``rollback`` (often run from another process) it names the old collection. Reporting it as
    the active one is what made ``/readyz`` lie after a switch; the adapter re-warms when
    ``warmed`` is false."""
    alias = ctx.settings.milvus_active_alias
    try:
        target = alias_target_quiet(ctx.milvus, alias)
    except Exception:  # noqa: BLE001 - the milvus check reports the outage
        target = None
    return {
        "alias": alias,
        "collection": target,
        "warmed_collection": warmed_collection,
        "warmed": target is not None and target == warmed_collection,
    }


def alias_target_quiet(client: Any, alias: str) -> str | None:
    """describe_alias raises (and pymilvus logs a traceback) when the alias is missing."""
    import logging as _logging

    lg = _logging.getLogger("pymilvus")
    old = lg.level
    lg.setLevel(_logging.CRITICAL)
    try:
        return client.describe_alias(alias=alias).get("collection_name")  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001
        return None
    finally:
        lg.setLevel(old)


def supervised_parts(settings: Any) -> dict[str, Any] | None:
    """What the live ``openkb up`` of this home says about each part it supervises (state,
    pid, restarts, last exit reason; docs/operations.md#supervision), or None when no supervisor
    runs (``openkb serve`` on its own, or a dead supervisor's leftover file)."""
    from openkb.runtime.home import Home
    from openkb.runtime.supervision import read_parts

    snap = read_parts(Home(settings.openkb_home))
    return None if snap is None else dict(snap["parts"])


CORE_CHECKS = (check_postgresql, check_milvus, check_queue, check_blobs, check_mail)


def run_checks(ctx: AppContext, include_embedder: bool = True) -> list[Check]:
    checks = [_timed(lambda f=f: f(ctx)) for f in CORE_CHECKS]
    if include_embedder:
        checks.append(_timed(lambda: check_embedder(ctx)))
    return checks


def preflight(settings: Any, endpoints: Any) -> None:
    """Fail fast, naming the variable, when an external component is unreachable.

    Run by ``openkb up`` before any child starts, so a typo in MILVUS_URI is one clear line
    instead of an API that never becomes ready.
    """
    from sqlalchemy import create_engine

    from openkb.db import normalize_url
    from openkb.errors import ServiceUnavailable

    eng = create_engine(normalize_url(endpoints.database_url), connect_args={"connect_timeout": 5})
    try:
        with eng.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001
        var = "DATABASE_URL" if settings.database_url else "the embedded PostgreSQL"
        raise ServiceUnavailable(f"{var} is unreachable: {str(exc).splitlines()[0][:200]}") from None
    finally:
        eng.dispose()
    try:
        from openkb.runtime.embedded import milvus_ready

        milvus_ready(endpoints.milvus_uri, endpoints.milvus_token, timeout=5)
    except Exception as exc:  # noqa: BLE001
        var = f"MILVUS_URI={endpoints.milvus_uri}" if settings.milvus_uri else "the embedded Milvus Lite"
        raise ServiceUnavailable(
            f"{var} is unreachable ({str(exc).splitlines()[0][:160]}): start Milvus 2.6 there, fix the URI, "
            "or unset MILVUS_URI for the embedded Milvus Lite"
        ) from None
    if settings.redis_url:
        try:
            import redis

            redis.Redis.from_url(settings.redis_url, socket_connect_timeout=3).ping()
        except Exception as exc:  # noqa: BLE001
            raise ServiceUnavailable(f"REDIS_URL is unreachable: {exc}") from None
