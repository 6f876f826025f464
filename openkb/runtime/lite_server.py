"""The embedded Milvus Lite server as ``openkb up`` runs it: ``python -m openkb.runtime.lite_server
server --data-dir ... --host ... --port ...`` (the arguments of Lite's own ``milvus-lite``).

The same server, with BM25 scored on statistics of the whole collection instead of each segment's
(``openkb.runtime.lite_bm25``, docs/retrieval.md#bm25-statistics), and partial updates that keep
the stored vector of a text they leave as it is (``openkb.runtime.lite_vectors``,
docs/retrieval.md#partial-updates). Installed before Lite loads
any collection; the log says whether it applied, and so does ``run/milvus-bm25.json`` when ``openkb
up`` started it (``BM25_RECORD``), which ``openkb doctor`` and ``/readyz`` read (function
``bm25_scoring``). Its jieba is kept quiet, its cache in the home.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from openkb.runtime import lite_bm25, lite_tombstones, lite_vectors
from openkb.runtime.home import Home, cache_dir, read_record, write_record
from openkb.runtime.python import module_command

BM25_RECORD = "milvus-bm25"  # run/<name>.json of the home: how the running Lite scores BM25
RECORD_ENV = "OPENKB_LITE_BM25_HOME"  # the home whose run files get it (set by openkb up only)


def lite_command(data_dir: str | Path, port: int, host: str = "127.0.0.1") -> list[str]:
    """The command that starts the embedded Milvus Lite server on ``data_dir`` at ``host:port``."""
    return module_command(__name__, "server", "--data-dir", str(data_dir), "--host", host, "--port", str(port))


def _quiet_jieba() -> None:
    """Lite's jieba (the module's default tokenizer) keeps its parsed dictionary in OpenKB's home
    and reports only problems, like the API's (openkb/retrieval/segment.py): not a shared
    ``/tmp/jieba.cache`` owned by whoever wrote it first, nor four lines in the log per start."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    where = cache_dir()
    if where is not None:
        jieba.dt.tmp_dir = str(where)


def _recorder(home: Home) -> Any:
    """Record how this Lite scores BM25 in ``home``'s run files (``write_record``: atomic, with
    this process's pid, so a record left by a dead Lite reads as nothing)."""

    def write(how: str, reason: str) -> None:
        write_record(home, BM25_RECORD, {"bm25": how, "reason": reason})

    return write


def bm25_scoring(home: Home) -> dict[str, Any] | None:
    """How the embedded Lite of ``home`` scores BM25 (``{"bm25": "collection-wide" | "per-segment",
    "reason"}``), or None when no live Lite left word (not started by ``openkb up``, or gone)."""
    rec = read_record(home, BM25_RECORD)
    if rec is None or rec.get("bm25") not in (lite_bm25.COLLECTION_WIDE, lite_bm25.PER_SEGMENT):
        return None
    return rec


def _install_patches() -> None:
    """OpenKB's changes to Lite, before it loads any collection: BM25 on collection-wide
    statistics (``lite_bm25``), stored vectors kept on partial updates (``lite_vectors``) and one
    copy of the tombstones shared by reads until they change (``lite_tombstones``)."""
    if lite_bm25.install():
        print("openkb: BM25 scores use collection-wide statistics", file=sys.stderr, flush=True)
    if lite_vectors.install():
        print("openkb: partial updates keep the stored vectors of unchanged texts", file=sys.stderr, flush=True)
    if lite_tombstones.install():
        print("openkb: reads share one copy of the tombstones until they change", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    _quiet_jieba()
    record = os.environ.get(RECORD_ENV)
    if record:
        lite_bm25.reporter = _recorder(Home(Path(record)))
    _install_patches()
    from milvus_lite.cmdline import main as lite_main

    return lite_main(argv)


if __name__ == "__main__":
    sys.exit(main())
