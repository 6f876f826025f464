"""Request ids in every log line, across the API, its threads and its libraries; and logs that
rotate by size.

Under ``openkb up`` the API's and the worker's stdout and stderr are a file
(``$OPENKB_HOME/logs/api.log``, ``worker.log``) opened by the supervisor in append mode. Nothing
rotated it: an outage once grew ``api.log`` by 64 MB in 2.5 minutes. The handler here rotates
that file from inside the process with the appliance's one rotation rule
(``openkb.runtime.logfiles``, also used for ``supervisor.log``): past ``OPENKB_LOG_MAX_BYTES``
(default 50 MB) the file is copied to ``.1`` (older copies shift up to ``OPENKB_LOG_BACKUPS``,
default 3) and truncated; because the descriptor is in append mode, every writer (logging,
uvicorn, a crash's traceback) continues at the new end. On a terminal or a pipe (``openkb serve``
in a container) nothing is rotated: the collector rotates.
"""

from __future__ import annotations

import contextvars
import logging
import os
import stat
import sys
from typing import Any

from openkb.runtime.logfiles import log_limits, rotate_if_over

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class SizeRotatingStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A stderr handler that rotates stderr's file by size (see the module docstring)."""

    CHECK_EVERY = 100  # records between two size checks (an fstat each)

    def __init__(self, stream: Any, max_bytes: int, backups: int) -> None:
        super().__init__(stream)
        self.max_bytes = max_bytes
        self.backups = max(1, backups)
        self._count = 0
        self.path = _file_of(stream)

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self.path is None or self.max_bytes <= 0:
            return
        self._count += 1
        if self._count % self.CHECK_EVERY == 0 or len(self.format(record)) > 4096:
            self.rotate_if_needed()

    def rotate_if_needed(self) -> bool:
        try:
            fd = self.stream.fileno()
            if self.path is None or os.fstat(fd).st_size <= self.max_bytes:
                return False
            self.acquire()
            try:
                self.flush()
                return rotate_if_over(self.path, fd, self.max_bytes, self.backups)
            finally:
                self.release()
        except (OSError, ValueError):  # a closed or odd stream: keep logging, skip the rotation
            return False


def _file_of(stream: Any) -> str | None:
    """The path of the regular file ``stream`` writes to, or None (a terminal, a pipe)."""
    try:
        fd = stream.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        path = os.readlink(f"/proc/self/fd/{fd}")
        return path if os.path.isfile(path) else None
    except (OSError, ValueError, AttributeError):
        return None


def configure_logging(level: str = "INFO") -> None:
    root = logging.getLogger()
    if any(getattr(h, "_openkb", False) for h in root.handlers):
        return
    max_bytes, backups = log_limits()
    handler = SizeRotatingStderr(sys.stderr, max_bytes=max_bytes, backups=backups)
    handler._openkb = True  # type: ignore[attr-defined]
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "alembic", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
