"""Real components for every test: embedded PostgreSQL (pgserver) and Milvus Lite.

The schema is built by running the Alembic migrations into a fresh database (never
``create_all``). Service tests get a ``db`` session inside a transaction that is rolled back;
tests that need committed data (HTTP, workers) use ``committed`` sessions and make their own
tenant so they don't see each other.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="openkb-test-home-"))
os.environ["OPENKB_HOME"] = str(_HOME)
os.environ["OPENKB_ENV"] = "test"
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")  # as cli/main.py does, before grpc loads
os.environ.setdefault("APP_BASE_URL", "http://127.0.0.1:8000")
for _var in ("DATABASE_URL", "MILVUS_URI", "REDIS_URL", "S3_ENDPOINT", "SMTP_HOST", "OPENKB_EMBEDDER_URL"):
    os.environ.pop(_var, None)

from sqlalchemy import text  # noqa: E402
from sqlmodel import Session  # noqa: E402

from openkb.config import Settings, reset_settings_cache  # noqa: E402
from openkb.db import get_engine  # noqa: E402
from openkb.runtime.embedded import EmbeddedServices  # noqa: E402

reset_settings_cache()


@pytest.fixture(scope="session", autouse=True)
def job_queue() -> Iterator[None]:
    """The process's job queue from the first test on, as ``openkb serve`` has it: the huey queue
    the ``worker`` fixture consumes. Fixtures that swap in a recorder restore what they found;
    found empty, a live server started while they held the swap (its app installs the queue)
    was left with none once they restored it, and every later job of that test process was
    lost, depending only on which test files ran first (seen with pytest-xdist's orders)."""
    from openkb import jobs
    from workers.queue import HueyQueue

    if jobs._queue is None:
        jobs.set_queue(HueyQueue())
    yield


@pytest.fixture(scope="module", autouse=True)
def job_queue_per_module(job_queue) -> Iterator[None]:
    """The job queue a test file found is the one the next file finds. An app built in a test
    installs its queue for the whole process (``create_app(ctx, queue=RecordingQueue())``, as
    ``openkb serve`` installs huey's), and a recorder left installed swallowed every job the live
    server enqueued afterwards: the worker's tests then waited for jobs that never reached huey,
    depending only on which test files ran before them in that process (pytest-xdist)."""
    from openkb import jobs

    before = jobs._queue
    yield
    jobs.set_queue(before)


@pytest.fixture(scope="session")
def test_home() -> Path:
    return _HOME


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings()


@pytest.fixture(scope="session")
def pg_server(settings: Settings) -> Iterator[str]:
    svc = EmbeddedServices(settings, components=("postgresql",))
    ep = svc.start()
    yield ep.database_url
    svc.stop()


def _with_db(url: str, dbname: str) -> str:
    # pgserver URIs look like postgresql://postgres:@/postgres?host=/socket/dir
    head, _, query = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{dbname}" + (f"?{query}" if query else "")


@pytest.fixture(scope="session")
def database_url(pg_server: str) -> str:
    import psycopg

    from openkb.migrate import upgrade

    dbname = f"openkb_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    url = _with_db(pg_server, dbname)
    upgrade(url)
    os.environ["DATABASE_URL"] = url
    reset_settings_cache()
    return url


@pytest.fixture(scope="session")
def engine(database_url: str):
    return get_engine(database_url)


@pytest.fixture()
def db(engine) -> Iterator[Session]:
    """A session whose every write is rolled back at the end of the test."""
    conn = engine.connect()
    trans = conn.begin()
    session = Session(bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()
        trans.rollback()
        conn.close()


@pytest.fixture()
def committed(engine):
    """Factory of ordinary sessions on the test database (writes persist)."""

    def make() -> Session:
        return Session(engine, expire_on_commit=False)

    return make


@pytest.fixture(scope="session")
def milvus_services(settings: Settings, database_url: str) -> Iterator[dict[str, str | None]]:
    svc = EmbeddedServices(settings, components=("milvus", "embedder"))
    ep = svc.start()
    os.environ["MILVUS_URI"] = ep.milvus_uri
    if ep.embedder_url:
        os.environ["OPENKB_EMBEDDER_URL"] = ep.embedder_url
    reset_settings_cache()
    yield {"milvus_uri": ep.milvus_uri, "embedder_url": ep.embedder_url}
    svc.stop()


def pytest_sessionfinish(session, exitstatus) -> None:  # noqa: ARG001
    from openkb.db import dispose_engines

    dispose_engines()
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture()
def count_queries(engine):
    """Context manager counting SQL statements issued on ``engine`` by the calling thread (for
    constant-query checks). Only this thread's: index jobs flush Milvus at most once a second,
    the trailing flush from a timer thread (openkb/indexing/service.py ``request_flush``), and
    its advisory-lock statement landed in whichever count was open."""
    import contextlib
    import threading

    from sqlalchemy import event

    @contextlib.contextmanager
    def counter():
        box = {"n": 0}
        me = threading.get_ident()

        def before(*_a, **_k):
            if threading.get_ident() == me:
                box["n"] += 1

        event.listen(engine, "before_cursor_execute", before)
        try:
            yield box
        finally:
            event.remove(engine, "before_cursor_execute", before)

    return counter


def exec_sql(session: Session, sql: str, **params):
    return session.execute(text(sql), params)


# --- live server and worker --------------------------------------------------------------


@pytest.fixture(scope="session")
def app_ctx(settings: Settings, database_url: str, milvus_services):
    """AppContext over the test components (PostgreSQL + Milvus Lite + embedder)."""
    from openkb.context import AppContext
    from openkb.runtime.embedded import Endpoints

    s = Settings()
    ep = Endpoints(
        database_url=database_url,
        milvus_uri=milvus_services["milvus_uri"],
        milvus_token=None,
        embedder_url=milvus_services["embedder_url"],
        queue=str(_HOME / "queue.db"),
        home=_HOME,
    )
    ctx = AppContext.build(s, ep)
    yield ctx
    from openkb.indexing.service import flush_pending

    flush_pending()  # a trailing flush of the last index jobs, before the services stop
    ctx.close()


@pytest.fixture(scope="session")
def live_server(app_ctx):
    """The real FastAPI app served by uvicorn on a free loopback port, for tests over HTTP."""
    import threading
    import time

    import httpx
    import uvicorn

    from openkb.runtime.embedded import free_port
    from server.app import create_app
    from workers.queue import HueyQueue

    port = free_port()
    app = create_app(app_ctx, queue=HueyQueue())
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    else:
        raise RuntimeError("test server did not become ready")
    yield base
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="session")
def worker(app_ctx):
    """A real huey consumer (threads) in this process, consuming the test queue file."""

    from workers import tasks
    from workers.consumer import build_consumer
    from workers.queue import get_huey

    tasks.set_context(app_ctx)
    huey = get_huey()
    consumer = build_consumer(huey, workers=2, periodic=False, check_worker_health=False)
    # Consumer.run() installs signal handlers (main thread only); start its threads directly.
    consumer.start()
    yield huey
    consumer.stop(graceful=True)


@pytest.fixture()
def http(live_server):
    import httpx

    with httpx.Client(base_url=live_server, timeout=30) as c:
        yield c
