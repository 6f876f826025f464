"""Outage logs: one line per kind of failure per interval, with a count, and log files that
rotate by size (issue 17: a Milvus outage grew api.log by 64 MB in 2.5 minutes)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from openkb import logthrottle
from openkb.logthrottle import OncePerInterval, throttled

ROOT = Path(__file__).resolve().parents[2]


def test_throttled_logs_once_per_interval_with_a_count(caplog, monkeypatch):
    logthrottle.reset()
    clock = [1000.0]
    monkeypatch.setattr(logthrottle.time, "monotonic", lambda: clock[0])
    lg = logging.getLogger("openkb.test.throttle")
    caplog.set_level(logging.INFO, logger="openkb.test.throttle")
    for _ in range(500):
        throttled(lg, "down", logging.WARNING, "search failed: %s", "Milvus unreachable")
    clock[0] += 61
    throttled(lg, "down", logging.WARNING, "search failed: %s", "Milvus unreachable")
    msgs = [r.getMessage() for r in caplog.records if r.name == "openkb.test.throttle"]
    assert msgs == [
        "search failed: Milvus unreachable",
        "search failed: Milvus unreachable (499 more like this in the last 60 s)",
    ]


def test_a_library_logger_keeps_one_first_line_without_traceback(caplog, monkeypatch):
    logthrottle.reset()
    lg = logging.getLogger("openkb.test.library")
    lg.addFilter(OncePerInterval())
    caplog.set_level(logging.INFO, logger="openkb.test.library")
    try:
        raise ConnectionError("refused")
    except ConnectionError:
        for _ in range(200):
            lg.error(
                "RPC error: [search], <MilvusException: refused>\nTraceback:\n  File ...\n" + "x" * 20000, exc_info=True
            )
    recs = [r for r in caplog.records if r.name == "openkb.test.library"]
    assert len(recs) == 1 and recs[0].exc_info is None
    assert recs[0].getMessage() == "RPC error: [search], <MilvusException: refused>"


def test_a_log_file_rotates_by_size(tmp_path):
    log = tmp_path / "api.log"
    code = (
        "import logging\n"
        "from server.logs import configure_logging\n"
        "configure_logging('INFO')\n"
        "lg = logging.getLogger('openkb.test')\n"
        "for i in range(3000):\n"
        "    lg.info('line %d %s', i, 'x' * 100)\n"
    )
    with open(log, "ab") as fh:  # as the supervisor opens a child's log
        subprocess.run(
            [sys.executable, "-c", code],
            stdout=fh,
            stderr=fh,
            cwd=ROOT,
            env={**os.environ, "OPENKB_LOG_MAX_BYTES": "50000", "OPENKB_LOG_BACKUPS": "2"},
            check=True,
            timeout=120,
        )
    size = log.stat().st_size
    assert size < 50000 + 100 * 200  # checked every 100 records
    assert (tmp_path / "api.log.1").exists() and (tmp_path / "api.log.2").exists()
    assert not (tmp_path / "api.log.3").exists()
    assert "line 2999 " in log.read_text()
    assert "\x00" not in log.read_text()  # truncation restarted the file, no hole
