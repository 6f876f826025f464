"""``openkb index status|rebuild|switch|rollback|history|drop|verify|jobs``: the Milvus index, operated.

``rebuild`` runs in this process with a progress bar (rate and ETA); a killed or failed rebuild
is resumed by running the same command again. The active alias only moves on ``--switch`` (after
the health check), ``switch`` and ``rollback``; every move is recorded (``history``). The
services write the audit rows; these commands act as ``Principal.system()`` (the operator at the
console) and only parse, call and print.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, err_console, table

if TYPE_CHECKING:
    from openkb.permissions.principal import Principal


def _operator() -> Principal:
    """The operator at the machine (``Principal.system()``), who these commands act as; the
    permissions package is imported when a command runs, not when the CLI starts."""
    from openkb.permissions.principal import Principal

    return Principal.system()


def register(app: typer.Typer) -> None:
    index = typer.Typer(
        help="The Milvus retrieval index: status, rebuild, alias switch, rollback, verify.", no_args_is_help=True
    )
    index.command("status")(index_status)
    index.command("rebuild")(index_rebuild)
    index.command("switch")(index_switch)
    index.command("rollback")(index_rollback)
    index.command("history")(index_history)
    index.command("drop")(index_drop)
    index.command("verify")(index_verify)
    index.command("jobs")(index_jobs)
    app.add_typer(index, name="index")


def index_status(json_out: JsonOpt = False) -> None:
    """Alias -> collection, profile, functions, Milvus rows vs PostgreSQL chunks, last rebuild.
    Exits 69 (after printing what it knows) when Milvus cannot be asked."""
    from openkb.indexing.service import index_status as status

    with appliance() as ctx, unit_of_work(ctx) as s:
        out = status(ctx, s)
    _print_status(out, json_out)
    if out["milvus"] != "ok":
        raise typer.Exit(69)


def _print_status(out: dict[str, Any], json_out: bool) -> None:
    if json_out:
        emit_json(out)
        return
    prof = out["profile"] or {}
    f = prof.get("functions") or {}
    emb, rr = f.get("embedding"), f.get("rerank")
    console.print(
        f"[bold]{escape(out['alias'])}[/] -> {escape(out['collection'] or '(not set)')}  "
        f"({out['backend']}, Milvus {escape(str(out['milvus']))})",
        markup=True,
        highlight=False,
    )
    if prof:
        console.print(
            f"  profile     {prof['name']} ({prof['status']}), dim {prof['vector_dim'] or '-'}", highlight=False
        )
        console.print(
            f"  functions   bm25 {f['bm25']['name']}; embedding "
            f"{emb['name'] + ' (' + str(emb['model']) + ')' if emb else 'none'}; rerank "
            f"{rr['name'] + ' (' + str(rr['provider']) + ')' if rr else 'none'}",
            highlight=False,
        )
        console.print(f"  search      {out['search_mode']}", highlight=False)
    if out["in_sync"] is None:
        rows, sync = "unknown", "[yellow]not checked: Milvus cannot be asked[/]"
    elif out["collection"] is None:
        rows = "none (no collection yet)"
        sync = "[green]in sync[/]" if out["in_sync"] else "[yellow]differs: run `openkb index rebuild`[/]"
    else:
        rows = str(out["milvus_rows"])
        sync = "[green]in sync[/]" if out["in_sync"] else "[yellow]differs: run `openkb index verify`[/]"
    console.print(
        f"  rows        Milvus {rows} / PostgreSQL chunks {out['pg_chunks']}  {sync}", markup=True, highlight=False
    )
    lite = out.get("lite")
    if lite:  # the embedded Lite's files (docs/retrieval.md#flushes)
        from openkb.runtime.lite_files import REBUILD_FIX

        console.print(
            f"  lite files  {lite['data_files']} data file{'' if lite['data_files'] == 1 else 's'} "
            f"({lite['data_kb']:,} KB), {lite['delta_files']} delta file{'' if lite['delta_files'] == 1 else 's'} "
            f"of deletions ({lite['delta_kb']:,} KB)"
            + (
                f"  [yellow]searches and saves slow down as they pile up: {REBUILD_FIX}[/]" if lite["piling_up"] else ""
            ),
            markup=True,
            highlight=False,
        )
    docs = out.get("documents") or {}
    console.print(
        "  documents   "
        + ", ".join(f"{k} {v}" for k, v in sorted(docs.items()))
        + (f" ({out['retrying']} pending being retried)" if out.get("retrying") else "")
        if docs
        else "  documents   none"
    )
    job = out.get("last_rebuild")
    if job:
        console.print(
            f"  last rebuild {job['id'][:8]} {job['status']} -> {job['target_collection']} "
            f"({job['processed_chunks']}/{job['total_chunks']}){' ' + job['error'] if job['error'] else ''}",
            highlight=False,
        )
    for p in out.get("other_profiles") or []:
        console.print(
            f"  other       {p['name']} ({p['status']}) {p['collection']}{'' if p['exists'] else ' (no collection)'}",
            highlight=False,
        )
    for f in out.get("failed") or []:  # refused for their data: fix the page, then it is retried
        console.print(f"  failed      {f['document_id']} {f['title']!r}: {f['error']}", highlight=False)


class _RateColumn(ProgressColumn):
    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} chunks/s" if speed else "- chunks/s", style="progress.data.speed")


def index_rebuild(
    profile: Annotated[str, typer.Option("--profile", help="Profile to build (name, id or collection).")],
    switch: Annotated[bool, typer.Option("--switch", help="Point the active alias at it once healthy.")] = False,
    batch_size: Annotated[int, typer.Option(help="Chunks per insert request.", min=1, max=4096)] = 512,
    json_out: JsonOpt = False,
) -> None:
    """Build the profile's collection from PostgreSQL's chunks (resumes an interrupted run)."""
    from openkb.indexing.rebuild import run_rebuild, start_rebuild
    from openkb.indexing.service import rebuild_view

    with appliance() as ctx:
        with unit_of_work(ctx) as s:
            job = start_rebuild(ctx, s, _operator(), profile, switch=switch)
            resumed = job.last_chunk_id is not None
        job_id = job.id
        t0 = time.perf_counter()
        if json_out:
            done = run_rebuild(ctx, job_id, batch_size=batch_size)
        else:
            if resumed:
                console.print(
                    f"resuming rebuild {str(job_id)[:8]} of {job.target_collection} after {job.processed_chunks} chunks"
                )
            with Progress(
                TextColumn("{task.description}", style="bold", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                _RateColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=err_console,
                transient=False,
            ) as bar:
                task = bar.add_task(job.target_collection, total=None)

                def progress(n: int, total: int) -> None:
                    bar.update(task, completed=n, total=total)

                def phase(name: str) -> None:
                    bar.update(task, description=f"{job.target_collection}: {name}")

                done = run_rebuild(ctx, job_id, batch_size=batch_size, on_progress=progress, on_phase=phase)
        elapsed = time.perf_counter() - t0
        out = {**rebuild_view(done), "seconds": round(elapsed, 1)}
    if json_out:
        emit_json(out)
    else:
        console.print(
            f"rebuild {out['status']}: {out['processed_chunks']} chunks into {out['target_collection']} "
            f"in {elapsed:.1f}s"
            + (
                " — alias switched"
                if done.switch_on_success
                else f"; switch with: openkb index switch --profile {profile}"
            ),
            highlight=False,
        )


def index_switch(
    profile: Annotated[str, typer.Option("--profile", help="Profile whose collection becomes active.")],
    force: Annotated[bool, typer.Option("--force", help="Switch even without a successful rebuild.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Point the active alias at a rebuilt collection (edits made since its rebuild are synced first)."""
    from openkb.indexing.rebuild import switch

    with appliance() as ctx, unit_of_work(ctx) as s:
        out = switch(ctx, s, _operator(), profile, force=force)
    emit_json(out) if json_out else console.print(
        f"{out['alias']}: {out['previous']} -> {out['collection']}", highlight=False
    )


def index_rollback(
    to: Annotated[str | None, typer.Option("--to", help="Jump to this profile instead (recorded as a switch).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Return to the collection that was active before the last switch (again: one more step back)."""
    from openkb.indexing.rebuild import rollback

    with appliance() as ctx, unit_of_work(ctx) as s:
        out = rollback(ctx, s, _operator(), to)
    emit_json(out) if json_out else console.print(
        f"rolled back {out['alias']}: {out['previous']} -> {out['collection']}", highlight=False
    )


def index_history(
    limit: Annotated[int, typer.Option(help="How many switches to show (newest first).", min=1, max=1000)] = 50,
    json_out: JsonOpt = False,
) -> None:
    """Every move of the active alias (switch, rollback), and where a rollback would go now."""
    from openkb.indexing.rebuild import history

    with appliance() as ctx, unit_of_work(ctx) as s:
        out = history(ctx, s, _operator(), limit=limit)
    if json_out:
        emit_json(out)
        return
    console.print(
        f"[bold]{escape(out['alias'])}[/] -> {escape(out['collection'] or '(not set)')}; rollback goes to "
        f"{escape(out['rollback_target'] or '(nothing: ' + str(out['rollback_refused']) + ')')}",
        markup=True,
        highlight=False,
    )
    table(
        "alias history",
        ["#", "at", "kind", "from", "to", "by"],
        [
            (
                r["id"],
                r["at"],
                r["kind"] + (f" (undoes #{r['reverts']})" if r["reverts"] else ""),
                r["from"] or "-",
                r["to"],
                r["by"]["user_id"] or r["by"]["type"],
            )
            for r in out["items"]
        ],
    )


def index_drop(
    profile: Annotated[str, typer.Argument(help="Profile (or collection) whose collection to drop.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Drop it even if it is the rollback target.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Drop a collection that is not active (its profile stays, status dropped).

    The rollback target is refused unless --force; the active collection always (exit 7)."""
    from openkb.indexing.rebuild import drop

    if not yes and not json_out and not typer.confirm(f"drop the collection of {profile}?"):
        raise typer.Exit(1)
    with appliance() as ctx, unit_of_work(ctx) as s:
        out = drop(ctx, s, _operator(), profile, force=force)
    emit_json(out) if json_out else console.print(f"dropped {out['dropped']}", highlight=False)


def index_verify(
    repair: Annotated[bool, typer.Option("--repair", help="Fix what differs.")] = False,
    collection: Annotated[str | None, typer.Option(help="Collection (default: the active one).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Missing, extra and stale Milvus rows compared with PostgreSQL (exit code 1 if any, unless repaired;
    with --repair, 1 also when a document's data is refused by Milvus: it is listed, the rest is repaired)."""
    from openkb.indexing.verify import verify

    with appliance() as ctx, unit_of_work(ctx) as s:
        out = verify(ctx, s, _operator(), collection=collection, repair=repair)
    if json_out:
        emit_json(out)
    else:
        state = "[green]ok[/]" if out["ok"] else ("[yellow]repaired[/]" if out["repaired"] else "[red]differs[/]")
        console.print(
            f"{escape(out['collection'])}: {state} — Milvus rows {out['milvus_rows']}, expected {out['expected_rows']}; "
            f"missing {out['missing']}, extra {out['extra']}, stale {out['stale']}, "
            f"unchunked documents {out['unchunked_documents']}",
            markup=True,
        )
        if out["repaired"]:
            r = out["repair"]
            console.print(
                f"  repaired: {r['inserted']} upserted, {r['updated']} updated, {r['deleted']} deleted "
                f"over {r['documents']} documents"
            )
        for doc, reason in (out.get("rejected") or {}).items():
            console.print(f"  not repaired: document {doc}: {reason}", highlight=False)
    if (not out["ok"] and not out["repaired"]) or out.get("rejected"):
        raise typer.Exit(1)


def index_jobs(json_out: JsonOpt = False) -> None:
    """Recent rebuild jobs."""
    from openkb.indexing.rebuild import list_jobs
    from openkb.indexing.service import rebuild_view

    with appliance() as ctx, unit_of_work(ctx) as s:
        rows = [rebuild_view(j) for j in list_jobs(s)]
    if json_out:
        emit_json(rows)
        return
    table(
        "rebuild jobs",
        ["id", "status", "collection", "progress", "started", "error"],
        [
            (
                r["id"][:8],
                r["status"],
                r["target_collection"],
                f"{r['processed_chunks']}/{r['total_chunks']}",
                r["started_at"],
                (r["error"] or "")[:60],
            )
            for r in rows
        ],
    )
