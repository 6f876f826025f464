"""The layout of ``$OPENKB_HOME`` and the run files that let processes share one instance.

Each embedded service has an owner: the first process that takes ``run/<name>.lock`` (an
``flock``, so a killed owner releases it automatically — stale locks clear themselves) starts
the service and writes ``run/<name>.json``; every other process reads that record and connects.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from openkb.errors import ConfigError


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def pg_dir(self) -> Path:
        return self.root / "pg"

    @property
    def milvus_dir(self) -> Path:
        return self.root / "milvus"

    @property
    def blobs_dir(self) -> Path:
        return self.root / "blobs"

    @property
    def outbox_dir(self) -> Path:
        return self.root / "outbox"

    @property
    def queue_path(self) -> Path:
        return self.root / "queue.db"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def ensure(self) -> Home:
        """Create the layout; an unwritable home is a config error naming OPENKB_HOME."""
        try:
            for d in (self.root, self.blobs_dir, self.outbox_dir, self.run_dir, self.log_dir, self.milvus_dir):
                d.mkdir(parents=True, exist_ok=True)
            probe = self.run_dir / f".write-probe-{os.getpid()}"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            raise ConfigError(
                f"OPENKB_HOME={self.root} is not writable ({exc.strerror}): "
                "choose a writable directory with OPENKB_HOME=/path or fix its permissions"
            ) from None
        return self

    def record_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.json"

    def lock_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.lock"


class OwnerLock:
    """Non-blocking exclusive flock on ``run/<name>.lock``; held for the owner's lifetime."""

    def __init__(self, home: Home, name: str) -> None:
        self.home = home
        self.name = name
        self._fh: IO[str] | None = None

    def try_acquire(self) -> bool:
        fh = open(self.home.lock_path(self.name), "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        self._fh = fh
        return True

    def acquire(self, timeout: float, on_wait: Any = None) -> bool:
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            if self.try_acquire():
                return True
            if not waited and on_wait is not None:
                on_wait(read_record(self.home, self.name))
                waited = True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    @property
    def held(self) -> bool:
        return self._fh is not None

    def release(self) -> None:
        if self._fh is not None:
            try:
                self.home.record_path(self.name).unlink(missing_ok=True)
            finally:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
                self._fh.close()
                self._fh = None


def cache_dir() -> Path | None:
    """``$OPENKB_HOME/cache``, where parsed dictionaries are kept between starts (jieba's, for
    the API's highlights and Milvus Lite's analyzer); None (the library's temp folder) if the home
    is not writable, e.g. a read-only container where only the database and blob store persist."""
    from openkb.config import get_settings

    path = Path(get_settings().openkb_home) / "cache"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


def write_record(home: Home, name: str, data: dict[str, Any]) -> None:
    path = home.record_path(name)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**data, "pid": os.getpid(), "written_at": time.time()}))
    tmp.replace(path)


def read_record(home: Home, name: str) -> dict[str, Any] | None:
    """The live owner's record, or None when missing or left by a dead process."""
    path = home.record_path(name)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    pid = data.get("pid")
    if not isinstance(pid, int) or not psutil.pid_exists(pid):
        return None
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return data


def lock_is_held(home: Home, name: str) -> bool:
    probe = OwnerLock(home, name)
    if probe.try_acquire():
        # Free: release without deleting a record someone may be about to write.
        assert probe._fh is not None
        fcntl.flock(probe._fh.fileno(), fcntl.LOCK_UN)
        probe._fh.close()
        probe._fh = None
        return False
    return True
