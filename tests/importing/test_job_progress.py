"""An import job shows its progress while it runs (``progress``: phase, files done of total, the
current file), for the web app's live view; the finished job has its per-file results."""

from __future__ import annotations

import io

from sqlmodel import Session

from openkb.importing import jobs as import_jobs
from openkb.importing.pipeline import Progress
from openkb.models import ImportJob


def test_progress_is_kept_in_the_job_while_it_runs(world):
    kb = world.new_kb()
    parts = [(f"notes/p{i}.md", io.BytesIO(f"# P{i}\n\nbody {i}\n".encode())) for i in range(12)]
    with world.units() as s:
        job_id = import_jobs.create_import_job(s, world.actor(), world.blobs, knowledge_base_id=kb.id, files=parts).id

    seen: list[dict] = []
    live_files: list[list[str]] = []
    units = world.units

    def watching():  # every unit of work the runner opens: look at what the job shows now
        with Session(world.engine) as s:
            out = import_jobs.job_out(s.get(ImportJob, job_id))
            if out["progress"] is not None:
                seen.append(out["progress"])
                live_files.append([f["path"] for f in out["files"]])
        return units()

    assert import_jobs.run_import_job(watching, world.blobs, job_id) == "succeeded"
    phases = {p["phase"] for p in seen}
    assert phases == {"prepare", "write"}, seen
    assert all(0 < p["done"] <= p["total"] for p in seen)
    assert any(p["current"].startswith("notes/p") for p in seen)
    assert seen[-1]["phase"] == "write" and seen[-1]["done"] == seen[-1]["total"] == 12
    # the per-file results appear while it runs, in the shape of the final ones
    assert live_files[-1] and set(live_files[-1]) <= {"notes"} | {f"notes/p{i}.md" for i in range(12)}
    assert "notes/p0.md" in live_files[-1]
    with Session(world.engine) as s:
        done = import_jobs.job_out(s.get(ImportJob, job_id))
    assert done["status"] == "succeeded" and done["counts"]["created"] == 13  # the folder and 12 pages


def test_progress_is_throttled_and_left_alone_once_finished(world):
    kb = world.new_kb()
    with world.units() as s:
        job = import_jobs.create_import_job(
            s, world.actor(), world.blobs, knowledge_base_id=kb.id, files=[("a.md", io.BytesIO(b"# A\n"))]
        )
        job.status = "running"
        s.add(job)
    write = import_jobs._progress_writer(world.units, job.id, every=3600)
    write(Progress("write", 1, 100, 0, 0, "first.md"))  # a phase starts: written
    write(Progress("write", 2, 100, 0, 0, "second.md"))  # within the interval: skipped
    with Session(world.engine) as s:
        assert import_jobs.job_out(s.get(ImportJob, job.id))["progress"]["current"] == "first.md"
    write(Progress("write", 100, 100, 0, 0, "last.md"))  # the last file: written
    with Session(world.engine) as s:
        assert import_jobs.job_out(s.get(ImportJob, job.id))["progress"] == {
            "phase": "write",
            "done": 100,
            "total": 100,
            "current": "last.md",
        }
        j = s.get(ImportJob, job.id)
        j.status = "succeeded"
        s.add(j)
        s.commit()
    write(Progress("prepare", 0, 5, 0, 0, "late.md"))  # a finished job is not touched
    with Session(world.engine) as s:
        assert import_jobs.job_out(s.get(ImportJob, job.id))["progress"]["current"] == "last.md"
