"""User groups from the command line (acting as the system principal on the named tenant, audited)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, table

TenantOpt = Annotated[str, typer.Option(help="Tenant slug or id.")]
GroupArg = Annotated[str, typer.Argument(help="Group name or id.")]
UserArg = Annotated[str, typer.Argument(help="User email or id (a user of the group's tenant).")]


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Manage user groups (collaborators with subject_type 'group').", no_args_is_help=True)
    group.command("create")(group_create)
    group.command("list")(group_list)
    group.command("rename")(group_rename)
    group.command("delete")(group_delete)
    group.command("members")(group_members)
    group.command("add-member")(group_add_member)
    group.command("remove-member")(group_remove_member)
    app.add_typer(group, name="group")


def _system():  # noqa: ANN202
    from openkb.permissions import Principal

    return Principal.system()


def _group_out(g, members: int) -> dict:  # noqa: ANN001
    return {
        "id": str(g.id),
        "name": g.name,
        "tenant_id": str(g.tenant_id),
        "members": members,
        "created_at": g.created_at.isoformat(),
    }


def _user_ref(ref: str) -> dict:
    import uuid

    try:
        return {"user_id": uuid.UUID(ref)}
    except ValueError:
        return {"email": ref}


def group_create(
    name: Annotated[str, typer.Argument(help="Group name (unique in the tenant).")],
    tenant: TenantOpt = "default",
    json_out: JsonOpt = False,
) -> None:
    """Create a group."""
    from openkb.accounts.users import get_tenant
    from openkb.permissions import groups

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        out = _group_out(groups.create_group(s, _system(), name=name, tenant_id=t.id), 0)
    emit_json(out) if json_out else console.print(f"created group {out['name']} ({out['id']})")


def group_list(tenant: TenantOpt = "default", json_out: JsonOpt = False) -> None:
    """List a tenant's groups with their member counts."""
    from openkb.accounts.users import get_tenant
    from openkb.permissions import groups

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        rows = groups.list_groups(s, _system(), tenant_id=t.id)
        counts = groups.member_counts(s, [g.id for g in rows])
        out = [_group_out(g, counts.get(g.id, 0)) for g in rows]
    if json_out:
        emit_json(out)
    else:
        table("groups", ["name", "members", "id"], [(r["name"], r["members"], r["id"]) for r in out])


def group_rename(
    group: GroupArg,
    new_name: Annotated[str, typer.Argument(help="The new name.")],
    tenant: TenantOpt = "default",
    json_out: JsonOpt = False,
) -> None:
    """Rename a group."""
    from openkb.accounts.users import get_tenant
    from openkb.permissions import groups

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        g = groups.find_group(s, _system(), group, tenant_id=t.id)
        g = groups.rename_group(s, _system(), g.id, name=new_name)
        out = _group_out(g, groups.member_counts(s, [g.id]).get(g.id, 0))
    emit_json(out) if json_out else console.print(f"renamed group to {out['name']} ({out['id']})")


def group_delete(group: GroupArg, tenant: TenantOpt = "default", json_out: JsonOpt = False) -> None:
    """Delete a group; every collaborator grant it holds goes with it (audited)."""
    from openkb.accounts.users import get_tenant
    from openkb.permissions import groups

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        g = groups.find_group(s, _system(), group, tenant_id=t.id)
        out = {"id": str(g.id), "name": g.name, "deleted": True}
        groups.delete_group(s, _system(), g.id)
    emit_json(out) if json_out else console.print(f"deleted group {out['name']} ({out['id']})")


def group_members(group: GroupArg, tenant: TenantOpt = "default", json_out: JsonOpt = False) -> None:
    """List a group's members."""
    from openkb.accounts.users import get_tenant
    from openkb.permissions import groups

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        g = groups.find_group(s, _system(), group, tenant_id=t.id)
        out = [
            {
                "user_id": str(u.id),
                "email": u.email,
                "display_name": u.display_name,
                "status": u.status,
                "added_at": m.created_at.isoformat(),
            }
            for m, u in groups.list_members(s, _system(), g.id)
        ]
    if json_out:
        emit_json(out)
    else:
        table(
            f"members of {g.name}",
            ["email", "status", "user id"],
            [(r["email"], r["status"], r["user_id"]) for r in out],
        )


def group_add_member(group: GroupArg, user: UserArg, tenant: TenantOpt = "default", json_out: JsonOpt = False) -> None:
    """Add a user of the tenant to a group (no-op when already a member)."""
    from openkb.accounts.users import get_tenant
    from openkb.permissions import groups

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        g = groups.find_group(s, _system(), group, tenant_id=t.id)
        _row, u, created = groups.add_member(s, _system(), g.id, **_user_ref(user))
        out = {"group_id": str(g.id), "group": g.name, "user_id": str(u.id), "email": u.email, "added": created}
    if json_out:
        emit_json(out)
    else:
        console.print(f"{out['email']} {'added to' if created else 'is already in'} {out['group']}")


def group_remove_member(
    group: GroupArg, user: UserArg, tenant: TenantOpt = "default", json_out: JsonOpt = False
) -> None:
    """Remove a user from a group."""
    from openkb.accounts.users import get_tenant
    from openkb.permissions import groups

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        g = groups.find_group(s, _system(), group, tenant_id=t.id)
        groups.remove_member(s, _system(), g.id, **_user_ref(user))
        out = {"group_id": str(g.id), "group": g.name, "user": user, "removed": True}
    emit_json(out) if json_out else console.print(f"{user} removed from {out['group']}")
