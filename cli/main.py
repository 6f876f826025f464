"""The ``openkb`` command. Subcommand groups live in ``cli/commands``; this file wires them and
turns every error a user can cause into one line on stderr plus an exit code (docs/operations.md):
a domain error exits with its class's ``exit_code``, a usage error (unknown command or option,
missing option, bad value) with 2. Never a traceback for either.

The trap: typer >= 0.2x raises its *vendored* click's exceptions (``typer._click``), which are
not ``click.ClickException``; the public base they share is ``typer.TyperException``. Older
typer raises real click ones. ``_usage_error_types`` collects whichever exist.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, NoReturn

# Before anything imports grpc: its fork handlers can break live channels when a library forks.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import typer

from cli.commands import (
    apps,
    assets,
    backup,
    dify,
    export,
    facts,
    groups,
    importing,
    index,
    kb,
    profiles,
    search,
    system,
    tokens,
    users,
)
from openkb import __version__
from openkb.errors import OpenKBError

app = typer.Typer(
    name="openkb",
    help="OpenKB: self-hosted Markdown knowledge base.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"openkb {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """OpenKB: self-hosted Markdown knowledge base."""


for _module in (
    system,
    users,
    groups,
    profiles,
    index,
    search,
    dify,
    kb,
    importing,
    export,
    assets,
    tokens,
    backup,
    apps,
    facts,
):
    _module.register(app)


def _usage_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [typer.TyperException]
    try:
        import click

        types.append(click.ClickException)
    except ImportError:  # pragma: no cover - typer >= 0.2x does not need click
        pass
    return tuple(types)


def _abort_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [typer.Abort]
    try:
        import click

        types.append(click.exceptions.Abort)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


def usage_error_message(exc: Any) -> str:
    """``<message> (see 'openkb user list --help')`` on one line, whatever the message holds."""
    message = " ".join(str(exc.format_message()).split())
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{message}{hint}"


def _error(message: str) -> None:
    from rich.markup import escape

    from cli.output import err_console

    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False, soft_wrap=True)


def _stop_signal(exc: BaseException) -> BaseException | None:
    """The ``SystemExit`` (SIGTERM/SIGHUP while ``openkb up`` starts: cli/supervisor.py) or
    ``KeyboardInterrupt`` (Ctrl-C) behind ``exc``, when a signal handler raised it inside code that
    wraps what it raises: a signal landing in an import, while a class's ``__set_name__`` runs,
    surfaces as ``RuntimeError: Error calling __set_name__`` caused by it. The stop was asked
    for; the wrapper is an accident of where it landed."""
    seen: set[int] = set()
    e = exc.__cause__ or exc.__context__
    while e is not None and id(e) not in seen:
        if isinstance(e, (SystemExit, KeyboardInterrupt)):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _interrupted() -> NoReturn:
    from cli.output import err_console

    err_console.print("interrupted")
    sys.exit(130)


def run() -> None:
    try:
        rc = app(prog_name="openkb", standalone_mode=False)
        if rc == 130:  # typer turns a Ctrl-C into Exit(130) itself: the handler below never sees it
            _interrupted()
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except OpenKBError as exc:
        _error(str(exc.detail))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit:
        raise
    except _usage_error_types() as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `openkb user`: the group's help, as asked
            exc.show()  # type: ignore[attr-defined]
        else:
            _error(usage_error_message(exc))
        sys.exit(getattr(exc, "exit_code", 2))
    except _abort_types():
        from cli.output import err_console

        err_console.print("aborted")
        sys.exit(1)
    except OSError as exc:
        _error(f"{exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}".rstrip(": "))
        sys.exit(74)
    except Exception as exc:
        from sqlalchemy.exc import OperationalError

        stop = _stop_signal(exc)
        if isinstance(stop, SystemExit):
            raise SystemExit(stop.code) from None
        if stop is not None:
            _interrupted()
        if isinstance(exc, OperationalError):
            first = str(exc.orig).splitlines()[0] if exc.orig else str(exc)
            _error(f"PostgreSQL is unreachable (DATABASE_URL): {first}")
            sys.exit(69)
        raise


if __name__ == "__main__":
    run()
