"""``python -m openkb.embedder --host 127.0.0.1 --port P --model use-multilingual-v3``.

The model is loaded before the port is bound, so ``GET /health`` answering 200 means "ready".
When the model cannot be loaded the process exits non-zero (78 for an unknown model name, 69
when its package is missing or broken) with one line on stderr; the supervisor then runs the
appliance BM25-only.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from types import FrameType

from openkb.embedder.models import DEFAULT_MODEL, REGISTRY, load_model
from openkb.embedder.server import make_server
from openkb.errors import OpenKBError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openkb.embedder", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="bind address (keep it on loopback)")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--model", default=os.environ.get("OPENKB_EMBEDDER_MODEL", DEFAULT_MODEL),
                        help=f"one of: {', '.join(sorted(REGISTRY))}")
    parser.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1), help="BLAS/OpenMP threads")
    parser.add_argument("--log-level", default=os.environ.get("OPENKB_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
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
    log.info("serving %s (%d-d, loaded in %.2f s) on http://%s:%d/v1", model.name, model.dim,
             model.load_seconds, args.host, server.server_address[1])
    try:
        server.serve_forever(poll_interval=0.5)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
