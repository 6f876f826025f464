"""The ``--jobs`` worker processes (``importing.worker``): no database needed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openkb.importing.prepare import prepare_bytes
from openkb.importing.worker import Workers, _Died, _Proc

ROOT = Path(__file__).resolve().parents[2]


def test_workers_do_not_run_the_callers_main_again(tmp_path):
    """Regression: multiprocessing's workers ran the importing program's ``__main__`` again
    (CPython 3.11's forkserver never preloads it), so a script's top level ran once per worker:
    ``bench/import.py`` left a temporary directory behind per worker, and the CLI was imported
    again by each, seconds before it took any work."""
    vault = tmp_path / "vault"
    vault.mkdir()
    for i in range(20):
        (vault / f"p{i:02d}.md").write_text(f"# P{i}\n\n[next](p{(i + 1) % 20:02d}.md) 第{i}页 <br> x\n")
    marks = tmp_path / "marks"
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(ROOT)!r})
            with open({str(marks)!r}, "a") as f:  # the top level: once per run of this file
                f.write("ran\\n")

            from openkb.importing.pipeline import _prepare_all
            from openkb.importing.sources import open_source

            if __name__ == "__main__":
                src = open_source(__import__("pathlib").Path({str(vault)!r}), 1 << 20)
                seen = []
                out = _prepare_all(src.files(), 2, lambda n, size, rel: seen.append(rel), "nonce", 5_000_000)
                src.close()
                ok = [p.rel for p in out if p.error is None and "openkb-import://nonce/" in p.markdown]
                print(len(out), len(ok), len(set(seen)))
            """
        )
    )
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["20", "20", "20"]
    assert marks.read_text().splitlines() == ["ran"]


def test_the_workers_give_what_this_process_gives():
    items = [(f"d/n{i}.md", f"# N{i}\n\n![x](img{i}.png) <b>bold</b> 第{i}页\n".encode()) for i in range(12)]
    tasks = [items[i : i + 3] for i in range(0, 12, 3)]
    got: dict[int, list] = {}
    with Workers(2) as w:
        w.run(tasks, "n1", lambda n, res: got.setdefault(n, res))
    assert sorted(got) == [0, 1, 2, 3]
    for n, task in enumerate(tasks):
        assert got[n] == [prepare_bytes(rel, data, nonce="n1") for rel, data in task]


def test_a_worker_that_died_is_replaced_and_its_task_redone_file_by_file():
    """A converter that kills its interpreter costs only the file it was on: the task is redone
    one file per request by a fresh worker."""
    p = _Proc()
    p.kill()
    with pytest.raises(_Died):
        p.ask([("a.md", b"# a\n")], "n")
    items = [("a.md", b"# A\n"), ("b.md", b"# B\n\n<span>x</span>\n")]
    with Workers(1) as w:
        res, proc = w._one_by_one(items, "n", "killed")
        assert proc is not None and proc.p.poll() is None
    assert [r.error for r in res] == [None, None]
    assert res == [prepare_bytes(rel, data, nonce="n") for rel, data in items]
    assert proc.p.poll() is not None  # stopped with the pool


def test_a_worker_runs_in_a_session_of_its_own():
    """Regression: in the importer's session the workers only split that session's CPU share
    (autogroup scheduling), so on a busy machine --jobs 2 was no faster than one process."""
    p = _Proc()
    try:
        assert p.ask([("a.md", b"# a\n")], "n")[0].error is None
        assert os.getsid(p.p.pid) == p.p.pid != os.getsid(0)
    finally:
        p.close()
    assert p.p.returncode == 0  # it ended when its stdin closed


def test_a_worker_loads_no_configuration_or_database_code():
    """What each worker of each import pays at start: the conversion code only (pydantic-settings
    was half of it, SQLAlchemy more than the files a worker prepared in a small import)."""
    code = "import sys, openkb.importing.worker; print(sorted(m for m in ('openkb.config', 'sqlalchemy', 'sqlmodel', 'openkb.db') if m in sys.modules))"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "[]"
