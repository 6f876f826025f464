"""``openkb import`` as an operator runs it: a real process against the test database — the
JSON report, the exit code when a file fails, ``kill -9`` mid-run then a re-run that converges
with no duplicates, and ``openkb import revert``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env(database_url, test_home):
    return {**os.environ, "DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}


def cli(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def keyed(engine, kb_id) -> list[tuple[str, int]]:
    with Session(engine) as s:
        rows = s.execute(
            text(
                "SELECT external_key, count(*) FROM documents WHERE knowledge_base_id = :kb "
                "AND status <> 'deleted' GROUP BY external_key"
            ),
            {"kb": str(kb_id)},
        ).all()
    return [(k, n) for k, n in rows]


def test_json_report_failure_exit_code_and_revert(world, env, tmp_path):
    kb = world.new_kb()
    (tmp_path / "文件夹").mkdir()
    (tmp_path / "文件夹" / "页面.md").write_text("# 页面\n\n内容\n", encoding="utf-8")
    (tmp_path / "bad.md").write_bytes(b"\x00\x00binary\x00")
    p = cli(["import", str(tmp_path), "--kb", str(kb.id), "--json"], env)
    assert p.returncode == 3, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.strip().startswith("error:")
    assert "1 of 3 files failed" in p.stderr
    report = json.loads(p.stdout)
    assert report["counts"]["created"] == 2 and report["counts"]["failed"] == 1
    assert {f["path"]: f["status"] for f in report["files"]} == {
        "文件夹": "created",
        "文件夹/页面.md": "created",
        "bad.md": "failed",
    }
    r = cli(["import", "revert", report["run_id"], "--kb", str(kb.id), "--json"], env)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["reverted"]) == 2
    assert keyed(world.engine, kb.id) == []


def test_killed_import_reruns_to_the_same_result(world, env, tmp_path):
    kb = world.new_kb()
    total = 240
    for i in range(total):
        d = tmp_path / f"part{i % 4}"
        d.mkdir(exist_ok=True)
        (d / f"note-{i:03d}.md").write_text(f"# Note {i}\n\nSee [next](note-{(i + 4) % total:03d}.md).\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "import", str(tmp_path), "--kb", str(kb.id), "--json"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if len(keyed(world.engine, kb.id)) >= 20:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(keyed(world.engine, kb.id))
    assert 20 <= partial < total + 4, "the import was not interrupted mid-run"
    p = cli(["import", str(tmp_path), "--kb", str(kb.id), "--json", "--jobs", "2"], env)  # worker processes
    assert p.returncode == 0, p.stderr
    counts = json.loads(p.stdout)["counts"]
    # what committed before the kill is unchanged (links to pages written later were already right)
    assert counts.get("created", 0) + counts.get("unchanged", 0) == total + 4 and "updated" not in counts
    assert counts["unchanged"] >= 20
    rows = keyed(world.engine, kb.id)
    assert len(rows) == total + 4 and all(n == 1 for _k, n in rows)  # every file and folder once
    again = json.loads(cli(["import", str(tmp_path), "--kb", str(kb.id), "--json"], env).stdout)["counts"]
    assert again == {"unchanged": total + 4, "warnings": 0}


def test_a_single_file(world, env, tmp_path):
    """PATH may be one file: it becomes one page at the target (no folder), its original kept as
    the page's source asset; the same file again is unchanged."""
    from openkb.models import Document, DocumentAsset, DocumentVersion
    from tests.importing import files

    kb = world.new_kb()
    path = tmp_path / "季度报告.docx"
    path.write_bytes(files.docx())
    p = cli(["import", str(path), "--kb", str(kb.id), "--json"], env)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert [(f["path"], f["status"], f["type"], f["converter"]) for f in report["files"]] == [
        ("季度报告.docx", "created", "page", "markitdown")
    ]
    with Session(world.engine) as s:
        doc = s.get(Document, report["files"][0]["document_id"])
        assert doc.parent_id is None and doc.knowledge_base_id == kb.id and doc.title == "季度报告 Q3"
        body = s.get(DocumentVersion, doc.current_version_id).markdown
        source = s.get(DocumentAsset, doc.meta["import"]["source_asset_id"])
        assert source.document_id == doc.id and source.filename == "季度报告.docx"
    assert body.strip()
    again = cli(["import", str(path), "--kb", str(kb.id), "--json"], env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["counts"] == {"unchanged": 1, "warnings": 0}


def test_revert_undoes_only_what_the_run_wrote_in_the_named_knowledge_base(world, env, tmp_path):
    """A run id pasted next to the wrong --kb reverted an import into another knowledge base."""
    kb, other = world.new_kb(), world.new_kb()
    (tmp_path / "page.md").write_text("# Page\n\ntext\n")
    p = cli(["import", str(tmp_path), "--kb", str(kb.id), "--json"], env)
    assert p.returncode == 0, p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    r = cli(["import", "revert", run_id, "--kb", str(other.id)], env)
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert r.stderr.strip() == "error: this run changed nothing in this knowledge base"
    assert keyed(world.engine, kb.id) == [("import:root:page.md", 1)]
    r = cli(["import", "revert", run_id, "--kb", str(kb.id), "--json"], env)
    assert r.returncode == 0, r.stderr
    assert keyed(world.engine, kb.id) == []
