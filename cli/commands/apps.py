"""Apps on a person's knowledge from the command line: ``openkb app register|list|install|grants|uninstall|oauth-client``.

For operators (docs/apps.md#cli): each command acts for the user named with ``--user`` and calls
one service of ``openkb.apps``; what the app may then reach is still what that user switches on.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, table

UserOpt = Annotated[str, typer.Option("--user", help="The user the app is for: email or user id.")]
TenantOpt = Annotated[str | None, typer.Option(help="Tenant slug or id (needed when the user is in several).")]


def register(app: typer.Typer) -> None:
    cmd = typer.Typer(help="Apps that read and write a person's knowledge (docs/apps.md).", no_args_is_help=True)
    cmd.command("register")(app_register)
    cmd.command("list")(app_list)
    cmd.command("install")(app_install)
    cmd.command("grants")(app_grants)
    cmd.command("uninstall")(app_uninstall)
    cmd.command("oauth-client")(app_oauth_client)
    app.add_typer(cmd, name="app")


def as_user(s: Any, user: str, tenant: str | None) -> Any:
    """The operator acting for ``user`` (``--user``): the commands of ``openkb app``, ``facts``
    and ``entities`` run as that person, authorized by the permission service like the API."""
    from openkb.apps.registry import operator_act_as
    from openkb.permissions.principal import Principal

    return operator_act_as(s, Principal.system(), user, tenant)


def app_register(
    user: UserOpt,
    name: Annotated[str | None, typer.Option(help="The app's name (unique in the tenant).")] = None,
    permission: Annotated[
        list[str] | None,
        typer.Option("--permission", help="Repeat for each permission string, e.g. collections.read:diary."),
    ] = None,
    description: Annotated[str, typer.Option(help="What the app does.")] = "",
    reason: Annotated[str | None, typer.Option(help="Why it asks, shown at install.")] = None,
    host: Annotated[list[str] | None, typer.Option("--host", help="Repeat for each allowed network host.")] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(help="A manifest JSON file ({name, description, knowledge: {permissions, predicates, reason}})."),
    ] = None,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Register an app; every permission string is checked (refusals are listed)."""
    from openkb.apps.registry import app_out, parse_manifest, register_app

    m: dict[str, Any] = parse_manifest(manifest.read_bytes()) if manifest else {}
    k = m.get("knowledge") or {}
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        row = register_app(
            s, as_user(s, user, tenant), name=name or m.get("name") or "",
            description=description or m.get("description", ""),
            permissions=list(permission or k.get("permissions") or []), predicates=k.get("predicates"),
            reason=reason or k.get("reason"), hosts=list(host or (m.get("network") or {}).get("hosts") or []),
        )  # fmt: skip
        out = json.loads(json.dumps(app_out(row), default=str))
    if json_out:
        emit_json(out)
    else:
        console.print(f"registered app {out['name']} ({out['id']}) asking for {len(out['permissions'])} permissions")


def app_list(
    user: Annotated[
        str | None, typer.Option("--user", help="List this user's installations instead of the apps.")
    ] = None,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The apps of a tenant, or a user's installed apps with their switches."""
    from openkb.apps.registry import app_out, list_installations

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        if user is not None:
            out = json.loads(json.dumps(list_installations(s, as_user(s, user, tenant)), default=str))
        else:
            from openkb.apps.registry import operator_list_apps
            from openkb.permissions.principal import Principal

            rows = operator_list_apps(s, Principal.system(), tenant)
            out = json.loads(json.dumps([app_out(a) for a in rows], default=str))
    if json_out:
        emit_json(out)
    elif user is not None:
        table(
            "installed apps",
            ["installation", "app", "last used", "on", "off"],
            [
                (
                    i["id"],
                    i["app"]["name"],
                    i["last_used_at"] or "never",
                    " ".join(g["permission"] for g in i["grants"] if g["enabled"]) or "-",
                    " ".join(g["permission"] for g in i["grants"] if not g["enabled"]) or "-",
                )
                for i in out
            ],
        )
    else:
        table(
            "apps",
            ["id", "name", "permissions"],
            [(a["id"], a["name"], " ".join(p["permission"] for p in a["permissions"])) for a in out],
        )


def app_install(
    app_name: Annotated[str, typer.Argument(help="The app's name or id.")],
    user: UserOpt,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Install an app for a user (every permission off); the kbapp_ credential is printed once."""
    from openkb.apps.registry import install_app

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        done = install_app(s, as_user(s, user, tenant), app_name)
        out = {"installation_id": str(done.installation.id), "credential": done.credential}
    if json_out:
        emit_json(out)
    else:
        console.print(f"installed: installation {out['installation_id']} (every permission is off)")
        console.print("credential (shown once): ", end="")
        typer.echo(done.credential)


def app_grants(
    installation_id: Annotated[uuid.UUID, typer.Argument(help="The installation (from 'openkb app list --user').")],
    user: UserOpt,
    on: Annotated[list[str] | None, typer.Option("--on", help="Switch this permission string on (repeat).")] = None,
    off: Annotated[list[str] | None, typer.Option("--off", help="Switch this permission string off (repeat).")] = None,
    lang: Annotated[str, typer.Option(help="Sentence language: en or zh-CN.")] = "en",
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show an installation's permission strings as sentences with their switches; --on/--off change them."""
    from openkb.apps.registry import access_installation, installation_out, set_grant

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        who = as_user(s, user, tenant)
        for p in on or []:
            set_grant(s, who, installation_id, p, True)
        for p in off or []:
            set_grant(s, who, installation_id, p, False)
        out = json.loads(json.dumps(installation_out(s, access_installation(s, who, installation_id)), default=str))
    if json_out:
        emit_json({"installation_id": out["id"], "last_used_at": out["last_used_at"], "grants": out["grants"]})
    else:
        console.print(f"last used: {out['last_used_at'] or 'never'}")
        table(
            f"permissions of {out['app']['name']}",
            ["", "permission", "sentence"],
            [
                ("on" if g["enabled"] else "off", g["permission"], g["sentences"].get(lang, g["sentences"]["en"]))
                for g in out["grants"]
            ],
        )


def app_uninstall(
    installation_id: Annotated[uuid.UUID, typer.Argument(help="The installation to remove.")],
    user: UserOpt,
    delete: Annotated[bool, typer.Option("--delete", help="Also delete what the app wrote (revertible).")] = False,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Uninstall: the credential dies at once; content is kept unless --delete."""
    from openkb.apps.uninstall import uninstall

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        out = json.loads(
            json.dumps(
                uninstall(s, as_user(s, user, tenant), installation_id, "delete" if delete else "keep"), default=str
            )
        )
    if json_out:
        emit_json(out)
    else:
        console.print(
            f"uninstalled ({out['mode']}); deleted {out['deleted']}"
            + (f"; revert run {out['run_id']}" if out["run_id"] else "")
        )


def app_oauth_client(
    installation_id: Annotated[uuid.UUID, typer.Argument(help="The installation (from 'openkb app list --user').")],
    user: UserOpt,
    redirect_uri: Annotated[
        list[str] | None, typer.Option("--redirect-uri", help="Set the client's redirect URIs (repeat); else show it.")
    ] = None,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The installation's OAuth client (docs/apps.md#oauth): --redirect-uri creates it or replaces its URIs."""
    from openkb.apps.oauth import apps_resource, get_oauth_client, set_oauth_client

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        who = as_user(s, user, tenant)
        if redirect_uri:
            row = set_oauth_client(s, who, installation_id, redirect_uris=list(redirect_uri))
        else:
            row = get_oauth_client(s, who, installation_id)
        out = {
            "client_id": row.client_id,
            "redirect_uris": list(row.redirect_uris),
            "scope": " ".join(row.allowed_scopes),
            "resource": apps_resource(ctx.settings.app_base_url),
        }
    if json_out:
        emit_json(out)
    else:
        console.print(f"client_id: {out['client_id']}  scope: {out['scope']}  resource: {out['resource']}")
        console.print("redirect URIs: " + ", ".join(out["redirect_uris"]))
