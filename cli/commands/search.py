"""``openkb search "query" --as user@example.com``: what that user's search returns.

For operators checking a permission report: the same retrieval service as the web, MCP and
Dify, with the user's principal (their own readable scope, their drafts as editor, nothing more).
Without ``--as`` nothing is searched: an operator must say whose view they want.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.context import appliance, unit_of_work
from cli.output import console, emit_json, table


def register(app: typer.Typer) -> None:
    app.command("search")(search_cmd)


def search_cmd(
    query: Annotated[str, typer.Argument(help='Search text ("" lists recently updated documents).')],
    as_user: Annotated[str | None, typer.Option("--as", help="Email or id of the user whose view to show.")] = None,
    anonymous: Annotated[bool, typer.Option("--anonymous", help="Search as an anonymous visitor instead.")] = False,
    tenant: Annotated[str | None, typer.Option(help="Tenant slug or id (default: the user's, or default).")] = None,
    kb: Annotated[list[str] | None, typer.Option("--kb", help="Only these knowledge base ids (repeatable).")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Only documents with any of these tags.")] = None,
    top_k: Annotated[int, typer.Option("--top-k", help="Results to return.", min=1, max=100)] = 10,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Search as a given user (or anonymous visitor) and show what they would get."""
    from sqlmodel import select

    from openkb.accounts.users import find_user, get_tenant
    from openkb.errors import NotFound, ValidationError
    from openkb.models import TenantMembership
    from openkb.permissions import Principal
    from openkb.retrieval import search

    if bool(as_user) == anonymous:
        raise ValidationError("say whose view to show: --as EMAIL or --anonymous")
    with appliance() as ctx, unit_of_work(ctx) as s:
        if anonymous:
            t = get_tenant(s, tenant or "default")
            principal = Principal.anonymous(t.id)
            who = f"anonymous ({t.slug})"
        else:
            user = find_user(s, as_user or "")
            memberships = s.exec(select(TenantMembership).where(TenantMembership.user_id == user.id)).all()
            if tenant:
                t = get_tenant(s, tenant)
                if not any(m.tenant_id == t.id for m in memberships):
                    raise NotFound(f"{user.email} is not a member of tenant {t.slug}")
                tid = t.id
            elif memberships:
                tid = memberships[0].tenant_id
            else:
                raise NotFound(f"{user.email} belongs to no tenant")
            principal = Principal.user(user, tid)
            who = user.email
        filters = {"tags": tag} if tag else None
        results = search(ctx, s, principal, query, knowledge_base_ids=kb or None, top_k=top_k, filters=filters)
        rows = [r.as_dict() for r in results]
    if json_out:
        emit_json({"as": who, "query": query, "results": rows})
        return
    if not rows:
        console.print(f"no results for {who}", highlight=False)
        return
    table(
        f"{len(rows)} results for {who}",
        ["score", "title", "path", "heading", "content"],
        [
            (
                f"{r['score']:.4f}",
                r["title"],
                r["path"],
                " / ".join(r["heading_path"]),
                _passage(r["content"], r["heading_path"])[:80],
            )
            for r in rows
        ],
    )


def _passage(content: str, heading_path: list[str]) -> str:
    """A passage on one line, without the heading line it opens with when it opens its section:
    the heading column shows that heading already."""
    last = heading_path[-1] if heading_path else None
    if last and content.startswith(last + "\n"):
        content = content[len(last) + 1 :]
    return " ".join(content.split())
