"""The CLI starts without the database layer, the settings or any service (cli/context.py).

Every ``openkb`` command pays the CLI's start: with the models and the export, import and
permission services imported by the command modules, ``openkb --help`` took ~3 s; they are
imported now by the commands that use them. This checks what ``import cli.main`` loads (a
fact, not a timing) and that help still lists every group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("sqlmodel", "sqlalchemy", "pydantic_settings", "openkb.models", "openkb.config", "openkb.permissions")


def test_the_cli_starts_without_the_database_layer_or_services():
    code = f"import json, sys, cli.main; print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_help_lists_the_commands_whose_imports_moved():
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "--help"], capture_output=True, text=True, timeout=120, check=True
    )
    for name in ("export", "import", "index", "app", "up", "doctor"):
        assert f" {name} " in out.stdout, name


def test_flags_show_no_value_placeholder_in_help():
    """A flag takes no value: its help line must not suggest one (``--json <bool>``)."""
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "tenant", "list", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    flags = [line for line in out.stdout.splitlines() if "--json" in line or "--help" in line]
    assert len(flags) == 2 and not any("<bool>" in line for line in flags), flags


def test_up_tells_the_operator_how_to_get_in():
    """``openkb up``'s last lines: who becomes the administrator only while none exists, and where
    mail goes when it is not sent (docs/accounts.md#first-administrator)."""
    from pathlib import Path
    from types import SimpleNamespace

    from cli.commands.system import _first_steps

    home = Path("/srv/openkb")
    outbox = SimpleNamespace(smtp_host=None, openkb_home=home)
    smtp = SimpleNamespace(smtp_host="mail.example.com", openkb_home=home)
    first, mail = _first_steps(outbox, "first_sign_up")
    assert "first user to register becomes system_admin" in first and "openkb init --email" in first
    assert str(home / "outbox") in mail and "openkb user activate" in mail
    (only,) = _first_steps(smtp, "init")
    assert "openkb init --email" in only and "first user" not in only
    assert _first_steps(smtp, "present") == []
    assert len(_first_steps(outbox, "present")) == 1
