"""``openkb user delete`` as an operator runs it: refused while the user owns a workspace, done
with ``--successor``; one-line errors."""

from __future__ import annotations

import json
import uuid

from sqlmodel import select

from openkb.bootstrap import default_tenant
from openkb.models import User, WorkspaceMember
from tests.api.helpers import make_login_user
from tests.factories import make_workspace
from tests.test_cli import assert_one_line_error, db_env, run  # noqa: F401 - db_env is a fixture


def test_user_delete(db_env, committed):  # noqa: F811 - the fixture imported above
    leaver, heir = make_login_user(committed), make_login_user(committed)
    with committed() as s:
        ws = make_workspace(s, default_tenant(s), s.get(User, leaver.user_id))
        s.commit()
        ws_id = ws.id
    refused = run(["user", "delete", leaver.email], env=db_env)
    assert_one_line_error(refused, 7, "successor")
    p = run(["user", "delete", leaver.email, "--successor", heir.email, "--json"], env=db_env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "deleted" and out["email"] == leaver.email and out["workspaces_handed_over"] == 1
    with committed() as s:
        assert s.get(User, leaver.user_id).email.startswith("deleted-")
        owner = s.exec(
            select(WorkspaceMember.user_id).where(
                WorkspaceMember.workspace_id == ws_id, WorkspaceMember.role == "owner"
            )
        ).one()
    assert owner == heir.user_id
    assert_one_line_error(
        run(["user", "delete", f"nobody-{uuid.uuid4().hex[:6]}@example.com"], env=db_env), 4, "no user"
    )
