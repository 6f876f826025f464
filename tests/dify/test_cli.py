"""``openkb dify ...`` as an operator runs it: subprocesses against the test database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from openkb.security import hash_token
from tests.factories import make_kb, make_personas

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], env: dict[str, str], timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=timeout,
        cwd=ROOT,
    )


def ok(p) -> str:
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def one_line_error(p, code: int, needle: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    assert p.stderr.strip().startswith("error:") and needle in p.stderr.replace("\n", " "), p.stderr


@pytest.fixture()
def env(database_url, test_home):
    return {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home), "APP_BASE_URL": "https://kb.example.com/"}


@pytest.fixture()
def world(committed):
    with committed() as s:
        p = make_personas(s)
        kb_a = make_kb(s, p.workspace, p.owner, title="A")
        kb_b = make_kb(s, p.workspace, p.owner, title="B")
        s.commit()
    return p, kb_a, kb_b


def test_key_lifecycle(env, world, committed):
    p, kb_a, kb_b = world
    t = ["--tenant", p.tenant.slug]
    out = json.loads(
        ok(
            run(
                [
                    "dify",
                    "key",
                    "create",
                    "--name",
                    "support-bot",
                    "--kb",
                    str(kb_a.id),
                    "--kb",
                    kb_b.slug,
                    "--top-k-limit",
                    "5",
                    "--expires",
                    "30d",
                    "--metadata-filter",
                    "lang=zh",
                    *t,
                    "--json",
                ],
                env,
            )
        )
    )
    assert out["id"] and out["key"].startswith("okdify_")
    assert out["knowledge_base_ids"] == [str(kb_a.id), str(kb_b.id)] and out["top_k_limit"] == 5
    assert out["metadata_filter"]["conditions"][0] == {"name": "lang", "comparison_operator": "is", "value": "zh"}
    with committed() as s:
        h = s.execute(text("SELECT key_hash FROM dify_api_keys WHERE id = :id"), {"id": out["id"]}).scalar_one()
        audit = s.execute(
            text("SELECT metadata::text FROM audit_logs WHERE object_id = :id AND action = 'dify.key.create'"),
            {"id": out["id"]},
        ).scalar_one()
    assert h == hash_token(out["key"]) and out["key"] not in audit

    listed = json.loads(ok(run(["dify", "key", "list", *t, "--json"], env)))
    assert [k["id"] for k in listed] == [out["id"]] and "key" not in listed[0]
    human = ok(run(["dify", "key", "list", *t], env))
    assert "support-bot" in human and out["key"] not in human

    assert json.loads(ok(run(["dify", "key", "disable", out["id"], *t, "--json"], env)))["status"] == "disabled"
    assert json.loads(ok(run(["dify", "key", "enable", out["id"], *t, "--json"], env)))["status"] == "active"
    rotated = json.loads(ok(run(["dify", "key", "rotate", out["id"], *t, "--json"], env)))
    assert rotated["id"] == out["id"] and rotated["key"] != out["key"]
    upd = json.loads(ok(run(["dify", "key", "update", out["id"], "--no-kb", "--expires", "never", *t, "--json"], env)))
    assert upd["knowledge_base_ids"] == [] and upd["expires_at"] is None
    assert json.loads(ok(run(["dify", "key", "revoke", out["id"], *t, "--json"], env)))["status"] == "revoked"
    one_line_error(run(["dify", "key", "enable", out["id"], *t], env), 7, "revoked")
    one_line_error(run(["dify", "key", "revoke", out["id"], "--tenant", p.other_tenant.slug], env), 4, "no Dify key")


def test_key_create_without_kb_warns_and_bad_input_is_one_line(env, world):
    p, *_ = world
    t = ["--tenant", p.tenant.slug]
    human = run(["dify", "key", "create", "--name", "nothing", *t], env)
    assert "okdify_" in ok(human)
    assert "will find nothing" in " ".join(human.stdout.split())
    one_line_error(run(["dify", "key", "create", "--name", "x", "--kb", "no-such-kb", *t], env), 4, "no knowledge base")
    one_line_error(run(["dify", "key", "create", "--name", "x", "--expires", "soon", *t], env), 2, "--expires")
    one_line_error(run(["dify", "key", "create", "--name", "x", "--metadata-filter", "oops", *t], env), 2, "NAME=VALUE")


def test_map_list_disable(env, world):
    p, kb_a, kb_b = world
    t = ["--tenant", p.tenant.slug]
    m = json.loads(ok(run(["dify", "map", "--knowledge-id", "team-docs", "--kb", str(kb_a.id), *t, "--json"], env)))
    assert m["created"] and m["knowledge_base_id"] == str(kb_a.id)
    m2 = json.loads(ok(run(["dify", "map", "--knowledge-id", "team-docs", "--kb", kb_b.slug, *t, "--json"], env)))
    assert not m2["created"] and m2["id"] == m["id"] and m2["knowledge_base_id"] == str(kb_b.id)
    rows = json.loads(ok(run(["dify", "map", "list", *t, "--json"], env)))
    assert [(r["knowledge_id"], r["status"]) for r in rows] == [("team-docs", "active")]
    d = json.loads(ok(run(["dify", "map", "disable", "team-docs", *t, "--json"], env)))
    assert d["status"] == "disabled" and d["before"] == "active"
    assert json.loads(ok(run(["dify", "map", "enable", m["id"], *t, "--json"], env)))["status"] == "active"
    one_line_error(run(["dify", "map", "disable", "team-docs", "--tenant", p.other_tenant.slug], env), 4, "no mapping")
    assert run(["dify", "map", "--knowledge-id", "x", *t], env).returncode == 2  # --kb missing


def test_info_prints_the_base_url_without_retrieval(env):
    data = json.loads(ok(run(["dify", "info", "--json"], env)))
    assert data["endpoint"] == "https://kb.example.com"  # trailing slash stripped: Dify appends /retrieval
    assert data["retrieval_url"] == "https://kb.example.com/retrieval" and not data["warnings"]
    human = ok(run(["dify", "info"], env))
    assert "https://kb.example.com" in human and "do not add /retrieval" in human
    local = json.loads(ok(run(["dify", "info", "--json"], {**env, "APP_BASE_URL": "http://127.0.0.1:8000"})))
    assert any("loopback" in w for w in local["warnings"])
