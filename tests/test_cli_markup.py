"""What users typed is printed as typed: a title, a group or token name, a file name with square
brackets in it (``a[/i]``, ``[bold]``) is data, not console markup; and a result line piped to a
script is one line however long."""

from __future__ import annotations

import json
import uuid

import pytest

from openkb.models import KnowledgeBase
from tests.factories import make_kb, make_tenant, make_user, make_workspace
from tests.test_cli import db_env, run  # noqa: F401 - db_env is a fixture

ODD = "Arrays a[/i] notes [bold]x[/x] odd [red]y"


def _ok(p):
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    return p


@pytest.fixture()
def odd_world(committed):
    with committed() as s:
        t = make_tenant(s, name=f"Acme {ODD}")
        admin = make_user(s, t, role="tenant_admin")
        ws = make_workspace(s, t, admin)
        kb = make_kb(s, ws, admin, title=ODD)
        s.commit()
        return {"tenant": t.slug, "email": admin.email, "kb": str(kb.id)}


def test_names_with_brackets_print_as_typed_in_every_listing(db_env, odd_world):  # noqa: F811
    slug, email = odd_world["tenant"], odd_world["email"]
    assert ODD in _ok(run(["kb", "list", "--tenant", slug], env=db_env)).stdout
    assert f"Acme {ODD}" in _ok(run(["tenant", "list"], env=db_env)).stdout

    created = _ok(run(["group", "create", "team [/x] [bold]b", "--tenant", slug], env=db_env))
    assert "created group team [/x] [bold]b (" in created.stdout
    assert "team [/x] [bold]b" in _ok(run(["group", "list", "--tenant", slug], env=db_env)).stdout

    _ok(run(["token", "create", "--user", email, "--name", "[/x] laptop [bold]"], env=db_env))
    assert "[/x] laptop [bold]" in _ok(run(["token", "list", "--user", email], env=db_env)).stdout


def test_import_summary_shows_file_names_and_reasons_as_typed(db_env, odd_world, tmp_path):  # noqa: F811
    (tmp_path / "bad [bold]b.md").write_bytes(b"\x00\x00binary [/b]\x00")
    (tmp_path / "fine [b].md").write_text("# Fine [/b]\n\nSee [bold]this[/b] and [gone](<missing [/b].md>).\n")
    p = run(["import", str(tmp_path), "--kb", odd_world["kb"]], env=db_env)
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    assert "bad [bold]b.md" in p.stdout
    assert "missing [/b].md" in p.stdout  # the unresolved link's warning
    assert p.stderr.startswith("error: 1 of 2 files failed")


def test_search_results_table_shows_titles_and_paths_as_typed(capsys):
    from cli.output import table

    table("2 results for [/x]@example.com", ["title", "path"], [("odd [red]x[bold]", "bad [bold]b.md"), (None, 1)])
    out = capsys.readouterr().out
    assert "2 results for [/x]@example.com" in out
    assert "odd [red]x[bold]" in out and "bad [bold]b.md" in out


def test_a_result_line_piped_is_one_line(db_env, odd_world, tmp_path, committed):  # noqa: F811
    """`run id: X (undo: openkb import revert X --kb Y)` was cut at column 80 for a script."""
    (tmp_path / "page.md").write_text("# Page\n\ntext\n")
    p = _ok(run(["import", str(tmp_path), "--kb", odd_world["kb"]], env=db_env))
    undo = [line for line in p.stdout.splitlines() if line.startswith("run id:")]
    assert len(undo) == 1 and undo[0].endswith(f"--kb {odd_world['kb']})"), p.stdout
    long_name = "a group whose name is long enough to pass the eightieth column " + uuid.uuid4().hex
    p = _ok(run(["group", "create", long_name, "--tenant", odd_world["tenant"], "--json"], env=db_env))
    gid = json.loads(p.stdout)["id"]
    p = _ok(run(["group", "rename", gid, long_name + " renamed", "--tenant", odd_world["tenant"]], env=db_env))
    assert p.stdout.splitlines() == [f"renamed group to {long_name} renamed ({gid})"]
    with committed() as s:
        assert s.get(KnowledgeBase, uuid.UUID(odd_world["kb"])).title == ODD
