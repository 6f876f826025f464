"""Real external components on loopback: Debian's ``redis-server`` and an S3-compatible server.

The production topology (docs/deployment.md) swaps the embedded queue file for Redis and the
local blob folder for S3/MinIO. These fixtures start the real servers so the queue and blob-store
tests run against them as well as against the embedded defaults. A missing ``redis-server`` is a
failure, not a skip: a suite that silently skipped the Redis tests would claim coverage it does
not have (``.ci/run`` installs it).

The S3 server is moto's standalone server (``moto[server]`` from PyPI, a dev extra): it speaks the
S3 REST protocol over HTTP with SigV4 and presigned URLs, runs offline and starts in about a second.
MinIO (what compose/ runs) ships neither on PyPI nor in Debian, so it cannot be installed here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openkb.runtime.embedded import free_port

REDIS_INSTALL = "apt-get update -qq && apt-get install -y -qq redis-server"


def _wait(check, what: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"{what} exited during start (code {proc.returncode}): {log.read_text(errors='replace')[-800:]}"
            )
        try:
            if check():
                return
        except Exception:  # noqa: BLE001, S110 - not ready yet
            pass
        time.sleep(0.05)
    pytest.fail(f"{what} did not become ready within {timeout:.0f}s (log {log})")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A throwaway ``redis-server`` on a free loopback port, no persistence."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail(f"redis-server is not installed; the external-component tests need it: {REDIS_INSTALL}")
    import redis

    work = Path(tempfile.mkdtemp(prefix="openkb-redis-"))
    port = free_port()
    log = work / "redis.log"
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(work),
            "--logfile",
            str(log),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    _wait(lambda: redis.Redis.from_url(url, socket_timeout=1).ping(), "redis-server", proc, log)
    yield url
    _stop(proc)
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, str]]:
    """moto's S3 server in its own process on a free loopback port, with an asset bucket."""
    import boto3
    import httpx

    work = Path(tempfile.mkdtemp(prefix="openkb-s3-"))
    port = free_port()
    log = work / "s3.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    endpoint = f"http://127.0.0.1:{port}"
    _wait(lambda: httpx.get(endpoint + "/moto-api/", timeout=1).status_code == 200, "S3 server", proc, log)
    conf = {"endpoint": endpoint, "bucket": "openkb-assets", "access_key": "openkb", "secret_key": "openkb-secret"}
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=conf["access_key"],
        aws_secret_access_key=conf["secret_key"],
        region_name="us-east-1",
    ).create_bucket(Bucket=conf["bucket"])
    yield conf
    _stop(proc)
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_settings(s3_server):
    from openkb.config import Settings

    return Settings(
        s3_endpoint=s3_server["endpoint"],
        s3_bucket=s3_server["bucket"],
        s3_access_key=s3_server["access_key"],
        s3_secret_key=s3_server["secret_key"],
    )


@pytest.fixture(params=["local", "s3"])
def blobs(request, tmp_path):
    """The blob store both ways: the embedded local folder and S3 on the loopback server."""
    from openkb.storage import LocalBlobStore, S3BlobStore

    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    return S3BlobStore(request.getfixturevalue("s3_settings"))
