"""``openkb kb list``: the knowledge bases an operator can name in ``import``, ``export`` and
``dify`` commands (id, slug or title). Parses, calls ``openkb.content.knowledge_bases``, prints."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, emit_json, table

kb_app = typer.Typer(help="Knowledge bases: list them (to name one in import, export and dify).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(kb_app, name="kb")


@kb_app.command("list")
def kb_list(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant (slug or id).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List knowledge bases with their workspace and how many pages they hold."""
    from openkb.accounts.users import get_tenant
    from openkb.content.knowledge_bases import operator_list

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        t = get_tenant(s, tenant) if tenant else None
        rows = operator_list(s, tenant_id=t.id if t else None)
    if json_out:
        emit_json(rows)
        return
    table(
        "knowledge bases",
        ["title", "slug", "workspace", "pages", "folders", "status", "visibility", "id"],
        [
            (r["title"], r["slug"], r["workspace"], r["pages"], r["folders"], r["status"], r["visibility"], r["id"])
            for r in rows
        ],
    )
