"""``openkb export KB|FOLDER|DOC --out PATH.zip`` (docs/export.md).

Parses, calls ``openkb.exporting.service``, prints. The export acts as a user (``--as``, else the
knowledge base's creator), whose read permissions decide what goes in. The zip is written to a
temporary file beside PATH and renamed when complete, so a failed or interrupted export never
leaves a truncated zip under the name asked for. Progress (bytes of pages and assets) on stderr.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, counted, emit_json, err_console
from openkb.errors import ValidationError


def register(app: typer.Typer) -> None:
    app.command("export", help="Export a knowledge base, folder or page as a zip of Markdown files and assets.")(
        export_cmd
    )


def export_cmd(
    target: Annotated[str, typer.Argument(help="Knowledge base id or slug, or a folder's or page's id.")],
    out: Annotated[Path, typer.Option("--out", help="The .zip file to write.")],
    as_user: Annotated[
        str | None,
        typer.Option(
            "--as", help="Email or id of the user the export reads as (default: the knowledge base's creator)."
        ),
    ] = None,
    include_drafts: Annotated[
        bool, typer.Option("--include-drafts", help="Also unpublished pages (drafts, archived) the user may edit.")
    ] = False,
    max_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-bytes", min=1, help="Refuse an export larger than this (pages and assets); default MAX_EXPORT_BYTES."
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    from openkb.exporting import service  # here: its import is most of the CLI's start otherwise

    out = out.expanduser()
    if out.suffix.lower() != ".zip":
        raise ValidationError("--out must name a .zip file", field="--out")
    if out.is_dir():
        raise ValidationError(f"{out} is a folder; give a file name ending in .zip", field="--out")
    # the file first: an export that cannot be written is refused before it is planned (and
    # audited), naming the path asked for, not the temporary file beside it
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".export-", suffix=".zip")
    except OSError as exc:  # read-only, not ours, a pseudo file system
        raise ValidationError(f"cannot write {out}: {exc.strerror or exc}", field="--out") from None
    try:
        with os.fdopen(fd, "wb") as f, appliance(components=("postgresql",)) as ctx:
            with unit_of_work(ctx) as s:
                tgt, principal = service.operator_target(s, target, as_user)
                plan = service.plan_export(
                    s, principal, tgt, include_drafts=include_drafts, max_bytes=max_bytes, settings=ctx.settings
                )
            with unit_of_work(ctx) as s, _progress(json_out) as progress:
                for chunk in service.iter_export(s, plan, ctx.blobs, progress=progress):
                    f.write(chunk)
                    plan.written += len(chunk)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    summary = plan.summary() | {"path": str(out), "zip_bytes": plan.written}
    if json_out:
        emit_json(summary)
        return
    left = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in plan.left_out.items() if v)
    console.print(
        f"exported {counted(summary['pages'], 'page')}, {counted(summary['folders'], 'folder')} and "
        f"{counted(summary['assets'], 'asset')} "
        f"to {out} ({plan.written:,} bytes)" + (f"; left out: {left}" if left else ""),
        highlight=False,
    )


class _progress:
    """Bytes of pages and assets written, on stderr; silent with --json or without a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet or not sys.stderr.isatty()
        self.bar: Progress | None = None
        self.task = None

    def __enter__(self) -> _progress:
        if not self.quiet:
            self.bar = Progress(
                TextColumn("export", style="bold"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=err_console,
                transient=True,
            )
            self.bar.__enter__()
            self.task = self.bar.add_task("export", total=None)
        return self

    def __call__(self, done: int, total: int) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
