"""``openkb profile create|list|show``: Milvus index profiles (operator = system administrator).

A profile names a collection and the shapes of its functions (TEXTEMBEDDING provider, model and
endpoint; the BM25 analyzer; an optional RERANK function). It never holds a key: a key-like
``--param`` is refused, because embedding and rerank credentials live in the Milvus or provider
deployment (milvus.yaml credentials, provider env), not in OpenKB.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from cli.context import appliance, unit_of_work
from cli.output import JsonOpt, console, emit_json, table
from openkb.errors import ValidationError
from openkb.indexing.lexical import describe_lexical


def register(app: typer.Typer) -> None:
    profile = typer.Typer(
        help="Milvus index profiles (collection + embedding/BM25/rerank functions).", no_args_is_help=True
    )
    profile.command("create")(profile_create)
    profile.command("list")(profile_list)
    profile.command("show")(profile_show)
    app.add_typer(profile, name="profile")


def _params(values: list[str] | None, what: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in values or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"{what} takes KEY=VALUE (got {item!r})", field=what)
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:  # not JSON (or a number too long to convert): the text as it is
            out[key.strip()] = raw
    return out


def profile_create(
    name: Annotated[str | None, typer.Argument(help="Profile name (default: the collection name).")] = None,
    model: Annotated[
        str | None, typer.Option(help="Embedding model name as the provider knows it; omit for a BM25-only profile.")
    ] = None,
    dim: Annotated[int, typer.Option(help="Vector size of the model (required with --model).")] = 0,
    provider: Annotated[
        str,
        typer.Option(
            help="TEXTEMBEDDING provider (Milvus Lite: openai = any "
            "OpenAI-compatible endpoint; Milvus 2.6: also tei, vllm, ...)."
        ),
    ] = "openai",
    endpoint: Annotated[
        str | None, typer.Option(help="Provider base URL that Milvus calls, e.g. http://tei:80/v1.")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", help="Extra TEXTEMBEDDING param KEY=VALUE (repeatable; never a key).")
    ] = None,
    rerank_provider: Annotated[
        str | None, typer.Option(help="RERANK provider (Lite: cohere; 2.6: tei, vllm, ...).")
    ] = None,
    rerank_endpoint: Annotated[str | None, typer.Option(help="Rerank service URL.")] = None,
    rerank_model: Annotated[str | None, typer.Option(help="Rerank model name.")] = None,
    rerank_param: Annotated[
        list[str] | None, typer.Option("--rerank-param", help="Extra RERANK param KEY=VALUE.")
    ] = None,
    analyzer: Annotated[
        str | None,
        typer.Option(
            help="BM25 analyzer params as JSON (default: jieba on Milvus Lite; english or chinese per chunk on Milvus 2.6)."
        ),
    ] = None,
    like: Annotated[
        str | None,
        typer.Option(
            help="Copy the functions (embedding, rerank, analyzer) of this profile: a new profile "
            "with what new profiles get, e.g. the latest lexical transform."
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a profile. Its collection is created and filled by `openkb index rebuild --profile NAME`."""
    from openkb.indexing.profiles import ProfileInput, create_profile, describe, input_like
    from openkb.permissions.principal import Principal

    if like is not None:
        given = [
            flag
            for flag, value in (
                ("--model", model),
                ("--dim", dim),
                ("--provider", provider != "openai"),
                ("--endpoint", endpoint),
                ("--param", param),
                ("--rerank-provider", rerank_provider),
                ("--rerank-endpoint", rerank_endpoint),
                ("--rerank-model", rerank_model),
                ("--rerank-param", rerank_param),
                ("--analyzer", analyzer),
            )
            if value
        ]
        with appliance() as ctx, unit_of_work(ctx) as s:
            inp = input_like(s, like, name, also_given=given, option="--like")
            prof = create_profile(ctx, s, Principal.system(), inp)
            _created(describe(prof), json_out)
        return
    try:
        analyzer_params = json.loads(analyzer) if analyzer else None
    except ValueError as exc:  # JSONDecodeError, or a number past Python's 4,300 digits
        raise ValidationError(f"--analyzer is not JSON: {exc}", field="analyzer") from None
    if analyzer_params is not None and not isinstance(analyzer_params, dict):  # before the services start
        raise ValidationError('--analyzer takes a JSON object, e.g. \'{"tokenizer": "jieba"}\'', field="analyzer")
    inp = ProfileInput(
        name=name,
        model=model,
        dim=dim,
        provider=provider,
        endpoint=endpoint,
        params=_params(param, "--param"),
        rerank_provider=rerank_provider,
        rerank_endpoint=rerank_endpoint,
        rerank_model=rerank_model,
        rerank_params=_params(rerank_param, "--rerank-param"),
        analyzer=analyzer_params,
    )
    with appliance() as ctx, unit_of_work(ctx) as s:
        prof = create_profile(ctx, s, Principal.system(), inp)  # the service audits it
        _created(describe(prof), json_out)


def _created(out: dict[str, object], json_out: bool) -> None:
    if json_out:
        emit_json(out)
        return
    functions = out["functions"]
    assert isinstance(functions, dict)
    console.print(
        f"created profile [bold]{escape(str(out['name']))}[/] -> collection {out['collection']} "
        f"({'dense ' + str(out['vector_dim']) + 'd + ' if out['vector_dim'] else ''}BM25"
        f"{' + rerank' if functions['rerank'] else ''}); next: "
        f"openkb index rebuild --profile {escape(str(out['name']))} --switch",
        markup=True,
        highlight=False,
    )


def profile_list(json_out: JsonOpt = False) -> None:
    """List profiles; the active one is marked."""
    from openkb.indexing.profiles import current_target, describe, list_profiles

    with appliance() as ctx, unit_of_work(ctx) as s:
        active = current_target(ctx.milvus, ctx.settings.milvus_active_alias)
        rows = [describe(p, active_collection=active) for p in list_profiles(s)]
    if json_out:
        emit_json(rows)
        return
    table(
        "index profiles",
        ["", "name", "status", "collection", "dim", "embedding", "rerank"],
        [
            (
                "*" if r["active"] else "",
                r["name"],
                r["status"],
                r["collection"],
                r["vector_dim"] or "-",
                (r["functions"]["embedding"] or {}).get("model") or "BM25-only",
                (r["functions"]["rerank"] or {}).get("provider") or "-",
            )
            for r in rows
        ],
    )


def profile_show(
    name: Annotated[str, typer.Argument(help="Profile name, id or collection.")], json_out: JsonOpt = False
) -> None:
    """Show one profile: collection, functions, status."""
    from openkb.indexing.profiles import current_target, describe, get_profile

    with appliance() as ctx, unit_of_work(ctx) as s:
        out = describe(
            get_profile(s, name), active_collection=current_target(ctx.milvus, ctx.settings.milvus_active_alias)
        )
    if json_out:
        emit_json(out)
        return
    f = out["functions"]
    console.print(
        f"[bold]{escape(out['name'])}[/] ({out['status']}{', the active alias points here' if out['active'] else ''})",
        markup=True,
        highlight=False,
    )
    console.print(f"  collection  {out['collection']}  (schema {out['schema_version']}, backend {out['backend']})")
    emb = f["embedding"]
    console.print(
        "  embedding   "
        + (
            f"{emb['name']}: {emb['provider']} {emb['model']} {emb['dimensions']}d @ {emb['endpoint']}"
            if emb
            else "none (BM25-only)"
        ),
        highlight=False,
    )
    console.print(f"  bm25        {f['bm25']['name']}: analyzer {json.dumps(f['bm25']['analyzer'])}", highlight=False)
    lex = f["bm25"].get("lexical")
    console.print(f"  lexical     {describe_lexical(lex)}", highlight=False)
    rr = f["rerank"]
    console.print(
        "  rerank      " + (f"{rr['name']}: {rr['provider']} {rr['model'] or ''} @ {rr['endpoint']}" if rr else "none"),
        highlight=False,
    )
