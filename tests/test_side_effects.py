"""Services own their side effects: audit rows, mail and refusals that must stay on record.

* An operation is audited exactly once, by its service, whether the CLI (a real ``openkb``
  subprocess) or REST (the live server) runs it.
* A targeted invitation is mailed after its transaction commits, never for a rolled-back one.
* A refusal's record (failed login, wrong share-link password) survives the request's rollback
  without the route committing mid-request.
* Source inspection: no module of ``cli/`` or ``server/`` builds an ``AuditLog``, calls the
  audit writer or the mail sender, and no router commits.
"""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlmodel import select

from openkb.models import AuditLog
from tests.api.helpers import PASSWORD, login, make_login_user, outbox_messages
from tests.factories import make_kb, make_personas, make_tenant
from tests.test_cli import run

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def db_env(database_url, test_home):
    return {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}


@pytest.fixture()
def w(live_server, committed):
    from tests.content.http_world import HttpWorld

    world = HttpWorld(live_server, committed)
    yield world
    world.close()


def _ok(p) -> str:
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def _rows(committed, object_id, action: str | None = None) -> list[AuditLog]:
    with committed() as s:
        q = select(AuditLog).where(AuditLog.object_id == object_id)
        if action:
            q = q.where(AuditLog.action == action)
        return list(s.exec(q.order_by(AuditLog.created_at)).all())


# --- source inspection -----------------------------------------------------------------------------

# Names whose call writes an audit row or sends mail: only services (openkb/) may call them.
_SIDE_EFFECT_CALLS = {"AuditLog", "record_audit", "mail_after_commit", "send_verification", "send_password_reset"}


def _py_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def test_adapters_write_no_audit_rows_and_send_no_mail():
    offenders = []
    for path in _py_files("cli", "server"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = _called_name(node)
                if name in _SIDE_EFFECT_CALLS:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {name}")
                f = node.func
                if (
                    isinstance(f, ast.Attribute)
                    and f.attr == "send"
                    and isinstance(f.value, ast.Attribute)
                    and f.value.attr == "mailer"
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} calls mailer.send")
            if isinstance(node, ast.ImportFrom) and node.module in ("openkb.audit", "openkb.accounts.email_tokens"):
                for alias in node.names:
                    if alias.name in _SIDE_EFFECT_CALLS:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}")
    assert offenders == []


def test_no_router_commits():
    """The request's unit of work commits once, in ``server.deps.get_session``; a route that
    commits mid-request would make half of a failed request stick."""
    offenders = []
    for path in _py_files("server/routers"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "commit":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_inspection_sees_what_it_looks_for():
    """Guard against a vacuous pass: the same walk flags a snippet that does it all."""
    snippet = (
        "from openkb.audit import record_audit\n"
        "def route(session, ctx):\n"
        "    session.add(AuditLog(action='x'))\n"
        "    ctx.mailer.send('a@b.c', 's', 'b')\n"
        "    session.commit()\n"
    )
    tree = ast.parse(snippet)
    calls = {_called_name(n) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert {"AuditLog", "send", "commit"} <= calls
    assert len(_py_files("cli", "server")) > 10 and len(_py_files("server/routers")) > 5


# --- users: CLI and REST audit once -----------------------------------------------------------


def test_tenant_and_user_creation_from_the_cli_are_audited_once(db_env, committed):
    slug = f"fx-{uuid.uuid4().hex[:6]}"
    t = json.loads(_ok(run(["tenant", "create", slug, "--json"], env=db_env)))
    email = f"made-{slug}@example.com"
    u = json.loads(_ok(run(["user", "create", email, "--tenant", slug, "--no-password", "--json"], env=db_env)))
    (tenant_row,) = _rows(committed, uuid.UUID(t["id"]), "tenant.create")
    (user_row,) = _rows(committed, uuid.UUID(u["id"]))
    assert user_row.action == "user.create" and user_row.tenant_id == uuid.UUID(t["id"])
    for row in (tenant_row, user_row):
        assert row.actor_type == "system" and row.actor_user_id is None and row.meta["via"] == "cli"
    assert user_row.meta["email"] == email and user_row.meta["role"] == "member"


def test_user_status_changes_are_audited_once_from_cli_and_rest(db_env, http, committed):
    with committed() as s:
        t = make_tenant(s)
        s.commit()
    admin = make_login_user(committed, t, role="tenant_admin")
    by_rest = make_login_user(committed, t, status="pending_activation")
    by_cli = make_login_user(committed, t, status="pending_activation")

    with login(http, admin.email) as c:
        assert c.post(f"/api/admin/users/{by_rest.user_id}/activate").status_code == 200
        assert c.post(f"/api/admin/users/{by_rest.user_id}/suspend").status_code == 200
    out = json.loads(_ok(run(["user", "activate", by_cli.email, "--json"], env=db_env)))
    assert (out["before"], out["status"]) == ("pending_activation", "active")
    _ok(run(["user", "suspend", by_cli.email, "--json"], env=db_env))
    again = json.loads(_ok(run(["user", "suspend", by_cli.email, "--json"], env=db_env)))
    assert again["before"] == again["status"] == "suspended"  # a no-op is not audited

    rest_rows = _rows(committed, by_rest.user_id)
    cli_rows = _rows(committed, by_cli.user_id)
    # the same service writes the same actions, once each, whoever calls it
    assert [r.action for r in rest_rows] == [r.action for r in cli_rows] == ["user.activated", "user.suspended"]
    assert all(r.actor_user_id == admin.user_id and r.ip == "127.0.0.1" and "via" not in r.meta for r in rest_rows)
    assert all(r.actor_type == "system" and r.meta["via"] == "cli" for r in cli_rows)
    assert all(r.tenant_id == t.id for r in rest_rows + cli_rows)
    assert cli_rows[1].meta["before"] == {"status": "active"} and cli_rows[1].meta["after"] == {"status": "suspended"}


# --- Dify keys: CLI and REST audit once ------------------------------------------------------------


@pytest.fixture()
def dify_world(committed):
    with committed() as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, title="A")
        s.commit()
    return p, kb


def test_dify_key_changes_are_audited_once_from_cli_and_rest(db_env, http, committed, dify_world):
    p, kb = dify_world
    with committed() as s:
        from openkb.security import hash_password

        admin = s.get(type(p.tenant_admin), p.tenant_admin.id)
        admin.password_hash = hash_password(PASSWORD)
        s.add(admin)
        s.commit()
    cli_key = json.loads(
        _ok(
            run(
                [
                    "dify",
                    "key",
                    "create",
                    "--name",
                    "by-cli",
                    "--kb",
                    str(kb.id),
                    "--tenant",
                    str(p.tenant.id),
                    "--json",
                ],
                env=db_env,
            )
        )
    )
    _ok(run(["dify", "key", "disable", cli_key["id"], "--tenant", str(p.tenant.id), "--json"], env=db_env))
    with login(http, p.tenant_admin.email) as c:
        r = c.post("/api/admin/dify/keys", json={"name": "by-rest", "knowledge_base_ids": [str(kb.id)]})
        assert r.status_code == 201, r.text
        rest_key = r.json()
        assert c.post(f"/api/admin/dify/keys/{rest_key['id']}/disable").status_code == 200
        assert c.post(f"/api/admin/dify/keys/{rest_key['id']}/disable").status_code == 200  # no-op

    cli_rows = _rows(committed, uuid.UUID(cli_key["id"]))
    rest_rows = _rows(committed, uuid.UUID(rest_key["id"]))
    assert [r.action for r in cli_rows] == [r.action for r in rest_rows] == ["dify.key.create", "dify.key.disable"]
    assert all(r.actor_type == "system" and r.meta["via"] == "cli" for r in cli_rows)
    assert all(r.actor_user_id == p.tenant_admin.id and r.ip == "127.0.0.1" for r in rest_rows)
    for rows, key in ((cli_rows, cli_key), (rest_rows, rest_key)):
        assert rows[0].meta["knowledge_base_ids"] == [str(kb.id)]
        assert key["key"] not in json.dumps(rows[0].meta)  # never the secret


# --- invitations: mail after commit only --------------------------------------------------------


def test_a_rolled_back_invitation_mails_nothing_and_a_committed_one_mails_once(engine, committed, tmp_path, settings):
    """The service queues the mail on the transaction: rollback drops it, commit sends it."""
    from openkb.db import session_scope
    from openkb.mail import Mailer
    from openkb.permissions import Principal
    from openkb.permissions.invitations import create_invitation

    with committed() as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, title="Handbook")
        s.commit()
    mail_settings = settings.model_copy(update={"openkb_home": tmp_path})
    ctx = SimpleNamespace(settings=mail_settings, mailer=Mailer(mail_settings))
    owner = Principal.user(p.owner, p.tenant.id)
    lost, kept = f"lost-{uuid.uuid4().hex[:6]}@example.com", f"kept-{uuid.uuid4().hex[:6]}@example.com"

    with pytest.raises(RuntimeError), session_scope(engine) as s:
        create_invitation(s, owner, ("knowledge_base", kb.id), role="viewer", email=lost, ctx=ctx)
        assert outbox_messages(tmp_path, lost) == []  # not before the commit either
        raise RuntimeError("the request fails after the service call")
    assert outbox_messages(tmp_path, lost) == []

    with session_scope(engine) as s:
        created = create_invitation(s, owner, ("knowledge_base", kb.id), role="viewer", email=kept, ctx=ctx)
        assert outbox_messages(tmp_path, kept) == []
    (msg,) = outbox_messages(tmp_path, kept)
    assert "Handbook" in msg["Subject"] and f"/invitations/{created.token}" in msg.get_content()
    with committed() as s:
        invites = s.exec(
            select(AuditLog).where(AuditLog.object_id == kb.id, AuditLog.action == "invitation.create")
        ).all()
    assert [r.meta["email"] for r in invites] == [kept]  # the rolled-back one left no row either


def test_invitation_by_email_over_rest_mails_once(w, test_home):
    email = f"invitee-{uuid.uuid4().hex[:6]}@example.com"
    r = w.c["owner"].post(
        f"/api/objects/knowledge_base/{w.kb['id']}/invitations", json={"role": "viewer", "email": email}
    )
    assert r.status_code == 201, r.text
    (msg,) = outbox_messages(test_home, email)
    assert r.json()["url"] in msg.get_content()
    bad = w.c["owner"].post(
        f"/api/objects/knowledge_base/{w.kb['id']}/invitations", json={"role": "owner", "email": "nobody-" + email}
    )
    assert bad.status_code == 422
    assert outbox_messages(test_home, "nobody-" + email) == []


# --- refusals that stay on record --------------------------------------------------------------------


def test_a_failed_login_is_counted_and_audited_although_the_request_fails(http, committed):
    acct = make_login_user(committed)
    r = http.post("/api/auth/login", json={"email": acct.email, "password": "not the password"})
    assert r.status_code == 401 and r.json()["error"] == "INVALID_CREDENTIALS"
    (row,) = _rows(committed, acct.user_id, "auth.login_failed")
    assert row.meta["email"] == acct.email and row.ip == "127.0.0.1" and row.actor_user_id is None
    with committed() as s:
        from sqlalchemy import text

        count = s.execute(
            text("SELECT count FROM rate_limit_buckets WHERE key = :k"), {"k": f"login:acct:{acct.email}"}
        ).scalar_one()
    assert count == 1


def test_a_wrong_share_link_password_stays_recorded_without_a_route_commit(w, committed):
    kb = w.new_kb(visibility="private")
    r = w.c["owner"].post(f"/api/objects/knowledge_base/{kb['id']}/share-links", json={"password": "open sesame"})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    bad = w.anon.post(f"/api/share/{token}/verify-password", json={"password": "wrong"})
    assert bad.status_code == 403 and bad.json()["error"] == "SHARE_PASSWORD_INCORRECT"
    assert [a.action for a in _rows(committed, uuid.UUID(kb["id"]), "share_link.password_failed")] == [
        "share_link.password_failed"
    ]
    good = w.anon.post(f"/api/share/{token}/verify-password", json={"password": "open sesame"})
    assert good.status_code == 200, good.text
