"""Personal access tokens from the command line: ``openkb token create|list|revoke --user``.

For operators who hand a token to a script or an MCP client on someone's behalf (docs/mcp.md):
the token is bound to that user and tenant and never reads more than the user may. Each command
calls one service of ``openkb.accounts.tokens`` as the system principal; the service writes the
audit row (``via: cli``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

import typer

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, table

UserOpt = Annotated[str, typer.Option("--user", help="The token's owner: email or user id.")]
TenantOpt = Annotated[str | None, typer.Option(help="Tenant slug or id (needed when the user is in several).")]


def register(app: typer.Typer) -> None:
    token = typer.Typer(
        help="Manage personal access tokens (kbpat_) for MCP clients and scripts.", no_args_is_help=True
    )
    token.command("create")(token_create)
    token.command("list")(token_list)
    token.command("revoke")(token_revoke)
    app.add_typer(token, name="token")


def _row(r) -> dict:
    from openkb.accounts.tokens import effective_status

    return {
        "id": str(r.id),
        "name": r.name,
        "scopes": list(r.scopes),
        "status": effective_status(r),
        "expires_at": r.expires_at.isoformat() if r.expires_at else None,
        "last_used_at": r.last_used_at.isoformat() if r.last_used_at else None,
        "created_at": r.created_at.isoformat(),
    }


def token_create(
    user: UserOpt,
    name: Annotated[str, typer.Option(help="What the token is for, e.g. 'Cursor on laptop'.")],
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help=(
                "Repeat for each scope: kb:read kb:search doc:read (the default set), doc:write (the MCP write tool), "
                "kb:write, admin."
            ),
        ),
    ] = None,
    expires_at: Annotated[datetime | None, typer.Option(help="Expiry (ISO 8601, UTC), e.g. 2027-01-31.")] = None,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a token for a user; the token itself is printed once."""
    from openkb.accounts.tokens import operator_create_pat
    from openkb.permissions.principal import Principal

    if expires_at is not None and expires_at.tzinfo is None:
        from datetime import UTC

        expires_at = expires_at.replace(tzinfo=UTC)
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        row, plaintext, u = operator_create_pat(
            s, Principal.system(), user=user, name=name, scopes=scope, tenant=tenant, expires_at=expires_at
        )
        out = {**_row(row), "user": u.email, "token": plaintext}
    if json_out:
        emit_json(out)
    else:
        console.print(f"created token {out['id']} for {out['user']} ({' '.join(out['scopes'])})")
        console.print("token (shown once): ", end="")
        typer.echo(plaintext)


def token_list(user: UserOpt, tenant: TenantOpt = None, json_out: JsonOpt = False) -> None:
    """List a user's tokens (never the tokens themselves)."""
    from openkb.accounts.tokens import operator_list_pats
    from openkb.permissions.principal import Principal

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        u, rows = operator_list_pats(s, Principal.system(), user=user, tenant=tenant)
        out = [_row(r) for r in rows]
    if json_out:
        emit_json(out)
    else:
        table(
            f"tokens of {u.email}",
            ["id", "name", "scopes", "status", "last used", "expires"],
            [
                (
                    r["id"],
                    r["name"],
                    " ".join(r["scopes"]),
                    r["status"],
                    r["last_used_at"] or "-",
                    r["expires_at"] or "-",
                )
                for r in out
            ],
        )


def token_revoke(
    token_id: Annotated[uuid.UUID, typer.Argument(help="The token's id (from 'openkb token list').")],
    user: UserOpt,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Revoke a user's token: its next request is refused."""
    from openkb.accounts.tokens import operator_revoke_pat
    from openkb.permissions.principal import Principal

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        row = operator_revoke_pat(s, Principal.system(), user=user, token_id=token_id, tenant=tenant)
        out = _row(row)
    emit_json(out) if json_out else console.print(f"revoked token {out['id']} ({out['name']})")
