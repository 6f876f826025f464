"""``openkb group ...`` as an operator runs it: subprocesses against the test database."""

from __future__ import annotations

import json
import uuid

from sqlmodel import select

from openkb.models import AuditLog, Collaborator
from tests.factories import grant, make_kb, make_workspace
from tests.test_cli import assert_one_line_error, db_env, run  # noqa: F401 - db_env is a fixture


def _ok(p):
    assert p.returncode == 0, (p.stdout, p.stderr)
    return p


def test_group_commands(db_env, committed):
    slug = f"grp-{uuid.uuid4().hex[:6]}"
    other = f"grp-other-{uuid.uuid4().hex[:6]}"
    _ok(run(["tenant", "create", slug], env=db_env))
    _ok(run(["tenant", "create", other], env=db_env))
    admin = json.loads(
        _ok(
            run(
                [
                    "user",
                    "create",
                    f"adm-{slug}@example.com",
                    "--tenant",
                    slug,
                    "--role",
                    "tenant_admin",
                    "--no-password",
                    "--json",
                ],
                env=db_env,
            )
        ).stdout
    )
    alice = f"alice-{slug}@example.com"
    _ok(run(["user", "create", alice, "--tenant", slug, "--no-password"], env=db_env))
    stranger = f"stranger-{slug}@example.com"
    _ok(run(["user", "create", stranger, "--tenant", other, "--no-password"], env=db_env))

    g = json.loads(_ok(run(["group", "create", "Writers", "--tenant", slug, "--json"], env=db_env)).stdout)
    assert g["name"] == "Writers" and g["members"] == 0
    assert_one_line_error(run(["group", "create", "Writers", "--tenant", slug], env=db_env), 7, "already exists")
    assert_one_line_error(run(["group", "create", "  ", "--tenant", slug], env=db_env), 2, "group name")
    assert_one_line_error(run(["group", "list", "--tenant", "no-such-tenant"], env=db_env), 4, "no tenant")

    added = json.loads(
        _ok(run(["group", "add-member", "Writers", alice, "--tenant", slug, "--json"], env=db_env)).stdout
    )
    assert added["added"] is True
    again = json.loads(_ok(run(["group", "add-member", g["id"], alice, "--tenant", slug, "--json"], env=db_env)).stdout)
    assert again["added"] is False
    # never across tenants: a user of another tenant, or this group named under another tenant
    assert_one_line_error(
        run(["group", "add-member", "Writers", stranger, "--tenant", slug], env=db_env), 4, "user not found"
    )
    assert_one_line_error(run(["group", "members", g["id"], "--tenant", other], env=db_env), 4, "no group")
    members = json.loads(_ok(run(["group", "members", "Writers", "--tenant", slug, "--json"], env=db_env)).stdout)
    assert [m["email"] for m in members] == [alice]
    listed = json.loads(_ok(run(["group", "list", "--tenant", slug, "--json"], env=db_env)).stdout)
    assert [(x["name"], x["members"]) for x in listed] == [("Writers", 1)]
    assert "Writers" in _ok(run(["group", "list", "--tenant", slug], env=db_env)).stdout

    _ok(run(["group", "rename", "Writers", "Authors", "--tenant", slug], env=db_env))
    _ok(run(["group", "remove-member", "Authors", alice, "--tenant", slug], env=db_env))
    assert_one_line_error(
        run(["group", "remove-member", "Authors", alice, "--tenant", slug], env=db_env), 4, "member not found"
    )

    with committed() as s:  # a grant held by the group goes when the group does
        from openkb.accounts.users import get_tenant
        from openkb.models import Group, User

        t = get_tenant(s, slug)
        owner = s.get(User, uuid.UUID(admin["id"]))
        kb = make_kb(s, make_workspace(s, t, owner), owner)
        grant(s, "knowledge_base", kb.id, s.get(Group, uuid.UUID(g["id"])), "viewer", tenant_id=t.id)
        s.commit()
    out = json.loads(_ok(run(["group", "delete", "Authors", "--tenant", slug, "--json"], env=db_env)).stdout)
    assert out == {"id": g["id"], "name": "Authors", "deleted": True}
    assert json.loads(_ok(run(["group", "list", "--tenant", slug, "--json"], env=db_env)).stdout) == []
    assert_one_line_error(run(["group", "delete", "Authors", "--tenant", slug], env=db_env), 4, "no group")
    with committed() as s:
        assert s.exec(select(Collaborator).where(Collaborator.subject_id == uuid.UUID(g["id"]))).all() == []
        actions = [
            a.action
            for a in s.exec(
                select(AuditLog).where(AuditLog.object_id == uuid.UUID(g["id"])).order_by(AuditLog.created_at)
            ).all()
        ]
        assert actions == ["group.create", "group_member.add", "group.rename", "group_member.remove", "group.delete"]
        removed = s.exec(
            select(AuditLog).where(AuditLog.object_id == kb.id, AuditLog.action == "collaborator.remove")
        ).one()
        assert removed.actor_type == "system" and removed.meta["reason"] == "group.delete"


def test_group_create_needs_a_tenant_admin_to_own_it(db_env):
    slug = f"grp-empty-{uuid.uuid4().hex[:6]}"
    _ok(run(["tenant", "create", slug], env=db_env))
    assert_one_line_error(run(["group", "create", "G", "--tenant", slug], env=db_env), 2, "no administrator")
