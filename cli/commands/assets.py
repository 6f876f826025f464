"""``openkb assets dedupe`` (one blob for the same bytes, also for what was uploaded before blobs
were shared) and ``openkb assets prune`` (assets without a document, past the retention):
docs/operations.md#assets. Parse, call ``openkb.assets``, print."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, counted, emit_json, err_console

assets_app = typer.Typer(help="Uploaded images and attachments in the blob store.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(assets_app, name="assets")


def _run(label: str, json_out: bool, job: Callable[..., dict[str, Any]], **kw: Any) -> dict[str, Any]:
    """``job(units, blobs, progress=..., **kw)`` on the appliance's database and blob store, with a
    progress bar on stderr unless the output is ``--json``."""
    from openkb.db import session_scope

    with appliance(components=("postgresql",)) as ctx:

        def units():  # noqa: ANN202 - a unit of work per call
            return session_scope(ctx.engine)

        if json_out:
            return job(units, ctx.blobs, **kw)
        with Progress(
            TextColumn(label, style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,  # redirected to a log: no bar, no empty line
        ) as bar:
            task = bar.add_task(label, total=None)
            return job(units, ctx.blobs, progress=lambda n, t: bar.update(task, completed=n, total=t), **kw)


@assets_app.command("dedupe")
def dedupe(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be merged; change nothing.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Merge copies of the same bytes into one blob per tenant (uploads from before blobs were shared); safe to re-run."""
    from openkb.assets import merge_copies

    out = _run("merging copies", json_out, merge_copies, dry_run=dry_run)
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


@assets_app.command("prune")
def prune(
    older_than: Annotated[
        int | None,
        typer.Option(
            "--older-than",
            min=0,
            metavar="DAYS",
            help="Prune what has had no document for more than DAYS days (default: ASSET_RETENTION_DAYS).",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be pruned; change nothing.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Delete assets without a document (purged pages' images, finished imports' uploads) past the retention; safe to re-run."""
    from datetime import timedelta

    from openkb.assets import prune_detached
    from openkb.config import get_settings
    from openkb.errors import ValidationError

    days = older_than if older_than is not None else get_settings().asset_retention_days
    if older_than is None and days == 0:
        raise ValidationError(
            "ASSET_RETENTION_DAYS is 0 (keep them): pass --older-than DAYS to prune anyway", field="--older-than"
        )
    out = _run("pruning detached assets", json_out, prune_detached, older_than=timedelta(days=days), dry_run=dry_run)
    if json_out:
        emit_json(out | {"older_than_days": days, "dry_run": dry_run})
        return
    if not out["rows"]:
        console.print(f"nothing to prune: no asset has been without a document for over {counted(days, 'day')}")
        return
    verb = "would delete" if dry_run else "deleted"
    shared = (
        " (the rest of their bytes is shared with assets in use and stays)"
        if out["row_bytes"] > out["bytes_freed"]
        else ""
    )
    console.print(
        f"{verb} {counted(out['rows'], 'asset')} without a document for over {counted(days, 'day')}: "
        f"{counted(out['blobs_removed'], 'blob')}, {out['bytes_freed']:,} bytes {'to free' if dry_run else 'freed'}{shared}",
        highlight=False,
    )


@assets_app.command("status")
def status(json_out: JsonOpt = False) -> None:
    """What the blob store holds: assets, blobs, bytes; and those without a document, due for pruning."""
    from openkb.assets import storage_summary
    from openkb.config import get_settings

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        out = storage_summary(s, retention_days=get_settings().asset_retention_days)
    if json_out:
        emit_json(out)
        return
    console.print(
        f"{counted(out['assets'], 'asset')} in {counted(out['blobs'], 'blob')}, {out['stored_bytes']:,} bytes stored",
        highlight=False,
    )
    days = out["retention_days"]
    keep = f"kept {counted(days, 'day')} after they lose it" if days else "kept (ASSET_RETENTION_DAYS=0)"
    console.print(
        f"{counted(out['detached'], 'asset')} without a document ({out['detached_bytes']:,} bytes), {keep}; "
        f"{out['due_for_pruning']:,} due for pruning now (openkb assets prune)",
        highlight=False,
    )
