"""Console helpers: one-line errors, tables, ``--json``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# The --json flag of every list/status command.
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

# Markup off: what the CLI prints is mostly user data (titles, names, file paths, error details),
# and a title like ``Arrays a[/i] notes`` read as markup crashed the print (MarkupError) or lost
# its ``[bold]``. The few lines that colour a word on purpose say so (``markup=True``, with the
# data in them ``escape``d) or use ``styled``.
# Piped or redirected, a result line is one line however long (``soft_wrap``): a script's grep
# or cut must not see an id broken at column 80.
console = Console(markup=False)
console.soft_wrap = not console.is_terminal
err_console = Console(stderr=True, markup=False)
err_console.soft_wrap = not err_console.is_terminal


def styled(markup: str) -> Text:
    """A table cell or line coloured on purpose (``[green]ok[/]``): markup written by the CLI,
    never data (escape any with ``rich.markup.escape``)."""
    return Text.from_markup(markup)


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
    t = Table(title=None if title is None else Text(title), show_lines=False, header_style="bold")
    for c in columns:
        if c == "id" or c.endswith(" id"):
            t.add_column(c, no_wrap=True, min_width=36)
        else:
            t.add_column(c)
    for r in rows:
        t.add_row(*(_cell(v) for v in r))
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


def _cell(value: Any) -> RenderableType:
    """A cell as plain text: a title or name with brackets in it is shown as typed, not read as
    markup. A cell the CLI styled itself (``styled``) is kept."""
    if isinstance(value, Text):
        return value
    return Text("" if value is None else str(value))


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False, soft_wrap=True)
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
