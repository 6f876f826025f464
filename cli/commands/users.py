"""Tenants and users from the command line.

Each command calls one service as the system principal (``Principal.system()``: the operator at
the shell administers every tenant); the service authorizes and writes the audit row, marked
``via: cli`` by the unit of work, exactly as the admin API's rows are written.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, table


def register(app: typer.Typer) -> None:
    tenant = typer.Typer(help="Manage tenants.", no_args_is_help=True)
    tenant.command("create")(tenant_create)
    tenant.command("list")(tenant_list)
    tenant.command("time-zone")(tenant_time_zone)
    app.add_typer(tenant, name="tenant")
    user = typer.Typer(help="Manage users.", no_args_is_help=True)
    user.command("create")(user_create)
    user.command("list")(user_list)
    user.command("activate")(user_activate)
    user.command("suspend")(user_suspend)
    user.command("delete")(user_delete)
    app.add_typer(user, name="user")


def tenant_create(
    slug: Annotated[str, typer.Argument(help="URL-safe tenant id, e.g. acme.")],
    name: Annotated[str | None, typer.Option(help="Display name (defaults to the slug).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a tenant."""
    from openkb.accounts.users import add_tenant
    from openkb.permissions.principal import Principal

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = add_tenant(s, Principal.system(), name=name or slug, slug=slug)
        out = {"id": str(t.id), "slug": t.slug, "name": t.name}
    emit_json(out) if json_out else console.print(f"created tenant {out['slug']} ({out['id']})")


def tenant_list(json_out: JsonOpt = False) -> None:
    """List tenants with their member counts."""
    from openkb.accounts.users import list_tenants

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        rows = [
            {"id": str(t.id), "slug": t.slug, "name": t.name, "members": n, "created_at": t.created_at.isoformat()}
            for t, n in list_tenants(s)
        ]
    if json_out:
        emit_json(rows)
    else:
        table(
            "tenants", ["slug", "name", "members", "id"], [(r["slug"], r["name"], r["members"], r["id"]) for r in rows]
        )


def tenant_time_zone(
    tenant: Annotated[str, typer.Argument(help="Tenant slug or id.")],
    zone: Annotated[
        str | None, typer.Argument(help="IANA time zone, e.g. Asia/Shanghai; omit to show, '' or --clear for UTC.")
    ] = None,
    clear: Annotated[
        bool, typer.Option("--clear", help="Remove the default (members without a zone use UTC).")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show or set the tenant's default time zone: the apps' quota day of members who set none."""
    from openkb.accounts.tenant_settings import read_settings, set_time_zone
    from openkb.accounts.users import get_tenant
    from openkb.permissions.principal import Principal

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        tid = get_tenant(s, tenant).id
        if zone is None and not clear:
            out = read_settings(s, Principal.system(), tid)
        else:
            out = set_time_zone(s, Principal.system(), tid, None if clear else zone)
        out = {**out, "tenant_id": str(out["tenant_id"])}
    if json_out:
        emit_json(out)
    else:
        console.print(f"tenant {out['tenant_slug']}: default time zone {out['time_zone'] or 'UTC (none set)'}")


def user_create(
    email: Annotated[str, typer.Argument(help="Email address (the login).")],
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")] = "default",
    role: Annotated[str, typer.Option(help="Tenant role: member, tenant_admin or system_admin.")] = "member",
    display_name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    password_stdin: Annotated[bool, typer.Option("--password-stdin", help="Read the password from stdin.")] = False,
    no_password: Annotated[bool, typer.Option("--no-password", help="Create without a password (must reset).")] = False,
    status: Annotated[
        str, typer.Option(help="Initial status: active, pending_email_verification, pending_activation or suspended.")
    ] = "active",
    json_out: JsonOpt = False,
) -> None:
    """Create a user (active and verified unless --status says otherwise)."""
    from cli.output import read_password
    from openkb.accounts.users import add_user, get_tenant
    from openkb.permissions.principal import Principal

    password = (
        None if no_password else read_password(password_stdin, hint="--password-stdin (and pipe it) or --no-password")
    )
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        u = add_user(
            s,
            Principal.system(),
            tenant=t,
            email=email,
            password=password,
            display_name=display_name,
            role=role,
            status=status,
        )
        out = {"id": str(u.id), "email": u.email, "tenant": t.slug, "role": role, "status": u.status}
    emit_json(out) if json_out else console.print(
        f"created {out['role']} {out['email']} in {out['tenant']} ({out['id']})"
    )


def user_list(
    status: Annotated[str | None, typer.Option(help="Only users with this status.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant (slug or id).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List users."""
    from openkb.accounts.users import get_tenant, list_users

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant) if tenant else None
        rows = [
            {
                "id": str(r.user.id),
                "email": r.user.email,
                "display_name": r.user.display_name,
                "status": r.user.status,
                "tenant": r.tenant_slug,
                "role": r.role,
                "created_at": r.user.created_at.isoformat(),
            }
            for r in list_users(s, status=status, tenant=t)
        ]
    if json_out:
        emit_json(rows)
    else:
        table(
            "users",
            ["email", "status", "tenant", "role", "id"],
            [(r["email"], r["status"], r["tenant"], r["role"], r["id"]) for r in rows],
        )


def _set_status(email: str, status: str, json_out: bool) -> None:
    from openkb.accounts import admin
    from openkb.accounts.users import find_user
    from openkb.permissions.principal import Principal

    change = admin.activate if status == "active" else admin.suspend
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        u = find_user(s, email)
        before, was_admin = u.status, admin.is_system_admin(s, u.id)
        u = change(s, Principal.system(), u.id)
        became = not was_admin and admin.is_system_admin(s, u.id)
        out = {"id": str(u.id), "email": u.email, "before": before, "status": u.status, "became_system_admin": became}
    if json_out:
        emit_json(out)
        return
    # the first sign-up activated here completes registration (docs/accounts.md#first-administrator)
    then = " (the instance's first user: now system_admin)" if became else ""
    console.print(f"{out['email']}: {before} -> {out['status']}{then}")


def user_activate(email: Annotated[str, typer.Argument(help="Email or id.")], json_out: JsonOpt = False) -> None:
    """Activate a user (pending or suspended -> active)."""
    _set_status(email, "active", json_out)


def user_suspend(email: Annotated[str, typer.Argument(help="Email or id.")], json_out: JsonOpt = False) -> None:
    """Suspend a user: their sessions and tokens stop working on the next request."""
    _set_status(email, "suspended", json_out)


def user_delete(
    email: Annotated[str, typer.Argument(help="Email or id.")],
    successor: Annotated[
        str | None, typer.Option(help="Email or id of the active user who takes over what they own.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete a user: anonymized, sessions, tokens, OAuth grants and memberships end, content stays
    (docs/accounts.md#deleting-a-user). Refused while they own something and no --successor is named."""
    from openkb.accounts.deletion import delete_user
    from openkb.accounts.users import find_user
    from openkb.permissions.principal import Principal

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        u = find_user(s, email)
        heir = find_user(s, successor).id if successor else None
        before = u.email
        done = delete_user(s, Principal.system(), u.id, successor_id=heir)
        out = {"id": str(u.id), "email": before, "status": done.user.status, **done.counts}
    if json_out:
        emit_json(out)
    else:
        console.print(f"{before}: deleted", highlight=False)
