"""``openkb app register|list|install|grants|uninstall`` as an operator runs them (subprocesses
against the test database), docs/apps.md#cli."""

from __future__ import annotations

import json

from openkb.apps.registry import resolve_caller
from openkb.errors import Unauthenticated
from tests.factories import make_tenant, make_user
from tests.test_cli import assert_one_line_error, db_env, run  # noqa: F401 - db_env is a fixture


def _ok(p):
    assert p.returncode == 0, (p.stdout, p.stderr)
    return p


def test_app_commands(db_env, committed, settings):  # noqa: F811 - the fixture
    with committed() as s:
        t = make_tenant(s)
        u = make_user(s, t)
        s.commit()
        email, slug = u.email, t.slug
    who = ["--user", email]
    bad = run(["app", "register", *who, "--name", "x", "--permission", "facts.read:self:*"], env=db_env)
    assert_one_line_error(bad, 2, "facts.read:self:*", "two levels")
    reg = json.loads(
        _ok(
            run(
                ["app", "register", *who, "--name", "diary-bot", "--permission", "collections.read:diary",
                 "--permission", "collections.write:diary", "--json"],
                env=db_env,
            )
        ).stdout
    )  # fmt: skip
    assert [p["permission"] for p in reg["permissions"]] == ["collections.read:diary", "collections.write:diary"]
    listed = json.loads(_ok(run(["app", "list", "--tenant", slug, "--json"], env=db_env)).stdout)
    assert [a["name"] for a in listed] == ["diary-bot"]
    inst = json.loads(_ok(run(["app", "install", "diary-bot", *who, "--json"], env=db_env)).stdout)
    assert inst["credential"].startswith("kbapp_")
    grants = json.loads(
        _ok(
            run(
                ["app", "grants", inst["installation_id"], *who, "--on", "collections.read:diary", "--json"], env=db_env
            )
        ).stdout
    )
    assert grants["installation_id"] == inst["installation_id"] and grants["last_used_at"] is None
    assert {g["permission"]: g["enabled"] for g in grants["grants"]} == {
        "collections.read:diary": True,
        "collections.write:diary": False,
    }
    with committed() as s:
        assert resolve_caller(s, inst["credential"], settings.secret_key).grants == {"collections.read:diary"}
    with committed() as s:
        resolve_caller(s, inst["credential"], settings.secret_key)  # a call stamps last_used_at
        s.commit()
    mine = json.loads(_ok(run(["app", "list", *who, "--json"], env=db_env)).stdout)
    assert [i["app"]["name"] for i in mine] == ["diary-bot"]
    assert mine[0]["last_used_at"] is not None
    out = json.loads(
        _ok(run(["app", "uninstall", inst["installation_id"], *who, "--delete", "--json"], env=db_env)).stdout
    )
    assert out["mode"] == "delete" and out["run_id"]
    with committed() as s:
        try:
            resolve_caller(s, inst["credential"], settings.secret_key)
            raise AssertionError("the credential survived the uninstall")
        except Unauthenticated:
            pass
