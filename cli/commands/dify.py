"""``openkb dify``: scoped keys, knowledge-id mappings and the exact endpoint to paste into Dify.

The CLI acts as the system principal (``Principal.system()``) in one tenant (``--tenant``,
default ``default``); each command calls one service, which writes the audit row (marked
``via: cli`` by the unit of work). Plaintext keys are printed once, by ``key create`` and
``key rotate``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, table

TenantOpt = Annotated[str, typer.Option(help="Tenant slug or id.")]


def register(app: typer.Typer) -> None:
    dify = typer.Typer(
        help="Dify External Knowledge: scoped API keys, knowledge-id mappings, setup info.", no_args_is_help=True
    )
    key = typer.Typer(help="Scoped Dify API keys (okdify_...).", no_args_is_help=True)
    key.command("create")(key_create)
    key.command("list")(key_list)
    key.command("show")(key_show)
    key.command("update")(key_update)
    key.command("disable")(key_disable)
    key.command("enable")(key_enable)
    key.command("revoke")(key_revoke)
    key.command("rotate")(key_rotate)
    dify.add_typer(key, name="key")
    mapping = typer.Typer(
        help="Map a Dify External Knowledge ID to a knowledge base: "
        "`openkb dify map --knowledge-id ID --kb KB`; `map list`, `map disable ID`.",
        invoke_without_command=True,
    )
    mapping.callback()(map_create)
    mapping.command("list")(map_list)
    mapping.command("disable")(map_disable)
    mapping.command("enable")(map_enable)
    dify.add_typer(mapping, name="map")
    dify.command("info")(info)
    app.add_typer(dify, name="dify")


def _operator() -> Any:
    from openkb.permissions.principal import Principal

    return Principal.system()


def _print_key(view: dict[str, Any], plaintext: str | None = None) -> None:
    console.print(
        f"[bold]{escape(view['name'])}[/] ({view['id']}): {view['status']}, top-k limit {view['top_k_limit']}, "
        f"{len(view['knowledge_base_ids'])} knowledge base(s)",
        markup=True,
        highlight=False,
    )
    if not view["knowledge_base_ids"]:
        console.print(
            "[yellow]warning:[/] this key lists no knowledge base: it will find nothing "
            "(add some with `openkb dify key update ID --kb KB`)",
            markup=True,
            highlight=False,
        )
    if plaintext:
        console.print("API key (shown once, store it in Dify now):", highlight=False)
        console.print(plaintext, highlight=False, soft_wrap=True)


# --- keys ----------------------------------------------------------------------------------------


def key_create(
    name: Annotated[str, typer.Option("--name", help="What the key is for, e.g. the Dify app's name.")],
    kb: Annotated[
        list[str] | None,
        typer.Option("--kb", help="Knowledge base id or slug the key may read (repeat; none = the key sees nothing)."),
    ] = None,
    top_k_limit: Annotated[int, typer.Option("--top-k-limit", help="Most records one call may return.")] = 10,
    expires: Annotated[str | None, typer.Option("--expires", help="90d, 12h, or 2030-01-01[T00:00:00Z].")] = None,
    metadata_filter: Annotated[
        list[str] | None,
        typer.Option(
            "--metadata-filter",
            help="Restrict the key to documents whose metadata/tags match: NAME=VALUE (repeat; "
            "a repeated NAME means any of its values) or one metadata_condition JSON object.",
        ),
    ] = None,
    tenant: TenantOpt = "default",
    json_out: JsonOpt = False,
) -> None:
    """Create a scoped Dify key; the plaintext is printed once."""
    from openkb.accounts.users import get_tenant
    from openkb.dify import keys as svc

    expires_at = svc.parse_expires(expires)
    filters = svc.parse_filter_args(metadata_filter or [])
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        row, plaintext = svc.create_key(
            s,
            _operator(),
            tenant_id=t.id,
            name=name,
            knowledge_base_ids=kb or [],
            top_k_limit=top_k_limit,
            expires_at=expires_at,
            metadata_filters=filters,
        )
        view = svc.key_view(row)
    if json_out:
        emit_json({**view, "key": plaintext})
    else:
        _print_key(view, plaintext)


def key_list(
    tenant: TenantOpt = "default",
    active_only: Annotated[bool, typer.Option("--active", help="Hide revoked keys.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """List the tenant's Dify keys (never their secrets)."""
    from openkb.accounts.users import get_tenant
    from openkb.dify import keys as svc

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        rows = [svc.key_view(r) for r in svc.list_keys(s, t.id, include_revoked=not active_only)]
    if json_out:
        emit_json(rows)
    else:
        table(
            "dify keys",
            ["name", "status", "kbs", "top-k", "expires", "last used", "id"],
            [
                (
                    r["name"],
                    r["status"],
                    len(r["knowledge_base_ids"]),
                    r["top_k_limit"],
                    r["expires_at"] or "-",
                    r["last_used_at"] or "never",
                    r["id"],
                )
                for r in rows
            ],
        )


def key_show(
    key_id: Annotated[str, typer.Argument(help="Key id.")], tenant: TenantOpt = "default", json_out: JsonOpt = False
) -> None:
    """Show one key's scope."""
    from openkb.accounts.users import get_tenant
    from openkb.dify import keys as svc

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        view = svc.key_view(svc.access_key(s, get_tenant(s, tenant).id, key_id))
    emit_json(view) if json_out else _print_key(view)


def key_update(
    key_id: Annotated[str, typer.Argument(help="Key id.")],
    kb: Annotated[list[str] | None, typer.Option("--kb", help="Replace the knowledge bases (repeat).")] = None,
    no_kb: Annotated[bool, typer.Option("--no-kb", help="Remove every knowledge base (the key sees nothing).")] = False,
    top_k_limit: Annotated[int | None, typer.Option("--top-k-limit", help="New top-k limit.")] = None,
    expires: Annotated[str | None, typer.Option("--expires", help="New expiry (90d, 2030-01-01, or 'never').")] = None,
    metadata_filter: Annotated[
        list[str] | None, typer.Option("--metadata-filter", help="Replace the metadata filter.")
    ] = None,
    clear_metadata_filter: Annotated[bool, typer.Option("--clear-metadata-filter", help="Remove the filter.")] = False,
    name: Annotated[str | None, typer.Option("--name", help="New name.")] = None,
    tenant: TenantOpt = "default",
    json_out: JsonOpt = False,
) -> None:
    """Change a key's scope in place (the secret is unchanged)."""
    from openkb.accounts.users import get_tenant
    from openkb.dify import keys as svc

    kw: dict[str, Any] = {"name": name, "top_k_limit": top_k_limit}
    if no_kb:
        kw["knowledge_base_ids"] = []
    elif kb:
        kw["knowledge_base_ids"] = kb
    if clear_metadata_filter:
        kw["metadata_filters"] = {}
    elif metadata_filter:
        kw["metadata_filters"] = svc.parse_filter_args(metadata_filter)
    if expires is not None:
        kw["expires_at"] = None if expires.strip().lower() in ("never", "none", "") else svc.parse_expires(expires)
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        view = svc.key_view(svc.do_update_key(s, _operator(), t.id, key_id, **kw))
    emit_json(view) if json_out else _print_key(view)


def _status(key_id: str, tenant: str, json_out: bool, action: str) -> None:
    from openkb.accounts.users import get_tenant
    from openkb.dify import keys as svc

    fn = {"disable": svc.do_disable_key, "enable": svc.do_enable_key, "revoke": svc.do_revoke_key}[action]
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        ch = fn(s, _operator(), t.id, key_id)
        out = {"id": str(ch.row.id), "name": ch.row.name, "before": ch.before, "status": ch.after}
    emit_json(out) if json_out else console.print(
        f"{out['name']} ({out['id']}): {ch.before} -> {ch.after}", highlight=False
    )


def key_disable(
    key_id: Annotated[str, typer.Argument(help="Key id.")], tenant: TenantOpt = "default", json_out: JsonOpt = False
) -> None:
    """Disable a key (reversible with `enable`); Dify calls fail from the next request."""
    _status(key_id, tenant, json_out, "disable")


def key_enable(
    key_id: Annotated[str, typer.Argument(help="Key id.")], tenant: TenantOpt = "default", json_out: JsonOpt = False
) -> None:
    """Re-enable a disabled key (a revoked key stays revoked)."""
    _status(key_id, tenant, json_out, "enable")


def key_revoke(
    key_id: Annotated[str, typer.Argument(help="Key id.")], tenant: TenantOpt = "default", json_out: JsonOpt = False
) -> None:
    """Revoke a key for good; Dify calls fail from the next request."""
    _status(key_id, tenant, json_out, "revoke")


def key_rotate(
    key_id: Annotated[str, typer.Argument(help="Key id.")], tenant: TenantOpt = "default", json_out: JsonOpt = False
) -> None:
    """Issue a new secret for a key (same scope); the old secret stops working at once."""
    from openkb.accounts.users import get_tenant
    from openkb.dify import keys as svc

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant)
        row, plaintext = svc.do_rotate_key(s, _operator(), t.id, key_id)
        view = svc.key_view(row)
    if json_out:
        emit_json({**view, "key": plaintext})
    else:
        _print_key(view, plaintext)


# --- mappings ------------------------------------------------------------------------------------


def map_create(
    ctx: typer.Context,
    knowledge_id: Annotated[
        str | None, typer.Option("--knowledge-id", help="The External Knowledge ID typed in Dify.")
    ] = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge base id or slug it stands for.")] = None,
    tenant: TenantOpt = "default",
    json_out: JsonOpt = False,
) -> None:
    """Map a Dify External Knowledge ID to a knowledge base (re-mapping an id moves it)."""
    if ctx.invoked_subcommand is not None:
        if knowledge_id or kb:
            raise typer.BadParameter(
                "--knowledge-id/--kb go without a subcommand: openkb dify map --knowledge-id ID --kb KB"
            )
        ctx.obj = {"tenant": tenant, "json": json_out}
        return
    if not knowledge_id and not kb:  # `openkb dify map`: what the group does, on stderr (stdout is for results)
        import contextlib
        import sys

        with contextlib.redirect_stdout(sys.stderr):  # typer's rich help prints itself, to stdout
            help_text = ctx.get_help()
        if help_text:
            typer.echo(help_text, err=True)
        raise typer.Exit(2)
    if not knowledge_id or not kb:  # half a mapping: say which half is missing, in one line
        from openkb.errors import ValidationError

        missing = "--kb KB" if knowledge_id else "--knowledge-id ID"
        raise ValidationError(f"missing {missing}: openkb dify map --knowledge-id ID --kb KB")
    from openkb.accounts.users import get_tenant
    from openkb.dify import mappings as svc

    with appliance(components=("postgresql",)) as actx, unit_of_work(actx) as s:
        t = get_tenant(s, tenant)
        res = svc.do_map(s, _operator(), tenant_id=t.id, knowledge_id=knowledge_id, kb=kb)
        view = svc.mapping_view(res.row)
    if json_out:
        emit_json({**view, "created": res.created})
    else:
        verb = "mapped" if res.created else "re-mapped"
        console.print(
            f"{verb} knowledge id {view['knowledge_id']!r} -> knowledge base {view['knowledge_base_id']}",
            highlight=False,
        )
        console.print("remember: a key reads it only if the key lists that knowledge base (--kb)", highlight=False)


def _opts(ctx: typer.Context, tenant: str | None, json_out: bool) -> tuple[str, bool]:
    parent = ctx.obj or {}
    return tenant or parent.get("tenant", "default"), json_out or bool(parent.get("json"))


def map_list(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option(help="Tenant slug or id.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List knowledge-id mappings."""
    from openkb.accounts.users import get_tenant
    from openkb.dify import mappings as svc

    tenant_ref, as_json = _opts(ctx, tenant, json_out)
    with appliance(components=("postgresql",)) as actx, unit_of_work(actx) as s:
        rows = [svc.mapping_view(r) for r in svc.list_mappings(s, get_tenant(s, tenant_ref).id)]
    if as_json:
        emit_json(rows)
    else:
        table(
            "dify knowledge mappings",
            ["knowledge id", "knowledge base", "status", "id"],
            [(r["knowledge_id"], r["knowledge_base_id"], r["status"], r["id"]) for r in rows],
        )


def _map_status(ctx: typer.Context, ref: str, tenant: str | None, json_out: bool, status: str) -> None:
    from openkb.accounts.users import get_tenant
    from openkb.dify import mappings as svc

    tenant_ref, as_json = _opts(ctx, tenant, json_out)
    fn = svc.do_disable_mapping if status == "disabled" else svc.do_enable_mapping
    with appliance(components=("postgresql",)) as actx, unit_of_work(actx) as s:
        t = get_tenant(s, tenant_ref)
        row, before = fn(s, _operator(), t.id, ref)
        out = {**svc.mapping_view(row), "before": before}
    emit_json(out) if as_json else console.print(
        f"{out['knowledge_id']!r}: {before} -> {out['status']}", highlight=False
    )


def map_disable(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="Mapping id or knowledge id.")],
    tenant: Annotated[str | None, typer.Option(help="Tenant slug or id.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Disable a mapping: Dify gets 2001 for that knowledge id from the next call."""
    _map_status(ctx, ref, tenant, json_out, "disabled")


def map_enable(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="Mapping id or knowledge id.")],
    tenant: Annotated[str | None, typer.Option(help="Tenant slug or id.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Re-enable a mapping."""
    _map_status(ctx, ref, tenant, json_out, "active")


# --- info ----------------------------------------------------------------------------------------


def info(json_out: JsonOpt = False) -> None:
    """Print the endpoint URL to paste into Dify and the setup steps (no database needed)."""
    from openkb.config import get_settings
    from openkb.dify.service import endpoint_info

    data = endpoint_info(get_settings())
    if json_out:
        emit_json(data)
        return
    console.print("Dify -> Knowledge -> External Knowledge API -> Add", highlight=False)
    console.print(f"  API Endpoint: [bold]{escape(data['endpoint'])}[/]", markup=True, highlight=False, soft_wrap=True)
    console.print(
        f"  (Dify calls {data['retrieval_url']} itself: do not add /retrieval)", highlight=False, soft_wrap=True
    )
    for w in data["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}", markup=True, highlight=False, soft_wrap=True)
    console.print("Steps:", highlight=False)
    for i, step in enumerate(data["steps"], 1):
        console.print(f"  {i}. {step}", highlight=False, soft_wrap=True)
