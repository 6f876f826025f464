"""The conversion worker processes of ``--jobs N`` (docs/importing.md#speed).

Each worker is ``python -m openkb.importing.worker``: a fresh interpreter that imports
``importing.prepare`` (no database code) and answers requests on its stdin/stdout.

Why not ``multiprocessing``: its workers run the importing program's ``__main__`` again before
they take any work — with ``spawn``, and with ``forkserver`` too, whose preload of ``__main__``
never happens in CPython 3.11 (it looks for a ``main_path`` key that the preparation data never
has). For the CLI that is the whole command-line app imported once more per worker, for a
script whatever its top level does (``bench/import.py`` left a temporary directory behind per
worker); on a busy machine the workers started seconds after the import began. And ``fork`` is
out: the importing process holds database and gRPC handles and threads.

Each worker runs in a session of its own (``start_new_session``): Linux's autogroup scheduling
shares a busy CPU between sessions, not processes, so workers in the importer's session only
split its share (measured: ``--jobs 2`` no faster than one process at load 10 on 2 cores, and
1.5-1.9x faster in their own sessions).

Protocol: frames of an 8-byte big-endian length and a pickle. A request is ``(items, nonce,
max_chars)`` (``items``: ``(rel, data)`` pairs; the rest as ``prepare_many`` takes them), the answer ``list[Prepared]``; EOF on stdin ends the worker.
Trap: a converter library that prints would corrupt the answers on stdout, so the worker first
points file descriptor 1 at stderr and answers on a private copy of the original.

:class:`Workers` is the importing side: one thread per worker process feeds it tasks from the
front of the list while the caller works on tasks from the back (:meth:`Workers.run`), so the
import makes progress while the workers start. A worker that dies (a converter crashing the
interpreter on a hostile file) is replaced and its task is redone one file per request, so only
the file that kills it fails, with ``CONVERSION_FAILED``.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from openkb.importing.prepare import Prepared, prepare_many
from openkb.runtime.python import module_command

__all__ = ["Workers", "main"]

_LEN = struct.Struct(">Q")
Item = tuple[str, bytes]


class _Died(Exception):
    """The worker process ended (or broke the protocol) while it had a request."""


def _send(out: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LEN.pack(len(data)))
    out.write(data)
    out.flush()


def _recv(inp: IO[bytes]) -> Any:
    head = inp.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    size = _LEN.unpack(head)[0]
    data = inp.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 - our own process on the other end of a private pipe


def main() -> None:
    """The worker's loop (``python -m openkb.importing.worker``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the importing process stops its workers itself
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a converter prints goes to stderr, never into the answers
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    while True:
        try:
            items, nonce, max_chars = _recv(requests)
        except EOFError:
            return
        _send(answers, prepare_many(items, nonce, max_chars))


class _Proc:
    def __init__(self) -> None:
        env = dict(os.environ)
        # importable the way this process imports it (a source checkout, a bench script's path)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        self.p = subprocess.Popen(
            module_command("openkb.importing.worker"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
            # a session of its own: autogroup scheduling (module docstring). Ctrl-C does not reach
            # it: the importer stops it, and it ends when its stdin closes (the importer died)
            start_new_session=True,
        )

    def ask(self, items: list[Item], nonce: str, max_chars: int | None = None) -> list[Prepared]:
        assert self.p.stdin is not None and self.p.stdout is not None
        try:
            _send(self.p.stdin, (items, nonce, max_chars))
            got = _recv(self.p.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self.kill()
            raise _Died(str(exc) or type(exc).__name__) from exc
        if not isinstance(got, list) or len(got) != len(items):
            self.kill()
            raise _Died("the worker answered something else")
        return got

    def close(self) -> None:
        try:
            if self.p.stdin is not None:
                self.p.stdin.close()
            self.p.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        finally:
            if self.p.stdout is not None:
                self.p.stdout.close()

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class Workers:
    """``n`` worker processes for one import; use as a context manager (they are stopped at the
    end, killed if the import is interrupted)."""

    def __init__(self, n: int, max_chars: int | None = None) -> None:
        self.n = n
        self.max_chars = max_chars  # the page limit (``prepare_bytes``)
        self._procs: list[_Proc] = []
        self._lock = threading.Lock()
        self._stopping = False

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping = True
        with self._lock:
            procs, self._procs = self._procs, []
        for p in procs:
            if exc[0] is None:
                p.close()
            else:
                p.kill()

    def _start(self) -> _Proc | None:
        if self._stopping:
            return None
        try:
            p = _Proc()
        except OSError:
            return None
        with self._lock:
            self._procs.append(p)
        return p

    def _retire(self, p: _Proc) -> None:
        with self._lock:
            if p in self._procs:
                self._procs.remove(p)

    def run(
        self,
        tasks: list[list[Item]],
        nonce: str,
        done: Callable[[int, list[Prepared]], None],
    ) -> None:
        """Prepare every task: the workers take tasks from the front, this thread from the
        back. ``done(task_index, results)`` is called in this thread, once per task."""
        todo = deque(range(len(tasks)))
        finished: queue.Queue[tuple[int, list[Prepared]]] = queue.Queue()

        def take() -> int | None:
            with self._lock:
                return todo.popleft() if todo and not self._stopping else None

        def serve() -> None:
            proc = self._start()
            while proc is not None and (n := take()) is not None:
                res: list[Prepared] | None = None
                try:
                    res = proc.ask(tasks[n], nonce, self.max_chars)
                except _Died as exc:
                    self._retire(proc)
                    res, proc = self._one_by_one(tasks[n], nonce, str(exc))
                finally:  # a task taken is always answered, or run() would wait for it forever
                    if res is None:
                        res = [_died(rel, data, "the conversion failed") for rel, data in tasks[n]]
                    finished.put((n, res))

        threads = [threading.Thread(target=serve, daemon=True) for _ in range(self.n)]
        for t in threads:
            t.start()
        left = len(tasks)
        while left:
            try:
                n, res = finished.get_nowait()
            except queue.Empty:
                with self._lock:
                    n = todo.pop() if todo else None
                if n is None:  # all taken: wait for the workers' answers
                    n, res = finished.get()
                else:
                    res = prepare_many(tasks[n], nonce, self.max_chars)
            done(n, res)
            left -= 1
        for t in threads:
            t.join()

    def _one_by_one(self, items: list[Item], nonce: str, why: str) -> tuple[list[Prepared], _Proc | None]:
        """A worker died on this task: a fresh worker per file, so the file that kills it is the
        only one that fails."""
        out: list[Prepared] = []
        proc = self._start()
        for rel, data in items:
            if proc is None:
                out.append(_died(rel, data, "no conversion process could be started"))
                continue
            try:
                out += proc.ask([(rel, data)], nonce, self.max_chars)
            except _Died:
                self._retire(proc)
                out.append(_died(rel, data, f"the conversion process stopped on this file ({why})"))
                proc = self._start()
        return out, proc


def _died(rel: str, data: bytes, why: str) -> Prepared:
    return Prepared(rel, len(data), error=why, code="CONVERSION_FAILED")


if __name__ == "__main__":
    main()
