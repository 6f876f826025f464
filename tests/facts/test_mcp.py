"""The user's facts over MCP (docs/facts.md#mcp): ``kb_facts_lookup`` and ``kb_entities_resolve``
are listed and callable only with the ``facts:read`` scope, which no token gets by default."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlmodel import Session

from openkb.accounts.tokens import DEFAULT_SCOPES
from openkb.oauth.clients import DEFAULT_SCOPES as OAUTH_DEFAULT_SCOPES
from tests.api.helpers import bearer_client, make_user_with_pat
from tests.factories import make_tenant
from tests.mcp.helpers import LEGACY, run

READ = ("kb:read", "kb:search", "doc:read")
FACT_TOOLS = {"kb_facts_lookup", "kb_entities_resolve"}


@pytest.fixture(scope="module")
def w(live_server, engine):
    committed = lambda: Session(engine, expire_on_commit=False)  # noqa: E731
    with committed() as s:
        t = make_tenant(s)
        s.commit()
    user, with_facts = make_user_with_pat(committed, t, scopes=(*READ, "facts:read", "kb:write"))
    _, without = make_user_with_pat(committed, t, scopes=READ, user=user)
    http = bearer_client(live_server, with_facts)
    assert http.post("/api/apps/v1/facts", json={"predicate": "pref.food.like", "value": "饺子"}).status_code == 200
    r = http.post(
        "/api/apps/v1/entities",
        json={"kind": "person", "display_name": "张三", "identifiers": {"email": "ZhangSan@acme.nl"}},
    )
    assert r.status_code == 201, r.text
    yield {"base": live_server, "with": with_facts, "without": without, "zhang": r.json()["id"]}
    http.close()


def _tools(w: dict[str, Any], token: str) -> set[str]:
    async def listing(c: Any) -> Any:
        return (await c.list_tools()).tools

    return {t.name for t in run(w["base"], token, listing, LEGACY)}


def _call(w: dict[str, Any], token: str, tool: str, args: dict[str, Any]) -> Any:
    return run(w["base"], token, lambda c: c.call_tool(tool, args), LEGACY)


def test_facts_read_is_never_a_default_scope() -> None:
    assert "facts:read" not in DEFAULT_SCOPES and "facts:read" not in OAUTH_DEFAULT_SCOPES


def test_the_tools_are_listed_only_with_facts_read(w) -> None:
    assert FACT_TOOLS <= _tools(w, w["with"])
    assert not FACT_TOOLS & _tools(w, w["without"])


def test_lookup_and_resolve(w) -> None:
    out = _call(w, w["with"], "kb_facts_lookup", {"prefix": "pref.food"})
    assert not out.is_error, out.content
    [f] = out.structured_content["facts"]
    assert (f["predicate"], f["value"], f["said_by"]) == ("pref.food.like", "饺子", "user")
    found = _call(w, w["with"], "kb_entities_resolve", {"email": "zhangsan@ACME.nl"}).structured_content["entity"]
    assert found["id"] == w["zhang"] and found["display_name"] == "张三"
    assert _call(w, w["with"], "kb_entities_resolve", {"email": "nobody@acme.nl"}).structured_content == {
        "entity": None
    }
    about = _call(w, w["with"], "kb_facts_lookup", {"subject_id": w["zhang"]}).structured_content
    assert about == {"facts": []}


def test_without_the_scope_the_tool_is_refused_with_a_step_up_challenge(w) -> None:
    r = httpx.post(
        w["base"] + "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "kb_facts_lookup", "arguments": {}},
        },
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {w['without']}",
        },
        timeout=30,
    )
    assert r.status_code == 403 and r.json()["error"] == "INSUFFICIENT_SCOPE"
    assert "facts:read" in r.headers["www-authenticate"].split('scope="', 1)[1]
