"""Facts and entities from the command line (docs/facts.md#cli):
``openkb facts list|set|retract|predicates`` and ``openkb entities list|resolve|merge|delete``.

For operators, like ``openkb app`` (docs/apps.md#cli): each command acts for the user named
with ``--user`` (``operator_act_as``: a tenant admin only inside its tenant) and calls one
service of ``openkb.facts``, so what it shows and changes is exactly what that user sees and
does in the account area — values set here are user-said, deleting an entity is revertible.
``predicates`` is the tenant's vocabulary, for an administrator of the tenant.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

import typer

from cli.commands.apps import TenantOpt, as_user
from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, table

UserOpt = Annotated[str, typer.Option("--user", help="The user whose knowledge it is: email or user id.")]
IDENTIFIER_KINDS = ("email", "phone", "domain", "url", "handle", "name")


def register(app: typer.Typer) -> None:
    facts = typer.Typer(help="A person's facts and the predicate vocabulary (docs/facts.md).", no_args_is_help=True)
    facts.command("list")(facts_list)
    facts.command("set")(facts_set)
    facts.command("retract")(facts_retract)
    facts.command("predicates")(facts_predicates)
    app.add_typer(facts, name="facts")
    ents = typer.Typer(
        help="The people, organisations and places a person knows (docs/facts.md).", no_args_is_help=True
    )
    ents.command("list")(entities_list)
    ents.command("resolve")(entities_resolve)
    ents.command("merge")(entities_merge)
    ents.command("delete")(entities_delete)
    app.add_typer(ents, name="entities")


def _plain(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str, ensure_ascii=False))


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def facts_list(
    user: UserOpt,
    prefix: Annotated[str | None, typer.Option(help="Only predicates under this prefix, e.g. pref.food.")] = None,
    subject: Annotated[uuid.UUID | None, typer.Option(help="An entity id (default: the user).")] = None,
    history: Annotated[bool, typer.Option("--history", help="Expired values too.")] = False,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The user's facts with who said them and where they came from."""
    from openkb.facts.service import user_facts

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        rows = user_facts(s, as_user(s, user, tenant), subject_id=subject, prefix=prefix, history=history)
        out = _plain(rows)
    if json_out:
        emit_json(out)
        return
    table(
        "facts",
        ["id", "predicate", "value", "said by", "since", "until"],
        [
            (
                f["id"], f["predicate"], _show(f["value"]) if f["object_id"] is None else f"entity {f['object_id']}",
                f"app:{f['app']}" if f["app"] else f["said_by"], f["valid_from"], f["valid_to"] or "",
            )
            for f in out
        ],
    )  # fmt: skip


def facts_set(
    predicate: Annotated[str, typer.Argument(help="The full predicate, e.g. location.home.city.")],
    value: Annotated[str, typer.Argument(help="The value: JSON when it parses as JSON, else the text itself.")],
    user: UserOpt,
    subject: Annotated[uuid.UUID | None, typer.Option(help="An entity id (default: the user).")] = None,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Set a value as the user (user-said: apps cannot overwrite it on a cardinality-one predicate)."""
    from openkb.facts.service import user_put

    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        out = _plain(user_put(s, as_user(s, user, tenant), predicate=predicate, value=parsed, subject_id=subject))
    if json_out:
        emit_json(out)
    else:
        console.print(f"{out['status']}: {out['predicate']} ({out['id']})")


def facts_retract(
    fact_id: Annotated[uuid.UUID, typer.Argument(help="The fact (from 'openkb facts list').")],
    user: UserOpt,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Expire one of the user's facts (never deleted: the history keeps it)."""
    from openkb.facts.service import user_retract

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        out = user_retract(s, as_user(s, user, tenant), fact_id)
    if json_out:
        emit_json(out)
    else:
        console.print(out["status"])


def facts_predicates(tenant: TenantOpt = None, json_out: JsonOpt = False) -> None:
    """The tenant's predicate vocabulary: core predicates and those apps declared."""
    from openkb.facts.vocabulary import operator_predicates, pred_out
    from openkb.permissions.principal import Principal

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        out = _plain([pred_out(p) for p in operator_predicates(s, Principal.system(), tenant)])
    if json_out:
        emit_json(out)
        return
    table(
        "predicates",
        ["predicate", "cardinality", "name", "origin"],
        [(p["predicate"], p["cardinality"], p["names"]["en"] or p["description"][:60], p["origin"]) for p in out],
    )


def _entity_rows(out: list[dict[str, Any]]) -> None:
    table(
        "entities",
        ["id", "kind", "name", "identifiers"],
        [
            (e["id"], e["kind"], e["display_name"], " ".join(f"{i['kind']}:{i['value']}" for i in e["identifiers"]))
            for e in out
        ],
    )


def entities_list(
    user: UserOpt,
    kind: Annotated[str | None, typer.Option(help="person, org, place, ... (default: every kind).")] = None,
    query: Annotated[str | None, typer.Option(help="Part of a name or identifier.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 200,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The user's entities with their identifiers (merged and deleted ones are left out)."""
    from openkb.facts.entities import user_entities

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        out = _plain(user_entities(s, as_user(s, user, tenant), kind=kind, query=query, limit=limit))
    if json_out:
        emit_json(out)
    else:
        _entity_rows(out)


def entities_resolve(
    user: UserOpt,
    email: Annotated[str | None, typer.Option(help="Look up by email.")] = None,
    phone: Annotated[str | None, typer.Option(help="Look up by phone number.")] = None,
    domain: Annotated[str | None, typer.Option(help="Look up by domain.")] = None,
    url: Annotated[str | None, typer.Option(help="Look up by URL.")] = None,
    handle: Annotated[str | None, typer.Option(help="Look up by handle, platform:account.")] = None,
    name: Annotated[str | None, typer.Option(help="Look up by name.")] = None,
    kind: Annotated[str, typer.Option(help="The entity kind.")] = "person",
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """A point lookup by identifier (normalized like the apps' entities.resolve); never lists."""
    from openkb.facts.entities import user_entity_out, user_resolve

    given = dict(zip(IDENTIFIER_KINDS, (email, phone, domain, url, handle, name), strict=True))
    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        ent = user_resolve(s, as_user(s, user, tenant), {k: v for k, v in given.items() if v is not None}, kind=kind)
        out = _plain(user_entity_out(s, ent))
    if json_out:
        emit_json(out)
    else:
        _entity_rows([out])


def entities_merge(
    survivor: Annotated[uuid.UUID, typer.Argument(help="The entity that stays.")],
    merged: Annotated[uuid.UUID, typer.Argument(help="The entity folded into it (its refs keep working).")],
    user: UserOpt,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Merge two of the user's entities of one kind: identifiers, facts and mentions move."""
    from openkb.facts.entities import merge, user_entity_out

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        out = _plain(user_entity_out(s, merge(s, as_user(s, user, tenant), survivor, merged)))
    if json_out:
        emit_json(out)
    else:
        console.print(f"merged into {out['display_name']} ({out['id']})")


def entities_delete(
    entity_id: Annotated[uuid.UUID, typer.Argument(help="The entity to delete.")],
    user: UserOpt,
    tenant: TenantOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete one of the user's entities: its facts expire; revert the change to bring it back."""
    from openkb.facts.entities import delete

    with appliance(components=("postgresql",)) as ctx, unit_of_work(ctx) as s:
        delete(s, as_user(s, user, tenant), entity_id)
    if json_out:
        emit_json({"status": "deleted", "id": str(entity_id)})
    else:
        console.print(f"deleted {entity_id} (revert its entity.delete change to bring it back)")
