"""``openkb import PATH --kb KB`` and ``openkb import revert RUN_ID --kb KB`` (docs/importing.md).

Parses, calls ``openkb.importing.service``, prints: rich progress on stderr while it runs
(files/s, bytes/s, ETA, current file), then a summary table and the run id — or, with
``--json``, the per-file report on stdout. Exits with IMPORT_INCOMPLETE's code when any file
failed. Uses a live ``openkb up``'s PostgreSQL when one runs, like every command (cli/context.py);
each file commits on its own, so a killed run re-runs to the same result.

``revert`` is the first argument's value, not a sub-command: a group with an argument would
swallow the sub-command's name as PATH. A folder literally named ``revert``: pass ``./revert``.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.context import appliance, unit_of_work
from cli.output import console, emit_json, err_console, table
from openkb.errors import ImportIncomplete, ValidationError

if TYPE_CHECKING:  # imported by the commands that run: its import is most of the CLI's start
    from openkb.importing import service


def register(app: typer.Typer) -> None:
    app.command(
        "import",
        help="Import a folder, a file or a .zip into a knowledge base; "
        "`openkb import revert RUN_ID --kb KB` undoes a run.",
    )(import_cmd)


def import_cmd(
    args: Annotated[
        list[str], typer.Argument(help="PATH (folder, file or .zip), or: revert RUN_ID", show_default=False)
    ],
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge base id or slug.")] = None,
    into: Annotated[
        str | None, typer.Option("--into", help="Id of the folder to import into (default: the knowledge base's root).")
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, max=32, help="Files converted in parallel.")] = 1,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Name this run (UUID or short name); default: a new one.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Convert and report; write nothing.")] = False,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune", help="Move pages imported earlier into the same target whose file is gone to the trash."
        ),
    ] = False,
    as_user: Annotated[
        str | None,
        typer.Option(
            "--as", help="Email or id of the user the import acts as (default: the knowledge base's creator)."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Per-file report as JSON on stdout.")] = False,
) -> None:
    if args and args[0] == "revert":
        if len(args) != 2:
            raise ValidationError("usage: openkb import revert RUN_ID --kb KB")
        _revert(args[1], kb, as_user, json_out)
        return
    if len(args) != 1:
        raise ValidationError("give one PATH (a folder, a file or a .zip)")
    from openkb.importing import service

    if not kb:
        raise ValidationError("say where to import: --kb KNOWLEDGE_BASE")
    path = Path(args[0]).expanduser()
    target = _uuid(into, "--into") if into else None
    with appliance(components=("postgresql",)) as ctx:
        with unit_of_work(ctx) as s:
            kbase = service.find_knowledge_base(s, kb)
            actor = service.operator_actor(s, kbase, as_user, run_id)
            kb_id = kbase.id
        with _progress(json_out) as progress:
            report = service.import_path(
                lambda: unit_of_work(ctx),
                ctx.blobs,
                actor,
                kb_id,
                path,
                target_id=target,
                jobs=jobs,
                dry_run=dry_run,
                prune=prune,
                settings=ctx.settings,
                progress=progress,
            )
    if json_out:
        emit_json(report.to_dict())
    else:
        _summary(report)
    if report.failed:
        raise ImportIncomplete(
            f"{len(report.failed)} of {len(report.files)} files failed; "
            f"re-run the same command to retry them (run {report.run_id})"
        )


def _uuid(value: str, flag: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValidationError(f"{flag} takes a document id (UUID)", field=flag) from None


def _summary(report: service.ImportReport) -> None:
    problems = [f for f in report.files if f.status == "failed" or f.warnings]
    if problems:
        table(
            "files with problems",
            ["path", "status", "reason / warnings"],
            [
                (
                    f.path,
                    f.status,
                    f.error
                    if f.status == "failed"
                    else "; ".join(f.warnings[:3]) + (f" (+{len(f.warnings) - 3})" if len(f.warnings) > 3 else ""),
                )
                for f in problems[:200]
            ],
        )
    c = report.counts()
    cols = (
        ["would_create", "would_update", "unchanged", "would_trash"]
        if report.dry_run
        else ["created", "updated", "unchanged", "trashed"]
    )
    table(
        "import" + (" (dry run: nothing written)" if report.dry_run else ""),
        [*cols, "failed", "warnings", "seconds"],
        [[*(c.get(k, 0) for k in cols), c.get("failed", 0), c.get("warnings", 0), f"{report.seconds:.1f}"]],
    )
    console.print(
        f"run id: {report.run_id}"
        + ("" if report.dry_run else f"  (undo: openkb import revert {report.run_id} --kb {report.knowledge_base_id})"),
        highlight=False,
    )


class _progress:
    """Rich progress on stderr (files/s, bytes/s, ETA, current file); silent with --json or no tty."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet or not sys.stderr.isatty()
        self.bar = None
        self.tasks: dict[str, int] = {}

    def __enter__(self):  # -> the callback the pipeline calls
        if self.quiet:
            return None
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[files]}"),
            TextColumn("{task.fields[rate]} files/s"),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[current]}", markup=False),  # a file name, shown as named
            console=err_console,
            transient=False,
        )
        self.bar.start()
        return self.update

    def update(self, p: service.Progress) -> None:
        assert self.bar is not None
        if p.phase not in self.tasks:
            self.tasks[p.phase] = self.bar.add_task(
                p.phase, total=max(1, p.bytes_total), rate="-", current="", files=""
            )
        tid = self.tasks[p.phase]
        task = self.bar.tasks[tid]
        elapsed = task.elapsed or 0
        rate = f"{p.done / elapsed:.1f}" if elapsed > 0 else "-"
        # completed counts bytes (bytes/s and the ETA follow the data), the files column files
        self.bar.update(tid, completed=p.bytes_done, rate=rate, files=f"{p.done}/{p.total}", current=p.current[-50:])

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _revert(run_id: str, kb: str | None, as_user: str | None, json_out: bool) -> None:
    if not kb:
        raise ValidationError("say which knowledge base the run wrote to: --kb KNOWLEDGE_BASE")
    from openkb.importing import service

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        kbase = service.find_knowledge_base(s, kb)
        actor = service.operator_actor(s, kbase, as_user, None)
        out = service.revert_import(s, actor, run_id, ctx.blobs, knowledge_base_id=kbase.id)
    if json_out:
        emit_json(out)
        return
    console.print(
        f"reverted {len(out['reverted'])} changes, skipped {len(out['skipped'])}; revert run id: {out['run_id']}",
        highlight=False,
    )
