"""The ``openkb`` command. Subcommand groups live in ``cli/commands``; this file wires them and
turns domain errors into one line on stderr plus the error class's exit code."""

from __future__ import annotations

import os
import sys

# Before anything imports grpc: its fork handlers can break live channels when a library forks.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import typer

from openkb.errors import OpenKBError

app = typer.Typer(name="openkb", help="OpenKB: self-hosted Markdown knowledge base.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)

COMMAND_MODULES = (
    "cli.commands.system",
    "cli.commands.users",
    "cli.commands.groups",
    "cli.commands.profiles",
    "cli.commands.index",
    "cli.commands.search",
    "cli.commands.dify",
)


def _register() -> None:
    from openkb.runtime import optional_module

    for name in COMMAND_MODULES:
        mod = optional_module(name)
        if mod is not None:
            mod.register(app)


_register()


def run() -> None:
    from cli.output import err_console

    try:
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except OpenKBError as exc:
        err_console.print(f"[bold red]error:[/] {exc.detail}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except SystemExit:
        raise
    except OSError as exc:
        err_console.print(f"[bold red]error:[/] {exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}".rstrip(": "),
                          highlight=False, soft_wrap=True)
        sys.exit(74)
    except Exception as exc:  # click usage errors and friends
        import click

        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            err_console.print("aborted")
            sys.exit(1)
        from sqlalchemy.exc import OperationalError

        if isinstance(exc, OperationalError):
            first = str(exc.orig).splitlines()[0] if exc.orig else str(exc)
            err_console.print(f"[bold red]error:[/] PostgreSQL is unreachable (DATABASE_URL): {first}",
                              highlight=False, soft_wrap=True)
            sys.exit(69)
        raise


if __name__ == "__main__":
    run()
