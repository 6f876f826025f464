"""``openkb facts list|set|retract|predicates`` and ``openkb entities list|resolve|merge|delete``
as an operator runs them (subprocesses against the test database, like tests/apps/test_cli.py),
docs/facts.md#cli."""

from __future__ import annotations

import json

from sqlalchemy import text

from openkb.facts import entities as E
from openkb.permissions import Principal
from tests.factories import make_tenant, make_user
from tests.test_cli import assert_one_line_error, db_env, run  # noqa: F401 - db_env is a fixture


def _json(p):  # noqa: ANN001, ANN202
    assert p.returncode == 0, (p.stdout, p.stderr)
    return json.loads(p.stdout)


def test_facts_and_entities_commands(db_env, committed):  # noqa: ANN001, F811 - the fixture
    with committed() as s:
        t = make_tenant(s)
        u = make_user(s, t)
        me = Principal.user(u.id, t.id)
        zs = E.create_entity(s, me, kind="person", display_name="张三", identifiers={"email": "ZhangSan@acme.nl"})
        li = E.create_entity(s, me, kind="person", display_name="李四", identifiers={"name": "李四"})
        s.commit()
        who, slug, zid, lid, tid = ["--user", u.email], t.slug, str(zs.id), str(li.id), t.id
    try:
        _commands(db_env, who, slug, zid, lid)
    finally:  # other modules count facts and entities database-wide: leave none behind
        with committed() as s:
            s.execute(text("DELETE FROM tenants WHERE id = :t"), {"t": tid})
            s.commit()


def _commands(db_env, who: list[str], slug: str, zid: str, lid: str) -> None:  # noqa: ANN001, F811
    put = _json(run(["facts", "set", "location.home.city", "Utrecht", *who, "--json"], env=db_env))
    assert put["status"] == "applied" and put["predicate"] == "location.home.city"
    listed = _json(run(["facts", "list", *who, "--prefix", "location", "--json"], env=db_env))
    assert [(f["predicate"], f["value"], f["said_by"]) for f in listed] == [("location.home.city", "Utrecht", "user")]

    found = _json(run(["entities", "resolve", *who, "--email", " zhangsan@ACME.nl ", "--json"], env=db_env))
    assert found["id"] == zid and found["identifiers"] == [{"kind": "email", "value": "ZhangSan@acme.nl"}]
    assert_one_line_error(run(["entities", "resolve", *who, "--email", "nobody@acme.nl"], env=db_env), 4, "no entity")

    merged = _json(run(["entities", "merge", zid, lid, *who, "--json"], env=db_env))
    assert merged["id"] == zid and {i["value"] for i in merged["identifiers"]} == {"ZhangSan@acme.nl", "李四"}
    assert _json(run(["entities", "delete", zid, *who, "--json"], env=db_env))["status"] == "deleted"
    assert _json(run(["entities", "list", *who, "--json"], env=db_env)) == []

    vocab = {p["predicate"]: p for p in _json(run(["facts", "predicates", "--tenant", slug, "--json"], env=db_env))}
    assert vocab["location.home.city"]["cardinality"] == "one" and vocab["location.home.city"]["names"]["zh-CN"]
