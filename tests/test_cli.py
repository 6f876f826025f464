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
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=timeout,
        cwd=Path(__file__).parent.parent,
        check=False,
    )


@pytest.fixture()
def db_env(database_url, test_home):
    return {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}


def assert_one_line_error(proc, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert proc.stderr.strip().startswith("error:")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for n in needles:
        assert n in proc.stderr.replace("\n", " "), proc.stderr


def test_config_show_json_marks_modes_and_masks(db_env):
    p = run(["config", "show", "--json"], env={**db_env, "SMTP_PASSWORD": "s3cret-mail", "MILVUS_TOKEN": "tok-123"})
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["DATABASE_URL"]["mode"] == "external"
    assert rows["REDIS_URL"]["mode"] == "embedded"
    assert "s3cret-mail" not in p.stdout and "tok-123" not in p.stdout
    for var in (
        "DATABASE_URL",
        "REDIS_URL",
        "S3_ENDPOINT",
        "S3_BUCKET",
        "S3_ACCESS_KEY",
        "S3_SECRET_KEY",
        "MILVUS_URI",
        "MILVUS_TOKEN",
        "MILVUS_DATABASE",
        "MILVUS_ACTIVE_ALIAS",
        "SMTP_HOST",
        "SMTP_USER",
        "SMTP_PASSWORD",
        "APP_BASE_URL",
        "OPENKB_HOME",
    ):
        assert var in rows


def test_init_is_idempotent(db_env):
    email = f"admin-{uuid.uuid4().hex[:6]}@example.com"
    first = run(["init", "--json"], env=db_env)
    assert first.returncode == 0, first.stderr
    again = run(["init"], env=db_env)
    assert again.returncode == 0
    assert "already initialised" in again.stdout
    with_admin = run(
        ["init", "--email", email, "--password-stdin", "--json"], env=db_env, input="correct horse battery\n"
    )
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
    c = run(
        ["user", "create", email, "--tenant", slug, "--password-stdin", "--json"], env=db_env, input="longenough1\n"
    )
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
    short = run(
        ["user", "create", f"x{uuid.uuid4().hex[:5]}@example.com", "--password-stdin"], env=db_env, input="short\n"
    )
    assert_one_line_error(short, 2, "at least 8")
    missing = run(["user", "suspend", "nobody@example.com"], env=db_env)
    assert_one_line_error(missing, 4, "no user")


def test_malformed_database_url(test_home):
    p = run(["migrate"], env={"DATABASE_URL": "mysql://nope", "OPENKB_HOME": str(test_home)})
    assert_one_line_error(p, 78, "DATABASE_URL")


def test_unreachable_database(test_home):
    p = run(["migrate"], env={"DATABASE_URL": "postgresql://u:p@127.0.0.1:1/x", "OPENKB_HOME": str(test_home)})
    assert_one_line_error(p, 69, "PostgreSQL")


def test_unreachable_database_for_any_command(test_home):
    """Every command checks the schema first: the driver's hint on its next lines ("Is the server
    running...") used to follow the error line."""
    p = run(["user", "list"], env={"DATABASE_URL": "postgresql://u:p@127.0.0.1:1/x", "OPENKB_HOME": str(test_home)})
    assert_one_line_error(p, 69, "PostgreSQL", "DATABASE_URL")


def test_index_status_when_milvus_cannot_be_asked(db_env):
    """What it knows, sync "unknown" (not "differs"), and exit 69 for scripts."""
    env = {**db_env, "MILVUS_URI": "http://127.0.0.1:1", "OPENKB_EMBEDDER_URL": "off"}
    p = run(["index", "status", "--json"], env=env)
    assert p.returncode == 69, (p.stdout, p.stderr)
    out = json.loads(p.stdout)
    assert out["milvus"].startswith("unreachable") and out["in_sync"] is None and out["pg_chunks"] >= 0
    p = run(["index", "status"], env=env)
    assert p.returncode == 69 and "Traceback" not in p.stderr
    assert "not checked" in p.stdout and "differs" not in p.stdout


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
    p = run(
        ["up", "--port", str(_free_port())],
        env={
            "OPENKB_HOME": str(tmp_path / "h"),
            "DATABASE_URL": database_url,
            "MILVUS_URI": "http://127.0.0.1:1",
            "OPENKB_EMBEDDER_URL": "off",
        },
    )
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


# --- `openkb up` as a real process tree (shared with tests/test_runtime.py) ------------------------

ROOT = Path(__file__).parent.parent


def up_env(home: Path) -> dict[str, str]:
    """Nothing configured: every component embedded, and no APP_BASE_URL (conftest sets one for
    the in-process server; an operator's `openkb up` usually has none)."""
    drop = ("DATABASE_URL", "MILVUS_URI", "OPENKB_EMBEDDER_URL", "APP_BASE_URL", "OPENKB_SERVED_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["OPENKB_HOME"] = str(home)
    return env


def start_up(env: dict[str, str], port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )


def wait_ready(proc: subprocess.Popen[str], port: int, home: Path, timeout: float = 240) -> None:
    """Ready as `openkb up` itself means it: /readyz is 200 *and* up wrote its run record (a signal
    sent before that stops a start in progress, which exits 143 by design)."""
    from openkb.runtime.home import Home, read_record

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if (
                httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
                and read_record(Home(home), "up") is not None
            ):
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, (proc.stdout.read() if proc.stdout else "") + _logs(home)
        time.sleep(0.3)
    raise AssertionError("openkb up never became ready\n" + _logs(home))


def cli(args: list[str], env: dict[str, str], input: str | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture(scope="module")
def fresh_up(tmp_path_factory):
    """One `openkb up` on a fresh home, nothing configured, APP_BASE_URL unset, on a port that is
    not 8000; stopped with SIGTERM at the end (which must be clean)."""
    home = tmp_path_factory.mktemp("fresh") / "home"
    port = _free_port()
    env = up_env(home)
    proc = start_up(env, port)
    try:
        wait_ready(proc, port, home)
        yield {"proc": proc, "env": env, "port": port, "home": home, "base": f"http://127.0.0.1:{port}"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(90)
    out = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, out + _logs(home)
    assert f"use http://127.0.0.1:{port} " in " ".join(out.split()), out  # up says what links will say
    # children gone: nothing listens on the port any more
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)


@pytest.mark.slow
def test_up_on_a_fresh_home_end_to_end(fresh_up):
    """`openkb up` with nothing configured: ready, doctor all ok, second up refused."""
    env, home = fresh_up["env"], fresh_up["home"]
    doc = cli(["doctor", "--json"], env)
    assert doc.returncode == 0, doc.stdout + doc.stderr + _logs(home)
    rep = json.loads(doc.stdout)
    core = {c["name"]: c for c in rep["checks"]}
    for name in ("postgresql", "milvus", "queue", "blobs", "mail"):
        assert core[name]["ok"], core[name]
        assert core[name]["mode"] == "embedded"
    # doctor borrowed the running instance's services instead of starting its own
    assert rep["services"]["postgresql"] == "embedded-shared"
    assert rep["services"]["milvus"] == "embedded-shared"
    # the Lite server `up` started scores BM25 over the whole collection (docs/retrieval.md#bm25-statistics),
    # and says so to doctor and to /readyz (whose API is handed Lite's address as MILVUS_URI)
    said = "BM25 scored with the whole collection's statistics"
    assert said in core["milvus"]["detail"], core["milvus"]
    assert not core["milvus"]["fix"]
    ready = httpx.get(fresh_up["base"] + "/readyz", timeout=30).json()
    assert said in ready["checks"]["milvus"]["detail"], ready["checks"]["milvus"]
    second = cli(["up", "--port", str(_free_port())], env, timeout=60)
    assert_one_line_error(second, 75, "already running")


def _mail_with(home: Path, to: str, needle: str, timeout: float = 60) -> str:
    """The body of a mail to ``to`` in the outbox containing ``needle`` (mail goes out after commit)."""
    from email import message_from_bytes, policy

    deadline = time.monotonic() + timeout
    bodies: list[str] = []
    while time.monotonic() < deadline:
        bodies = []
        for p in sorted((home / "outbox").glob("*.eml")):
            msg = message_from_bytes(p.read_bytes(), policy=policy.default)
            if str(msg["To"]).strip().lower() == to.lower():
                bodies.append(msg.get_body(preferencelist=("plain",)).get_content())  # type: ignore[union-attr]
        for b in bodies:
            if needle in b:
                return b
        time.sleep(0.2)
    raise AssertionError(f"no mail to {to} containing {needle!r}; got {bodies!r}")


@pytest.mark.slow
def test_links_follow_the_served_port_when_app_base_url_is_unset(fresh_up):
    """`openkb up --port P` without APP_BASE_URL: every link says :P, not the default :8000 -
    config show (and where it came from), dify info, verification/reset mail, invitation and share
    URLs, Dify citations."""
    env, home, base = fresh_up["env"], fresh_up["home"], fresh_up["base"]
    assert fresh_up["port"] != 8000

    shown = cli(["config", "show", "--json"], env)
    assert shown.returncode == 0, shown.stderr
    row = {r["name"]: r for r in json.loads(shown.stdout)}["APP_BASE_URL"]
    assert row["value"] == base
    assert "derived" in row["source"] and "openkb up" in row["source"], row
    # with APP_BASE_URL set, it wins and config show says so
    pinned = cli(["config", "show", "--json"], {**env, "APP_BASE_URL": "https://kb.example.com"})
    row = {r["name"]: r for r in json.loads(pinned.stdout)}["APP_BASE_URL"]
    assert (row["value"], row["source"]) == ("https://kb.example.com", "environment")

    info = cli(["dify", "info", "--json"], env)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["endpoint"] == base

    admin = f"admin-{uuid.uuid4().hex[:6]}@example.com"
    made = cli(["init", "--email", admin, "--password-stdin"], env, input="correct horse battery\n")
    assert made.returncode == 0, made.stderr
    with httpx.Client(base_url=base, timeout=30) as http:
        newcomer = f"new-{uuid.uuid4().hex[:6]}@example.com"
        r = http.post(
            "/api/auth/register", json={"email": newcomer, "password": "correct horse battery", "display_name": "New"}
        )
        assert r.status_code == 201, r.text
        assert r.json()["verification_required"] is True
        _mail_with(home, newcomer, f"{base}/verify-email?token=")
        r = http.post("/api/auth/password-reset/request", json={"email": admin})
        assert r.status_code == 202, r.text
        _mail_with(home, admin, f"{base}/reset-password?token=")

        r = http.post("/api/auth/login", json={"email": admin, "password": "correct horse battery"})
        assert r.status_code == 200, r.text
        http.headers["X-CSRF-Token"] = r.json()["csrf_token"]
        ws = http.post("/api/workspaces", json={"name": "Links"})
        assert ws.status_code == 201, ws.text
        kb = http.post(
            "/api/knowledge-bases",
            json={"workspace_id": ws.json()["id"], "title": "Links KB", "visibility": "workspace"},
        )
        assert kb.status_code == 201, kb.text
        kb_id = kb.json()["id"]
        word = f"wombat{uuid.uuid4().hex[:8]}"
        doc = http.post(
            "/api/documents",
            json={
                "knowledge_base_id": kb_id,
                "type": "page",
                "title": "Wombats",
                "markdown": f"# Wombats\n\nThe {word} digs burrows.\n",
            },
        )
        assert doc.status_code == 201, doc.text
        doc_id = doc.json()["id"]

        share = http.post(f"/api/objects/knowledge_base/{kb_id}/share-links", json={})
        assert share.status_code == 201, share.text
        assert share.json()["url"].startswith(f"{base}/share/"), share.json()["url"]
        invitee = f"guest-{uuid.uuid4().hex[:6]}@example.com"
        inv = http.post(f"/api/objects/knowledge_base/{kb_id}/invitations", json={"role": "viewer", "email": invitee})
        assert inv.status_code == 201, inv.text
        assert inv.json()["url"].startswith(f"{base}/invitations/"), inv.json()["url"]
        _mail_with(home, invitee, f"{base}/invitations/")

        key = cli(["dify", "key", "create", "--name", "links", "--kb", kb_id, "--json"], env)
        assert key.returncode == 0, key.stderr
        mapped = cli(["dify", "map", "--knowledge-id", "links-kb", "--kb", kb_id], env)
        assert mapped.returncode == 0, mapped.stderr
        deadline = time.monotonic() + 180
        while http.get(f"/api/documents/{doc_id}").json()["index_status"] != "indexed":
            assert time.monotonic() < deadline, _logs(home)
            time.sleep(0.5)
        r = http.post(
            "/retrieval",
            headers={"Authorization": f"Bearer {json.loads(key.stdout)['key']}"},
            json={"knowledge_id": "links-kb", "query": word, "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}},
        )
        assert r.status_code == 200, r.text
        records = r.json()["records"]
        assert records, r.text
        assert all(rec["metadata"]["url"].startswith(f"{base}/app/kb/{kb_id}/docs/") for rec in records), records


# --- usage errors: one line on stderr, exit 2, never a traceback (docs/operations.md) ------------

USAGE_ERRORS = [
    pytest.param(["nosuch"], "No such command", id="unknown-command"),
    pytest.param(["--bogus"], "No such option", id="unknown-top-level-option"),
    pytest.param(["up", "--port", "abc"], "--port", id="bad-int-top-level"),
    pytest.param(["user", "nosuch"], "No such command", id="unknown-nested-command"),
    pytest.param(["user", "list", "--bogus"], "No such option", id="unknown-nested-option"),
    pytest.param(["user", "list", "--status"], "requires an argument", id="option-without-value"),
    pytest.param(["dify", "key", "create"], "Missing option", id="missing-nested-option"),
    pytest.param(
        ["dify", "key", "create", "--name", "k", "--top-k-limit", "many"], "--top-k-limit", id="bad-int-nested"
    ),
    pytest.param(["search"], "Missing argument", id="missing-argument"),
    # out of range: an OverflowError traceback from the socket, or a consumer with no thread
    pytest.param(["serve", "--port", "70000"], "1<=x<=65535", id="port-out-of-range"),
    pytest.param(["up", "--port", "0"], "1<=x<=65535", id="port-zero"),
    pytest.param(["worker", "--workers", "0"], "1<=x<=64", id="no-worker-threads"),
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


def _signal_inside_a_class_body(exc: BaseException):
    """What a stop signal raised while an import defines a class looks like (Python 3.11 wraps an
    exception from ``__set_name__`` in RuntimeError; later versions let it through)."""

    def command(**_kw):
        class Field:
            def __set_name__(self, owner, name):
                raise exc

        class Range:
            bounds = Field()

    return command


@pytest.mark.parametrize(
    ("raised", "code", "said"),
    [(SystemExit(128 + signal.SIGTERM), 128 + signal.SIGTERM, ""), (KeyboardInterrupt(), 130, "interrupted")],
)
def test_a_stop_signal_landing_in_an_import_exits_without_a_traceback(monkeypatch, capsys, raised, code, said):
    """`openkb up` turns SIGTERM into SystemExit while it starts (cli/supervisor.py); one that
    arrived while SQLAlchemy defined a class printed a RuntimeError traceback instead of
    exiting 143 (seen under a loaded machine's timing)."""
    import cli.main

    monkeypatch.setattr(cli.main, "app", _signal_inside_a_class_body(raised))
    with pytest.raises(SystemExit) as e:
        cli.main.run()
    assert e.value.code == code
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert said in out.err if said else out.err == ""  # a signal's exit says nothing more


def test_backup_and_restore_refuse_in_one_line(db_env, tmp_path):
    """A file that is no archive (tarfile lists each compression it tried, one per line): one
    line, exit 65. A folder the backup cannot be written in, or an archive that is not there, is
    the I/O error's 74 (docs/operations.md#exit-codes), not the damaged archive's 65."""
    junk = tmp_path / "photo.tar.gz"
    junk.write_bytes(os.urandom(3000))
    p = run(["restore", str(junk)], db_env)
    assert_one_line_error(p, 65, "is not an OpenKB backup archive")
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    p = run(["backup", "/proc/openkb.tar"], db_env)  # no file can be created in /proc
    assert_one_line_error(p, 74, "cannot write the backup in /proc")
    p = run(["backup", str(tmp_path / "no-such-dir" / "x.tar")], db_env)
    assert_one_line_error(p, 74, "cannot write the backup in", "no-such-dir")
    p = run(["restore", str(tmp_path / "missing.tar")], db_env)
    assert_one_line_error(p, 74, "cannot read", "missing.tar")
    for args in ([], [str(tmp_path / "a.tar"), "--out", str(tmp_path / "b.tar")]):  # none, or two
        p = run(["backup", *args], db_env)
        assert_one_line_error(p, 2, "name the archive to write once")
    assert list(tmp_path.glob("*.tar")) == []


def test_backup_says_nothing_on_stderr_without_xdg_runtime_dir(db_env, tmp_path, monkeypatch):
    """Cron, sudo and containers have no XDG_RUNTIME_DIR; finding pgserver's pg_dump must not run
    the code that warns about it, or every scheduled backup mails a warning."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    p = run(["backup", "--out", str(tmp_path / "nightly.tar"), "--json"], db_env)  # as export spells it
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert json.loads(p.stdout)["path"].endswith("nightly.tar")


def test_ctrl_c_in_a_command_says_interrupted(monkeypatch, capsys):
    """typer turns a KeyboardInterrupt into exit 130 before cli.main sees it: the operator who
    pressed Ctrl-C got no word that the command stopped."""
    import typer

    import cli.main

    interrupted_app = typer.Typer()

    @interrupted_app.command()
    def slow() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.main, "app", interrupted_app)
    monkeypatch.setattr(sys, "argv", ["openkb"])
    with pytest.raises(SystemExit) as e:
        cli.main.run()
    assert e.value.code == 130
    out = capsys.readouterr()
    assert out.err.strip() == "interrupted" and out.out == ""


def test_backup_is_private_and_says_only_its_result_when_redirected(db_env, tmp_path):
    """The archive holds every page and the password and token hashes: readable by its owner
    only, as an export is. Redirected (cron), no progress bar: its empty line was the first
    thing in every log."""
    archive = tmp_path / "nightly.tar"
    p = run(["backup", str(archive)], db_env)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert p.stdout.startswith(f"backup written: {archive} (")
    assert archive.stat().st_mode & 0o777 == 0o600
    assert list(tmp_path.iterdir()) == [archive]


def test_an_interrupted_backup_leaves_no_partial_archive(db_env, tmp_path, monkeypatch, capsys):
    """Ctrl-C while the archive is written: nothing is left behind, and the re-run succeeds."""
    import tarfile

    import cli.main

    archive = tmp_path / "x.tar"
    real_add = tarfile.TarFile.add

    def add(self, name, *a, **kw):
        real_add(self, name, *a, **kw)
        raise KeyboardInterrupt  # after the first member: the partial file exists by now

    monkeypatch.setattr(tarfile.TarFile, "add", add)
    monkeypatch.setattr(sys, "argv", ["openkb", "backup", str(archive)])
    with pytest.raises(SystemExit) as e:
        cli.main.run()
    assert e.value.code == 130
    assert "interrupted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(tarfile.TarFile, "add", real_add)
    assert run(["backup", str(archive)], db_env).returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["x.tar"]
