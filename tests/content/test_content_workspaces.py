"""Workspace services on top of ``access_workspace``: who may manage members, in what order the
checks run, and that a revert-only removal keeps its rule."""

from __future__ import annotations

import pytest

from openkb.content import workspaces
from openkb.errors import NotFound, PermissionDenied


def test_a_non_manager_cannot_probe_which_emails_have_accounts(world):
    """Regression: the member lookup by email ran before the manage check, so a plain member got
    404 "user not found" for an unknown address and 403 for a known one."""
    p = world.p
    for email in (p.outsider.email, "nobody-here@example.invalid"):
        with pytest.raises(PermissionDenied):
            workspaces.add_member(world.db, world.actor(p.member), p.workspace.id, role="member", email=email)
    with pytest.raises(NotFound):  # not a member: the workspace itself is unseen
        workspaces.add_member(
            world.db, world.actor(p.outsider), p.workspace.id, role="member", email="nobody-here@example.invalid"
        )
    row, created = workspaces.add_member(
        world.db, world.actor(p.admin), p.workspace.id, role="member", email=p.outsider.email
    )
    assert created and row.user_id == p.outsider.id


def test_member_changes_are_decided_by_the_member_service(world):
    p = world.p
    with pytest.raises(PermissionDenied):
        workspaces.update_member(world.db, world.actor(p.member), p.workspace.id, p.guest.id, role="member")
    with pytest.raises(PermissionDenied):
        workspaces.remove_member(world.db, world.actor(p.guest), p.workspace.id, p.member.id)
    with pytest.raises(NotFound):
        workspaces.remove_member(world.db, world.actor(p.outsider), p.workspace.id, p.member.id)
    assert (
        workspaces.update_member(world.db, world.actor(p.admin), p.workspace.id, p.guest.id, role="member").role
        == "member"
    )


def test_update_workspace_needs_manage_and_a_write_scope(world):
    p = world.p
    with pytest.raises(PermissionDenied):
        workspaces.update_workspace(world.db, world.actor(p.member), p.workspace.id, {"name": "Mine"})
    with pytest.raises(PermissionDenied):
        workspaces.update_workspace(
            world.db, world.actor(p.admin, scopes={"kb:read"}), p.workspace.id, {"name": "Mine"}
        )
    assert workspaces.update_workspace(world.db, world.actor(p.admin), p.workspace.id, {"name": "Ours"}).name == "Ours"
