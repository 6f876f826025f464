"""``openkb backup DEST`` and ``openkb restore SRC`` (docs/operations.md#backup-and-restore).

Both parse, call one service in ``openkb.backup`` and print. ``restore`` starts the appliance
without running migrations: the target must be empty, and the archive's dump brings its own
schema (its Alembic revision); ``openkb migrate`` afterwards upgrades an older backup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from cli.context import appliance
from cli.output import JsonOpt, console, counted, emit_json, err_console


def register(app: typer.Typer) -> None:
    app.command("backup")(backup)
    app.command("restore")(restore)


def _bar() -> Progress:
    """A progress bar on a terminal only: redirected to a log (cron, a service), it printed an
    empty line before the result and nothing useful."""
    return Progress(
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )


def backup(
    dest: Annotated[Path | None, typer.Argument(help="Archive file to write (a new .tar file).")] = None,
    out_opt: Annotated[
        Path | None, typer.Option("--out", help="The same, spelled as `openkb export` spells it.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Back up the database, the asset blobs and the index state into one archive."""
    from openkb.backup import create_backup
    from openkb.errors import ValidationError

    if (dest is None) == (out_opt is None):
        raise ValidationError(
            "name the archive to write once: openkb backup PATH.tar (or --out PATH.tar)", field="--out"
        )
    dest = dest or out_opt
    assert dest is not None

    with appliance(components=("postgresql",)) as ctx:
        if json_out:
            out = create_backup(ctx, dest)
        else:
            with _bar() as bar:
                task = bar.add_task("backup", total=None)
                out = create_backup(
                    ctx,
                    dest,
                    on_step=lambda s: bar.update(task, description=s),
                    on_progress=lambda n, t: bar.update(task, completed=n, total=t),
                )
    if json_out:
        emit_json({k: v for k, v in out.items() if k != "files"})
        return
    counts = ", ".join(f"{k} {v}" for k, v in out["counts"].items())
    console.print(
        f"backup written: {out['path']} ({out['bytes']:,} bytes, schema {out['schema_revision']}, "
        f"{counted(out['assets'], 'asset')})",
        highlight=False,
    )
    console.print(f"  {counts}", highlight=False)
    if out["missing_assets"]:
        err_console.print(
            f"[yellow]{len(out['missing_assets'])} asset blobs were deleted while the backup ran and are not in it[/]",
            markup=True,
        )


def restore(
    src: Annotated[Path, typer.Argument(help="Archive written by `openkb backup`.")],
    json_out: JsonOpt = False,
) -> None:
    """Restore an archive into an empty home or database, then rebuild the Milvus index."""
    from openkb.backup import restore_backup

    with appliance(migrate=False) as ctx:
        if json_out:
            out: dict[str, Any] = restore_backup(ctx, src)
        else:
            with _bar() as bar:
                task = bar.add_task("restore", total=None)
                out = restore_backup(
                    ctx,
                    src,
                    on_step=lambda s: bar.update(task, description=s, completed=0, total=None),
                    on_progress=lambda n, t: bar.update(task, completed=n, total=t),
                    rebuild_progress=lambda n, t: bar.update(task, completed=n, total=t),
                )
    if json_out:
        emit_json(out)
        return
    console.print(
        f"restored {src} (OpenKB {out['manifest']['openkb_version']}, schema "
        f"{out['manifest']['schema_revision']}, taken {out['manifest']['created_at']})",
        highlight=False,
    )
    console.print("  " + ", ".join(f"{k} {v}" for k, v in out["counts"].items()), highlight=False)
    rb = out["rebuilt"]
    console.print(
        f"  index: {rb['chunks']} chunks rebuilt into {rb['collection']} ({rb['status']})"
        if rb
        else "  index: no active profile to rebuild",
        highlight=False,
    )
