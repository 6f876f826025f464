"""Size rotation of the appliance's log files, "copytruncate" style: the one rule for ``api.log``,
``worker.log`` (rotated from inside those processes by ``server/logs.py``) and ``supervisor.log``
(rotated by ``openkb up`` itself, openkb/runtime/supervision.py); docs/operations.md#outages.

Why copy-then-truncate instead of renaming: each of these files is held open in append mode by
processes that cannot reopen it (a child's stdout and stderr are the file; the PostgreSQL
watchdog's output goes to ``supervisor.log``). Truncating the same inode keeps every writer
appending at the new end. Trap: a line written between the copy and the truncation is lost; a
rotation happens once per ``max_bytes``, so that is rare and bounded.
"""

from __future__ import annotations

import os
import shutil

DEFAULT_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_BACKUPS = 3


def log_limits() -> tuple[int, int]:
    """``(max_bytes, backups)`` from ``OPENKB_LOG_MAX_BYTES`` and ``OPENKB_LOG_BACKUPS``."""
    max_bytes = int(os.environ.get("OPENKB_LOG_MAX_BYTES", "") or DEFAULT_MAX_BYTES)
    backups = int(os.environ.get("OPENKB_LOG_BACKUPS", "") or DEFAULT_BACKUPS)
    return max_bytes, max(1, backups)


def rotate_if_over(path: str, fd: int, max_bytes: int, backups: int) -> bool:
    """Rotate ``path`` (open as ``fd``) when it is larger than ``max_bytes``: ``.1`` .. ``.N``
    shift up (the oldest beyond ``backups`` is overwritten), the file is copied to ``.1`` and
    truncated in place. The caller flushes its own buffers first. Returns whether it rotated;
    ``OSError`` is the caller's to swallow (a log that cannot rotate must not stop logging)."""
    if max_bytes <= 0 or os.fstat(fd).st_size <= max_bytes:
        return False
    for n in range(max(1, backups) - 1, 0, -1):
        older = f"{path}.{n}"
        if os.path.exists(older):
            os.replace(older, f"{path}.{n + 1}")
    shutil.copyfile(path, f"{path}.1")
    os.ftruncate(fd, 0)
    return True
