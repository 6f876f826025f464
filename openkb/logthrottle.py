"""Log an outage once per interval with a count, not once per request.

During a Milvus outage every search used to log a 23 KB traceback (pymilvus logs each failed RPC
with its stack): ``api.log`` grew by 64 MB in 2.5 minutes. Two tools keep that to one line per
kind of failure per ``INTERVAL_S``:

* ``throttled(logger, key, level, msg, *args)`` for OpenKB's own log calls: the first call of a
  ``key`` logs, later ones within the interval are counted, and the first call after it logs
  with "(N more like this in the last 60 s)".
* ``OncePerInterval``, a ``logging.Filter`` for libraries' loggers (pymilvus): the same, keyed
  by the record's logger and message template; the record keeps only its first line and loses
  its traceback (``exc_info``), since the traceback of a refused connection says nothing new.

Trap: the counts live in the process; each API replica and worker logs its own line.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

INTERVAL_S = 60.0

_lock = threading.Lock()
_state: dict[str, list[float]] = {}  # key -> [window start (monotonic), suppressed count]


def _admit(key: str, interval: float) -> tuple[bool, int]:
    """(log now?, how many were suppressed since the last logged one)."""
    now = time.monotonic()
    with _lock:
        st = _state.get(key)
        if st is None or now - st[0] >= interval:
            suppressed = int(st[1]) if st else 0
            _state[key] = [now, 0]
            if len(_state) > 10_000:  # keys are few by design; never grow without bound
                _state.clear()
                _state[key] = [now, 0]
            return True, suppressed
        st[1] += 1
        return False, 0


def throttled(logger: logging.Logger, key: str, level: int, msg: str, *args: Any, interval: float = INTERVAL_S) -> bool:
    """Log ``msg % args`` unless a message with the same ``key`` was logged within ``interval``
    seconds; returns whether it logged."""
    ok, suppressed = _admit(f"{logger.name}|{key}", interval)
    if not ok:
        return False
    if suppressed:
        msg = msg + " (%d more like this in the last %.0f s)"
        args = (*args, suppressed, interval)
    logger.log(level, msg, *args)
    return True


class OncePerInterval(logging.Filter):
    """See the module docstring. Attach to a library's logger (``logger.addFilter``)."""

    def __init__(self, interval: float = INTERVAL_S, min_level: int = logging.WARNING) -> None:
        super().__init__()
        self.interval = interval
        self.min_level = min_level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.min_level:
            return True
        first = str(record.msg).split("\n", 1)[0]
        # pymilvus formats its messages before logging (f-strings): key on the words before
        # the first detail so "RPC error: [search], <MilvusException ...>" groups by call
        key = f"{record.name}|{first.split('<', 1)[0][:120]}"
        ok, suppressed = _admit(key, self.interval)
        if not ok:
            return False
        try:
            text = record.getMessage().split("\n", 1)[0]
        except Exception:  # noqa: BLE001 - a bad format string: keep the template
            text = first
        if suppressed:
            text += f" ({suppressed} more like this in the last {self.interval:.0f} s)"
        record.msg, record.args = text[:2000], None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def reset() -> None:
    """Forget every count (tests)."""
    with _lock:
        _state.clear()
