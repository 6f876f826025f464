"""``openkb token create|list|revoke --user``: the operator mints and revokes a user's PAT."""

from __future__ import annotations

import json

from sqlmodel import Session

from openkb.accounts.tokens import resolve_pat
from tests.api.helpers import make_login_user
from tests.test_cli import assert_one_line_error, run


def test_operator_creates_lists_and_revokes_a_users_token(database_url, test_home, engine, committed):
    env = {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}
    user = make_login_user(committed)
    made = run(["token", "create", "--user", user.email, "--name", "Cursor", "--json"], env=env)
    assert made.returncode == 0, made.stderr
    out = json.loads(made.stdout)
    assert out["token"].startswith("kbpat_") and out["scopes"] == ["doc:read", "kb:read", "kb:search"]
    with Session(engine) as s:
        live = resolve_pat(s, out["token"])
        assert live is not None and live.user.id == user.user_id and live.row.scopes == out["scopes"]

    listed = json.loads(run(["token", "list", "--user", str(user.user_id), "--json"], env=env).stdout)
    assert [(t["id"], t["status"]) for t in listed] == [(out["id"], "active")] and "token" not in listed[0]

    gone = run(["token", "revoke", out["id"], "--user", user.email, "--json"], env=env)
    assert gone.returncode == 0 and json.loads(gone.stdout)["status"] == "revoked"
    with Session(engine) as s:
        assert resolve_pat(s, out["token"]) is None  # the next request is refused

    other = make_login_user(committed)
    assert_one_line_error(run(["token", "revoke", out["id"], "--user", other.email], env=env), 4, "no such token")
    assert_one_line_error(
        run(["token", "create", "--user", user.email, "--name", "x", "--scope", "everything"], env=env),
        2,
        "unknown scope",
    )
