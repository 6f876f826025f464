"""Run an iterator a few items ahead in a thread (docs/export.md#speed).

An export's stream waits on PostgreSQL for each batch of bodies. Python holds one lock (the
GIL) for its own work, but a thread waiting on a socket releases it, so a reader thread that
fetches the next batches while the stream's thread turns the current one into zip members lets
PostgreSQL (another process, another core) work at the same time as Python. Only the waiting
and the driver's decoding happen in the reader; the stream's thread does all the rest, so it
never waits for the lock to come back from a thread that is building members (a hand-over
costs up to Python's 5 ms switch interval; one per batch made the earlier helper-thread design
no faster than doing everything in one thread).

Bounded: at most ``depth`` items wait in the queue (memory stays flat). Trap: the reader must not
touch the database after the stream ends (the caller then commits or closes the session), so
closing the iterator — at the end, on an error, or when a client goes away and the generator is
closed — stops the reader before the next item and waits for it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["ahead"]

T = TypeVar("T")
_END = object()
_POLL = 0.05  # how often a reader blocked on a full queue looks whether it should stop


def ahead(source: Iterable[T], depth: int, name: str) -> Iterator[T]:
    """The items of ``source``, produced in a thread at most ``depth`` items ahead of the caller;
    an exception raised by ``source`` is raised here, in order."""
    q: queue.Queue[tuple[object, BaseException | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[object, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                q.put(entry, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        it = iter(source)
        try:
            while not stop.is_set():
                try:
                    item = next(it)
                except StopIteration:
                    put((_END, None))
                    return
                if not put((item, None)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            put((_END, exc))

    reader = threading.Thread(target=run, name=name, daemon=True)
    reader.start()
    try:
        while True:
            item, exc = q.get()
            if item is _END:
                if exc is not None:
                    raise exc
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        try:  # a reader blocked on the full queue gets its room at once, then sees ``stop``
            while True:
                q.get_nowait()
        except queue.Empty:
            pass
        reader.join()
