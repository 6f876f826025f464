"""Console helpers: one-line errors, tables, ``--json``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

# The --json flag of every list/status command.
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

console = Console()
err_console = Console(stderr=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=str, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 asset``, ``3 assets``, ``0 assets``: a count with its noun in the right number."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> None:
    """A table of ``rows``. Ids are never cut (they are what one copies into the next command);
    piped or redirected, the table takes its natural width instead of 80 columns, so a
    ``| grep`` sees whole titles and ids."""
    t = Table(title=title, show_lines=False, header_style="bold")
    for c in columns:
        if c == "id" or c.endswith(" id"):
            t.add_column(c, no_wrap=True, min_width=36)
        else:
            t.add_column(c)
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    if console.is_terminal:
        console.print(t)
    else:
        natural = Measurement.get(console, console.options.update(max_width=10_000), t).maximum
        narrow = console.width
        console.width = max(narrow, natural)  # print(width=) can only narrow
        try:
            console.print(t)
        finally:
            console.width = narrow


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise SystemExit(code)


def read_password(from_stdin: bool, hint: str) -> str:
    """Password from one stdin line, or an interactive prompt; never from argv (shell history)."""
    import typer

    from openkb.errors import ValidationError

    if from_stdin:
        pw = sys.stdin.readline().rstrip("\n")
    elif sys.stdin.isatty():
        pw = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    else:
        raise ValidationError(f"no password: pass {hint}")
    if not pw:
        raise ValidationError("empty password")
    return str(pw)
