"""The embedded Milvus Lite server as ``openkb up`` runs it: ``python -m openkb.runtime.lite_server
server --data-dir ... --host ... --port ...`` (the arguments of Lite's own ``milvus-lite``).

The same server, with BM25 scored on statistics of the whole collection instead of each segment's
(``openkb.runtime.lite_bm25``, docs/retrieval.md#bm25-statistics). Installed before Lite loads
any collection; the log says whether it applied. Its jieba is kept quiet, its cache in the home.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from openkb.runtime import lite_bm25
from openkb.runtime.home import cache_dir
from openkb.runtime.python import module_command


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


def main(argv: list[str] | None = None) -> int:
    _quiet_jieba()
    if lite_bm25.install():
        print("openkb: BM25 scores use collection-wide statistics", file=sys.stderr, flush=True)
    from milvus_lite.cmdline import main as lite_main

    return lite_main(argv)


if __name__ == "__main__":
    sys.exit(main())
