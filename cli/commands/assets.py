"""``openkb assets dedupe``: one blob for the same bytes, also for what was uploaded before blobs
were shared (docs/operations.md#assets). Parses, calls ``openkb.assets.merge_copies``, prints."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from cli.context import appliance
from cli.output import JsonOpt, console, counted, emit_json, err_console

assets_app = typer.Typer(help="Uploaded images and attachments in the blob store.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(assets_app, name="assets")


@assets_app.command("dedupe")
def dedupe(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be merged; change nothing.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Merge copies of the same bytes into one blob per tenant (uploads from before blobs were shared); safe to re-run."""
    from openkb.assets import merge_copies
    from openkb.db import session_scope

    with appliance(components=("postgresql",)) as ctx:

        def units():  # noqa: ANN202 - a unit of work per call
            return session_scope(ctx.engine)

        if json_out:
            out = merge_copies(units, ctx.blobs, dry_run=dry_run)
        else:
            with Progress(
                TextColumn("[bold]merging copies"),
                BarColumn(),
                MofNCompleteColumn(),
                console=err_console,
                transient=True,
            ) as bar:
                task = bar.add_task("merge", total=None)
                out = merge_copies(
                    units, ctx.blobs, dry_run=dry_run, progress=lambda n, t: bar.update(task, completed=n, total=t)
                )
    if json_out:
        emit_json(out | {"dry_run": dry_run})
        return
    if not out["groups"]:
        console.print("nothing to merge: assets with the same bytes already share one blob", highlight=False)
        return
    verb = "would remove" if dry_run else "removed"
    console.print(
        f"{counted(out['groups'], 'set')} of assets with the same bytes; {verb} "
        f"{counted(out['blobs_removed'], 'copy', 'copies')} ({out['bytes_freed']:,} bytes), "
        f"{counted(out['rows'], 'row')} {'would point' if dry_run else 'now point'} at the copy kept",
        highlight=False,
    )
    if out["groups_without_intact_copy"]:
        console.print(
            f"  {counted(out['groups_without_intact_copy'], 'set')} left as they are: no copy holds the bytes "
            "their rows record (a blob lost or changed outside OpenKB)",
            highlight=False,
        )
