"""Appliance lifecycle: up, serve, worker, init, migrate, doctor, config."""

from __future__ import annotations

import os
import time
from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from cli.context import appliance, unit_of_work
from cli.output import console, emit_json, err_console, read_password, styled, table


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("serve")(serve)
    app.command("worker")(worker)
    app.command("init")(init)
    app.command("migrate")(migrate)
    app.command("doctor")(doctor)
    config_app = typer.Typer(help="Show the effective configuration.", no_args_is_help=True)
    config_app.command("show")(config_show)
    app.add_typer(config_app, name="config")


def up(
    host: Annotated[str, typer.Option(help="Address the API listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port the API listens on.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker threads in the queue consumer.")] = 2,
) -> None:
    """Start the whole appliance (embedded PostgreSQL, Milvus Lite, embedder, worker, API) and keep every part running."""
    from cli.supervisor import Supervisor
    from openkb.config import get_settings

    _serving(host, port)
    settings = get_settings()
    sup = Supervisor(settings, host, port, say=lambda m: err_console.print(m, highlight=False), workers=workers)
    console.print(f"starting OpenKB in {settings.openkb_home} ...")
    sup.start()
    console.print(
        f"[bold green]OpenKB is ready[/] at {escape(sup.url)}  (ready in {sup.timings['ready_s']:.1f}s)", markup=True
    )
    if settings.app_base_url_source != "environment":
        console.print(
            f"Links in mail, shares and Dify citations use {settings.app_base_url} "
            "(set APP_BASE_URL to the address users reach).",
            highlight=False,
            soft_wrap=True,
        )
    for line in [*_first_steps(settings, sup.first_admin), *([sup.index_hint] if sup.index_hint else [])]:
        console.print(line, highlight=False, soft_wrap=True)
    console.print("Ctrl-C stops everything.")
    raise typer.Exit(sup.run_forever())


def _first_steps(settings, first_admin: str) -> list[str]:  # noqa: ANN001
    """What an operator needs to know to get in: who becomes the administrator (only while none
    exists) and where mail goes when it is not sent."""
    lines = []
    if first_admin == "first_sign_up":
        lines.append(
            "No administrator yet: the first user to register becomes system_admin "
            "(or run `openkb init --email ADDRESS`)."
        )
    elif first_admin == "init":
        lines.append("No administrator yet: run `openkb init --email ADDRESS` to create one.")
    if not settings.smtp_host:
        lines.append(
            f"Mail is not sent (SMTP_HOST unset): it is written to {settings.openkb_home / 'outbox'}; "
            "`openkb user activate ADDRESS` activates a sign-up without its verification link."
        )
    return lines


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
) -> None:
    """Run the API server only (for topologies with separate API and worker processes)."""
    import uvicorn

    from cli.supervisor import check_port
    from server.app import create_app
    from workers.queue import HueyQueue

    check_port(host, port)
    _serving(host, port)
    with appliance(migrate=not os.environ.get("OPENKB_SUPERVISED")) as ctx:
        app = create_app(ctx, queue=HueyQueue())
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=10)


def _serving(host: str, port: int) -> None:
    """Tell this process (and the children it starts) which address it serves, before anything
    reads the settings: with APP_BASE_URL unset, links follow --host/--port (see
    ``Settings._derive_app_base_url``)."""
    from openkb.config import SERVED_URL_ENV, reset_settings_cache, served_url

    os.environ[SERVED_URL_ENV] = served_url(host, port)
    reset_settings_cache()


def worker(
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker threads.")] = 2,
) -> None:
    """Run the queue consumer only."""
    from openkb.config import get_settings
    from server.logs import configure_logging
    from workers.consumer import run_consumer

    configure_logging(get_settings().openkb_log_level)
    with appliance(migrate=not os.environ.get("OPENKB_SUPERVISED")) as ctx:
        run_consumer(ctx, workers=workers)


def init(
    email: Annotated[str | None, typer.Option(help="Email of the first system administrator.")] = None,
    password_stdin: Annotated[bool, typer.Option("--password-stdin", help="Read the password from stdin.")] = False,
    display_name: Annotated[str | None, typer.Option(help="Display name of the administrator.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Scripted setup: migrate, default tenant, first system_admin. Safe to run again."""
    from openkb.bootstrap import create_first_admin, ensure_instance

    with appliance(components=("postgresql",)) as ctx:
        with unit_of_work(ctx) as s:
            boot = ensure_instance(s)
            created_admin = promoted_admin = None
            if email:
                first = create_first_admin(
                    s,
                    tenant=boot.tenant,
                    email=email,
                    password=lambda: read_password(
                        password_stdin, hint="--password-stdin and pipe it, or run interactively"
                    ),
                    display_name=display_name,
                )
                if first.user is not None:
                    if first.created:
                        created_admin = first.user.email
                    else:
                        promoted_admin = first.user.email
                note = first.note
            else:
                note = "no --email given: the first user to register becomes system_admin"
    result = {
        "tenant": boot.tenant.slug,
        "created_tenant": boot.created_tenant,
        "created_auth_settings": boot.created_auth_settings,
        "created_admin": created_admin,
        "promoted_admin": promoted_admin,
        "note": note,
    }
    if json_out:
        emit_json(result)
        return
    if not (boot.created_tenant or boot.created_auth_settings or created_admin or promoted_admin):
        console.print(f"already initialised (tenant '{boot.tenant.slug}'); {note}")
    else:
        console.print(f"initialised tenant '{boot.tenant.slug}'; {note}")


def migrate(json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Apply database migrations up to the version this code expects."""
    from openkb.migrate import current_revision, head_revision

    with appliance(components=("postgresql",), migrate=False) as ctx:
        before = current_revision(ctx.endpoints.database_url)
        from openkb.migrate import upgrade

        upgrade(ctx.endpoints.database_url)
        after = current_revision(ctx.endpoints.database_url)
    if json_out:
        emit_json({"before": before, "after": after, "head": head_revision()})
    else:
        console.print(f"schema {before or '(empty)'} -> {after}" if before != after else f"schema already at {after}")


def doctor(json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Check PostgreSQL, Milvus, the queue, the blob store and mail; exit non-zero if any is down.

    Beside a live ``openkb up`` it also shows each supervised part's state, pid, restarts and last
    exit reason (docs/operations.md#supervision); a core part not running fails the doctor."""
    from openkb.health import run_checks, supervised_parts
    from openkb.runtime.supervision import parts_down

    t = time.perf_counter()
    with appliance(migrate=False) as ctx:
        checks = run_checks(ctx)
        search_mode = "hybrid (dense + BM25)" if checks[-1].ok else "BM25-only"
        sources = dict(ctx.endpoints.sources)
        parts = supervised_parts(ctx.settings)
    down = parts_down(parts) if parts else []
    core_ok = all(c.ok for c in checks if c.name != "embedder") and not [n for n in down if n != "embedder"]
    if json_out:
        emit_json(
            {
                "ok": core_ok,
                "search_mode": search_mode,
                "checks": [c.as_dict() for c in checks],
                "services": sources,
                "parts": parts,
                "parts_down": down,
                "elapsed_ms": round((time.perf_counter() - t) * 1000),
            }
        )
    else:
        # the fix column only when something needs one: on a narrow terminal an empty column
        # squeezes the details into a word per line
        fixes = any(c.fix for c in checks)
        table(
            "openkb doctor",
            ["component", "status", "mode", "version", "detail", *(["fix"] if fixes else [])],
            [
                (
                    c.name,
                    styled("[green]ok[/]" if c.ok else "[red]DOWN[/]"),
                    c.mode,
                    c.version,
                    c.detail,
                    *([c.fix] if fixes else []),
                )
                for c in checks
            ],
        )
        if parts:
            table(
                "supervised by openkb up",
                ["part", "state", "pid", "restarts", "last exit"],
                [
                    (
                        name,
                        Text(p["state"], style="green" if p["state"] == "running" else "red"),
                        str(p.get("pid") or "-"),
                        str(p.get("restarts", 0)),
                        _last_exit(p),
                    )
                    for name, p in parts.items()
                ],
            )
        console.print(f"search mode: {search_mode}")
    if not core_ok:
        raise typer.Exit(1)


def _last_exit(part: dict) -> str:  # type: ignore[type-arg]
    if not part.get("last_exit"):
        return "-"
    ago = time.time() - float(part.get("last_exit_at") or time.time())
    return f"{part['last_exit']} ({ago:.0f}s ago)"


def config_show(json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Print the effective settings (secrets masked), each marked embedded or external."""
    from openkb.config import get_settings

    rows = get_settings().describe()
    if json_out:
        emit_json(rows)
    else:
        table(
            "effective configuration",
            ["variable", "value", "mode", "source"],
            [(r["name"], r["value"], r["mode"], r["source"]) for r in rows],
        )
