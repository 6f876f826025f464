"""The ``openkb`` command as an operator runs it: real processes, real database.

Commands run as subprocesses against the test database (DATABASE_URL set = external), so
what is checked is exactly what a user sees: one line on error, the exit code, no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest


def run(args: list[str], env: dict[str, str] | None = None, input: str | None = None, timeout: float = 120):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, env=full_env,
                          input=input, timeout=timeout, cwd=Path(__file__).parent.parent)


@pytest.fixture()
def db_env(database_url, test_home):
    return {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}


def assert_one_line_error(proc, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert proc.stderr.strip().startswith("error:")
    for n in needles:
        assert n in proc.stderr.replace("\n", " "), proc.stderr


def test_config_show_json_marks_modes_and_masks(db_env):
    p = run(["config", "show", "--json"], env={**db_env, "SMTP_PASSWORD": "s3cret-mail", "MILVUS_TOKEN": "tok-123"})
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["DATABASE_URL"]["mode"] == "external"
    assert rows["REDIS_URL"]["mode"] == "embedded"
    assert "s3cret-mail" not in p.stdout and "tok-123" not in p.stdout
    for var in ("DATABASE_URL", "REDIS_URL", "S3_ENDPOINT", "S3_BUCKET", "S3_ACCESS_KEY", "S3_SECRET_KEY", "MILVUS_URI",
                "MILVUS_TOKEN", "MILVUS_DATABASE", "MILVUS_ACTIVE_ALIAS", "SMTP_HOST", "SMTP_USER", "SMTP_PASSWORD",
                "APP_BASE_URL", "OPENKB_HOME"):
        assert var in rows


def test_init_is_idempotent(db_env):
    email = f"admin-{uuid.uuid4().hex[:6]}@example.com"
    first = run(["init", "--json"], env=db_env)
    assert first.returncode == 0, first.stderr
    again = run(["init"], env=db_env)
    assert again.returncode == 0
    assert "already initialised" in again.stdout
    with_admin = run(["init", "--email", email, "--password-stdin", "--json"], env=db_env, input="correct horse battery\n")
    assert with_admin.returncode == 0, with_admin.stderr
    out = json.loads(with_admin.stdout)
    twice = run(["init", "--email", email, "--password-stdin", "--json"], env=db_env, input="correct horse battery\n")
    assert twice.returncode == 0
    assert json.loads(twice.stdout)["created_admin"] is None
    assert out["tenant"] == "default"


def test_tenant_and_user_lifecycle(db_env):
    slug = f"acme-{uuid.uuid4().hex[:6]}"
    p = run(["tenant", "create", slug, "--name", "Acme", "--json"], env=db_env)
    assert p.returncode == 0, p.stderr
    dup = run(["tenant", "create", slug], env=db_env)
    assert_one_line_error(dup, 7, "already exists")
    listed = json.loads(run(["tenant", "list", "--json"], env=db_env).stdout)
    assert slug in [t["slug"] for t in listed]

    email = f"ops-{uuid.uuid4().hex[:6]}@example.com"
    c = run(["user", "create", email, "--tenant", slug, "--password-stdin", "--json"], env=db_env, input="longenough1\n")
    assert c.returncode == 0, c.stderr
    assert json.loads(c.stdout)["status"] == "active"
    s = run(["user", "suspend", email, "--json"], env=db_env)
    assert json.loads(s.stdout)["status"] == "suspended"
    users = json.loads(run(["user", "list", "--status", "suspended", "--json"], env=db_env).stdout)
    assert email in [u["email"] for u in users]
    a = run(["user", "activate", email, "--json"], env=db_env)
    assert json.loads(a.stdout) | {} and json.loads(a.stdout)["before"] == "suspended"

    bad = run(["user", "create", "not-an-email", "--no-password"], env=db_env)
    assert_one_line_error(bad, 2, "not a valid email")
    short = run(["user", "create", f"x{uuid.uuid4().hex[:5]}@example.com", "--password-stdin"], env=db_env, input="short\n")
    assert_one_line_error(short, 2, "at least 8")
    missing = run(["user", "suspend", "nobody@example.com"], env=db_env)
    assert_one_line_error(missing, 4, "no user")


def test_malformed_database_url(test_home):
    p = run(["migrate"], env={"DATABASE_URL": "mysql://nope", "OPENKB_HOME": str(test_home)})
    assert_one_line_error(p, 78, "DATABASE_URL")


def test_unreachable_database(test_home):
    p = run(["migrate"], env={"DATABASE_URL": "postgresql://u:p@127.0.0.1:1/x", "OPENKB_HOME": str(test_home)})
    assert_one_line_error(p, 69, "PostgreSQL")


def test_malformed_milvus_uri(db_env):
    p = run(["doctor"], env={**db_env, "MILVUS_URI": "not a uri"})
    assert_one_line_error(p, 78, "MILVUS_URI")


def test_unwritable_home(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run(["up"], env={"OPENKB_HOME": str(blocker / "home")})
    assert_one_line_error(p, 78, "OPENKB_HOME")


def test_doctor_reports_unreachable_milvus(db_env):
    p = run(["doctor", "--json"], env={**db_env, "MILVUS_URI": "http://127.0.0.1:1", "OPENKB_EMBEDDER_URL": "off"})
    assert p.returncode == 1
    rep = json.loads(p.stdout)
    by = {c["name"]: c for c in rep["checks"]}
    assert by["milvus"]["ok"] is False and by["milvus"]["fix"]
    assert by["postgresql"]["ok"] is True
    assert rep["search_mode"] == "BM25-only"


def test_up_refuses_busy_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = run(["up", "--port", str(port)], env={"OPENKB_HOME": str(tmp_path / "h")})
    assert_one_line_error(p, 78, f"port {port}")
    assert not list((tmp_path / "h" / "run").glob("*.json"))  # nothing half-started


def test_up_with_unreachable_milvus_says_so(tmp_path, database_url):
    p = run(["up", "--port", str(_free_port())],
            env={"OPENKB_HOME": str(tmp_path / "h"), "DATABASE_URL": database_url, "MILVUS_URI": "http://127.0.0.1:1",
                 "OPENKB_EMBEDDER_URL": "off"})
    assert_one_line_error(p, 69, "MILVUS_URI")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _logs(home: Path) -> str:
    out = []
    for f in sorted((home / "logs").glob("*.log")):
        out.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-1500:])
    return "\n".join(out)


@pytest.mark.slow
def test_up_on_a_fresh_home_end_to_end(tmp_path):
    """`openkb up` with nothing configured: ready, doctor all ok, second up refused, clean stop."""
    home = tmp_path / "fresh"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MILVUS_URI", "OPENKB_EMBEDDER_URL")}
    env["OPENKB_HOME"] = str(home)
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "up", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=Path(__file__).parent.parent)
    try:
        t = time.monotonic()
        ready = False
        while time.monotonic() - t < 240:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    ready = True
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (proc.stdout.read() if proc.stdout else "") + _logs(home)
            time.sleep(0.3)
        assert ready, _logs(home)
        doc = subprocess.run([sys.executable, "-m", "cli.main", "doctor", "--json"], env=env, capture_output=True,
                             text=True, timeout=120, cwd=Path(__file__).parent.parent)
        assert doc.returncode == 0, doc.stdout + doc.stderr + _logs(home)
        rep = json.loads(doc.stdout)
        core = {c["name"]: c for c in rep["checks"]}
        for name in ("postgresql", "milvus", "queue", "blobs", "mail"):
            assert core[name]["ok"], core[name]
            assert core[name]["mode"] == "embedded"
        # doctor borrowed the running instance's services instead of starting its own
        assert rep["services"]["postgresql"] == "embedded-shared"
        assert rep["services"]["milvus"] == "embedded-shared"
        second = subprocess.run([sys.executable, "-m", "cli.main", "up", "--port", str(_free_port())], env=env,
                                capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent)
        assert_one_line_error(second, 75, "already running")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0, _logs(home)
    # children gone: nothing listens on the port any more
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)


# --- usage errors: one line on stderr, exit 2, never a traceback (docs/operations.md) ------------

USAGE_ERRORS = [
    pytest.param(["nosuch"], "No such command", id="unknown-command"),
    pytest.param(["--bogus"], "No such option", id="unknown-top-level-option"),
    pytest.param(["up", "--port", "abc"], "--port", id="bad-int-top-level"),
    pytest.param(["user", "nosuch"], "No such command", id="unknown-nested-command"),
    pytest.param(["user", "list", "--bogus"], "No such option", id="unknown-nested-option"),
    pytest.param(["user", "list", "--status"], "requires an argument", id="option-without-value"),
    pytest.param(["dify", "key", "create"], "Missing option", id="missing-nested-option"),
    pytest.param(["dify", "key", "create", "--name", "k", "--top-k-limit", "many"], "--top-k-limit",
                 id="bad-int-nested"),
    pytest.param(["search"], "Missing argument", id="missing-argument"),
]


@pytest.mark.parametrize(("args", "needle"), USAGE_ERRORS)
def test_usage_error_is_one_line_and_exit_2(args, needle, test_home):
    p = run(args, env={"OPENKB_HOME": str(test_home)})
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error:") and needle in lines[0], lines[0]
    assert p.stdout == ""


def test_usage_error_names_the_help_of_the_command_that_failed(test_home):
    p = run(["user", "list", "--bogus"], env={"OPENKB_HOME": str(test_home)})
    assert "openkb user list --help" in p.stderr


def test_version_prints_the_package_version():
    from openkb import __version__

    p = run(["--version"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"openkb {__version__}"
    assert p.stderr == ""


def test_no_arguments_prints_help_not_a_traceback():
    p = run([])
    assert "Traceback" not in p.stderr + p.stdout
    assert "Usage: openkb" in p.stdout + p.stderr
