"""``/mcp`` end to end: the SDK's own client against the live server (docs/mcp.md).

One module-scoped world (its own tenant): an owner with a read+write PAT, a reader with a
read-only PAT, an outsider in the same tenant, a user of another tenant and a tenant admin;
a workspace knowledge base with a handful of pages (indexed synchronously) and a private one.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from sqlalchemy import text
from sqlmodel import Session, select

from openkb.content import Actor
from openkb.content.documents import create_document, update_document
from openkb.content.versions import sha256_hex as sha256
from openkb.db import session_scope
from openkb.indexing import service as indexing
from openkb.models import Tenant
from openkb.permissions import Principal
from openkb.permissions.collaborators import add_collaborator
from openkb.retrieval import forget_active_profile
from openkb.security import hash_token
from tests.api.helpers import ALL_SCOPES, bearer_client, make_user_with_pat
from tests.factories import make_tenant
from tests.mcp.helpers import LEGACY, MODERN, run

READ = ("kb:read", "kb:search", "doc:read")
RW = (*READ, "doc:write", "kb:write")
TOOLS = {
    "kb_search",
    "kb_get_document",
    "kb_get_document_markdown",
    "kb_get_toc",
    "kb_get_document_changes",
    "kb_list_workspaces",
    "kb_list_knowledge_bases",
    "kb_list_documents",
    "kb_list_shared_documents",
}
LONG_MD = (
    "# Intro\n\nzebrafinch opening words.\n\n"
    + "".join(f"## Part {i}\n\n" + " ".join(["lorem ipsum dolor sit amet"] * 20) + "\n\n" for i in range(6)).rstrip()
    + "\n"
)


class World:
    def __init__(self, base: str, engine: Any, ctx: Any) -> None:
        def committed() -> Session:
            return Session(engine, expire_on_commit=False)

        self.base, self.ctx = base, ctx
        with committed() as s:
            tenant, other = make_tenant(s), make_tenant(s)
            s.commit()
        self.tokens: dict[str, str] = {}
        self.users: dict[str, uuid.UUID] = {}
        for name, scopes, t, role in (
            ("owner", RW, tenant, "member"),
            ("reader", READ, tenant, "member"),
            ("outsider", READ, tenant, "member"),
            ("other", READ, other, "member"),
            ("admin", ALL_SCOPES, tenant, "tenant_admin"),
            ("adminonly", ("admin",), tenant, "member"),
        ):
            user, tok = make_user_with_pat(committed, t, scopes=scopes, role=role)
            self.tokens[name], self.users[name] = tok, user.id
        self.http = {n: bearer_client(base, t) for n, t in self.tokens.items()}
        own = self.http["owner"]
        self.ws = own.post("/api/workspaces", json={"name": "MCP space"}).json()
        r = own.post(
            f"/api/workspaces/{self.ws['id']}/members", json={"user_id": str(self.users["reader"]), "role": "member"}
        )
        assert r.status_code == 201, r.text
        self.kb = self.new_kb("workspace")
        self.private_kb = self.new_kb("private")
        self.folder = self.doc("Folder", type="folder")
        self.pages = [self.doc(f"Page {i}", markdown=f"# Page {i}\n\nplain words {i}.\n") for i in range(5)]
        self.child = self.doc("Child", parent_id=self.folder["id"], markdown="# Child\n\nnested.\n")
        self.long = self.doc("Long read", markdown=LONG_MD)
        self.secret = self.doc("Secret plan", kb=self.private_kb, markdown="# Secret\n\nzebrafinch secret.\n")
        with session_scope(engine) as s:
            indexing.ensure_default_profile(ctx, s)
        forget_active_profile()
        with session_scope(engine) as s:
            ids = [d["id"] for d in (*self.pages, self.child, self.long, self.secret)]
            indexing.sync_documents(ctx, s, ids)

    def new_kb(self, visibility: str) -> dict[str, Any]:
        r = self.http["owner"].post(
            "/api/knowledge-bases",
            json={"workspace_id": self.ws["id"], "title": f"KB {visibility}", "visibility": visibility},
        )
        assert r.status_code == 201, r.text
        return r.json()

    def doc(self, title: str, kb: dict[str, Any] | None = None, **body: Any) -> dict[str, Any]:
        r = self.http["owner"].post(
            "/api/documents", json={"knowledge_base_id": (kb or self.kb)["id"], "title": title, **body}
        )
        assert r.status_code == 201, r.text
        return r.json()

    def close(self) -> None:
        for c in self.http.values():
            c.close()


@pytest.fixture(scope="module")
def w(live_server, app_ctx, engine):
    world = World(live_server, engine, app_ctx)
    yield world
    world.close()


def call(w: World, who: str, tool: str, args: dict[str, Any], mode: str = LEGACY) -> Any:
    return run(w.base, w.tokens[who], lambda c: c.call_tool(tool, args), mode)


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: Any) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


def rpc(w: World, token: str | None, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    """A raw JSON-RPC POST (stateless: no initialize needed)."""
    h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **headers}
    if token:
        h["Authorization"] = f"Bearer {token}"
    return httpx.post(
        w.base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=h, timeout=30
    )


# --- listing -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_tools_and_resource_templates_are_listed_per_token(w: World, mode: str) -> None:
    async def listing(c: Any) -> Any:
        return (
            (await c.list_tools()).tools,
            (await c.list_resource_templates()).resource_templates,
            (await c.list_resources()).resources,
        )

    tools, templates, static = run(w.base, w.tokens["owner"], listing, mode)
    assert {t.name for t in tools} == TOOLS | {"kb_upsert_document"}
    for t in tools:
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t.name)
        assert t.description and t.input_schema["type"] == "object" and t.output_schema
        assert t.annotations.read_only_hint is (t.name != "kb_upsert_document")
    assert {t.uri_template for t in templates} == {
        "kb://workspace/{workspace_id}",
        "kb://knowledge-base/{kb_id}",
        "kb://document/{document_id}",
        "kb://document/{document_id}/markdown",
        "kb://document/{document_id}/toc",
    }
    assert static == []  # never a full listing
    tools, _, _ = run(w.base, w.tokens["reader"], listing, mode)
    assert {t.name for t in tools} == TOOLS  # no doc:write, no write tool


# --- every tool, pagination to the end -------------------------------------------------------------


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_every_read_tool_and_pagination_to_the_end(w: World, mode: str) -> None:
    async def go(c: Any) -> None:
        async def tool(name: str, **args: Any) -> dict[str, Any]:
            return ok(await c.call_tool(name, args))

        wss = await tool("kb_list_workspaces")
        assert [x["id"] for x in wss["workspaces"]] == [w.ws["id"]] and wss["next_cursor"] is None
        kbs = await tool("kb_list_knowledge_bases", workspace_id=w.ws["id"], limit=1)
        assert kbs["total"] == 1 and kbs["knowledge_bases"][0]["id"] == w.kb["id"]  # the private one is hidden

        seen, cursor, pages = [], None, 0
        while True:
            page = await tool(
                "kb_list_documents", knowledge_base_id=w.kb["id"], limit=2, **({"cursor": cursor} if cursor else {})
            )
            seen += [d["id"] for d in page["documents"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        tops = [w.folder["id"], *[p["id"] for p in w.pages], w.long["id"]]
        assert seen == tops and pages == 4
        folder = await tool("kb_list_documents", knowledge_base_id=w.kb["id"], parent_id=w.folder["id"])
        assert [d["id"] for d in folder["documents"]] == [w.child["id"]]
        everything = await tool("kb_list_documents", knowledge_base_id=w.kb["id"], recursive=True, limit=200)
        assert [d["id"] for d in everything["documents"]][:2] == [w.folder["id"], w.child["id"]]
        assert everything["total"] == len(tops) + 1

        doc = await tool("kb_get_document", document_id=w.long["id"])
        assert doc["title"] == "Long read" and doc["markdown_chars"] == len(LONG_MD) and doc["url"].startswith("http")
        body, offset = "", 0
        while offset is not None:
            part = await tool("kb_get_document_markdown", document_id=w.long["id"], offset=offset, max_chars=1000)
            assert part["total_chars"] == len(LONG_MD)
            assert part["remaining_chars"] == len(LONG_MD) - offset - part["returned_chars"]
            body += part["markdown"]
            offset = part["next_offset"]
        assert body == LONG_MD

        heads, cursor = [], None
        while True:
            toc = await tool("kb_get_toc", document_id=w.long["id"], limit=3, **({"cursor": cursor} if cursor else {}))
            heads += toc["headings"]
            cursor = toc["next_cursor"]
            if cursor is None:
                break
        assert [h["text"] for h in heads] == ["Intro", *[f"Part {i}" for i in range(6)]]
        part3 = heads[4]
        section = await tool(
            "kb_get_document_markdown", document_id=w.long["id"], offset=part3["offset"], max_chars=part3["chars"]
        )
        assert section["markdown"].startswith("## Part 3\n") and "## Part 4" not in section["markdown"]

        found = await tool("kb_search", query="zebrafinch", top_k=5)
        assert found["degraded"] == []  # fully served: dense and keywords (docs/retrieval.md#degradation)
        hit = next(r for r in found["results"] if r["document_id"] == w.long["id"])
        assert hit["title"] == "Long read" and "zebrafinch" in hit["snippet"]
        assert hit["url"].endswith(f"/docs/{w.long['id']}")

    run(w.base, w.tokens["reader"], go, mode)


def test_resources_read(w: World) -> None:
    async def go(c: Any) -> list[Any]:
        return [
            await c.read_resource(u)
            for u in (
                f"kb://workspace/{w.ws['id']}",
                f"kb://knowledge-base/{w.kb['id']}",
                f"kb://document/{w.long['id']}",
                f"kb://document/{w.long['id']}/markdown",
                f"kb://document/{w.long['id']}/toc",
            )
        ]

    ws, kb, doc, md, toc = (r.contents[0].text for r in run(w.base, w.tokens["reader"], go))
    assert [k["id"] for k in json.loads(ws)["knowledge_bases"]] == [w.kb["id"]]
    assert json.loads(kb)["root_documents_total"] == 7
    assert json.loads(doc)["id"] == w.long["id"] and md == LONG_MD
    assert len(json.loads(toc)["headings"]) == 7


# --- the outsider --------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["outsider", "other"])
def test_another_users_document_is_not_found_in_every_tool_and_resource(w: World, who: str) -> None:
    hidden, missing = w.secret["id"], str(uuid.uuid4())

    async def go(c: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for doc_id in (hidden, missing):
            for name in ("kb_get_document", "kb_get_document_markdown", "kb_get_toc", "kb_get_document_changes"):
                out[(name, doc_id)] = error_text(await c.call_tool(name, {"document_id": doc_id}))
            for kb in (w.private_kb["id"], w.kb["id"]) if doc_id == hidden else (missing,):
                out[("list", kb)] = error_text(await c.call_tool("kb_list_documents", {"knowledge_base_id": kb}))
            for suffix in ("", "/markdown", "/toc"):
                with pytest.raises(MCPError) as e:
                    await c.read_resource(f"kb://document/{doc_id}{suffix}")
                out[("res", suffix, doc_id)] = (e.value.code, str(e.value))
        for uri in (f"kb://knowledge-base/{w.private_kb['id']}", f"kb://workspace/{w.ws['id']}"):
            with pytest.raises(MCPError) as e:
                await c.read_resource(uri)
            out[("res", uri)] = e.value.code
        out["search"] = ok(await c.call_tool("kb_search", {"query": "zebrafinch secret", "top_k": 20}))
        out["kbs"] = ok(await c.call_tool("kb_list_knowledge_bases", {}))
        return out

    out = run(w.base, w.tokens[who], go)
    for name in ("kb_get_document", "kb_get_document_markdown", "kb_get_toc", "kb_get_document_changes"):
        assert out[(name, hidden)] == out[(name, missing)] and "NOT_FOUND: document not found" in out[(name, hidden)]
    assert out[("list", w.private_kb["id"])] == out[("list", missing)] == out[("list", w.kb["id"])]
    for suffix in ("", "/markdown", "/toc"):
        assert out[("res", suffix, hidden)] == out[("res", suffix, missing)]
        assert out[("res", suffix, hidden)][0] == -32002
    assert out[("res", f"kb://knowledge-base/{w.private_kb['id']}")] == -32002
    assert out[("res", f"kb://workspace/{w.ws['id']}")] == -32002
    assert all(r["document_id"] != hidden for r in out["search"]["results"])
    assert out["kbs"]["knowledge_bases"] == []


# --- what changed ---------------------------------------------------------------------------------


def test_document_changes_between_versions_one_range_at_a_time(w: World) -> None:
    own = w.http["owner"]
    page = w.doc("Changing", markdown="# Changing\n\nfirst words.\n")
    for md, title in (("# Changing\n\nsecond words.\n", None), ("# Changing\n\nsecond words.\n\nmore.\n", "Changed")):
        cur = own.get(f"/api/documents/{page['id']}").json()
        body = {"base_version_id": cur["current_version_id"], "markdown": md, "markdown_hash": sha256(md)}
        r = own.post(f"/api/documents/{page['id']}/versions", json=body | ({"title": title} if title else {}))
        assert r.status_code == 201, r.text

    async def go(c: Any) -> list[Any]:
        return [
            await c.call_tool("kb_get_document_changes", {"document_id": page["id"]}),
            await c.call_tool("kb_get_document_changes", {"document_id": page["id"], "from_version": 1}),
            await c.call_tool(
                "kb_get_document_changes", {"document_id": page["id"], "from_version": 1, "offset": 10, "max_chars": 12}
            ),
            await c.call_tool("kb_get_document_changes", {"document_id": page["id"], "from_version": 3}),
            await c.call_tool("kb_get_document_changes", {"document_id": page["id"], "to_version": 9}),
            await c.call_tool("kb_get_document_changes", {"document_id": page["id"], "since": "2000-01-01T00:00:00Z"}),
            await c.call_tool("kb_get_document_changes", {"document_id": page["id"], "since": "2999-01-01T00:00:00Z"}),
        ]

    latest, since_first, part, backwards, missing, since_ever, since_future = run(w.base, w.tokens["reader"], go)
    latest = ok(latest)
    assert latest["from_version"]["version_no"] == 2 and latest["to_version"]["version_no"] == 3
    assert latest["title_changed"] is True and latest["title"] == "Changed"
    assert (latest["added_lines"], latest["removed_lines"], latest["saves"]) == (2, 0, 1)
    assert latest["diff"] == (
        "--- version 2\n+++ version 3\n@@ -1,3 +1,5 @@\n # Changing\n \n second words.\n+\n+more.\n"
    )
    assert latest["next_offset"] is None and latest["total_chars"] == len(latest["diff"])
    assert latest["url"].endswith(f"/docs/{page['id']}")
    whole = ok(since_first)
    assert whole["saves"] == 2 and whole["authors"] == [latest["to_version"]["created_by_name"]]
    assert "-first words.\n+second words.\n" in whole["diff"]
    part = ok(part)
    assert part["diff"] == whole["diff"][10:22] and part["next_offset"] == 22
    assert "VALIDATION_ERROR" in error_text(backwards) and "version 3 is not older than version 3" in error_text(
        backwards
    )
    assert "NOT_FOUND: version 9 of this page not found" in error_text(missing)
    # since a time: from the version current then (none yet: an empty page); nothing since: empty
    ever = ok(since_ever)
    assert ever["from_version"] is None and ever["saves"] == 3 and ever["removed_lines"] == 0
    future = ok(since_future)
    assert (future["saves"], future["diff"], future["to_version"]["version_no"]) == (0, "", 3)


# --- the write tool -------------------------------------------------------------------------------


def test_upsert_document_created_unchanged_updated_and_in_the_change_log(w: World) -> None:
    key = f"mcp-{uuid.uuid4().hex[:6]}"
    args = {"knowledge_base_id": w.kb["id"], "key": key, "title": "From an agent", "markdown": "# Hi\n\nfirst\n"}
    first = ok(call(w, "owner", "kb_upsert_document", args))
    assert first["status"] == "created"
    assert ok(call(w, "owner", "kb_upsert_document", args))["status"] == "unchanged"
    second = ok(call(w, "owner", "kb_upsert_document", {**args, "markdown": "# Hi\n\nsecond\n", "run_id": "sync-1"}))
    assert second["status"] == "updated" and second["document_id"] == first["document_id"]
    bad = error_text(call(w, "owner", "kb_upsert_document", {**args, "markdown": "ok\n\n<script>x</script>\n"}))
    assert bad.startswith("MARKDOWN_DIALECT_ERROR") and '"line": 3' in bad and '"column"' in bad
    audit = (
        w.http["admin"]
        .get("/api/admin/audit-logs", params={"action": "mcp.", "actor_user_id": str(w.users["owner"]), "limit": 200})
        .json()["items"]
    )
    row = next(x for x in audit if x["metadata"].get("run_id") == second["run_id"])
    assert row["metadata"]["tool"] == "kb_upsert_document" and row["metadata"]["client_id"].startswith("pat:")
    changes = w.http["owner"].get("/api/changes", params={"run_id": second["run_id"]}).json()["items"]
    assert [(c["op"], c["object_id"], c["actor_type"]) for c in changes] == [
        ("document.upsert", first["document_id"], "api_key")
    ]
    r = w.http["owner"].post("/api/changes/revert", json={"run_id": second["run_id"]})
    assert r.status_code == 200, r.text
    md = ok(call(w, "owner", "kb_get_document_markdown", {"document_id": first["document_id"]}))["markdown"]
    assert md == "# Hi\n\nfirst\n"


def test_a_token_without_doc_write_cannot_call_the_write_tool(w: World) -> None:
    r = rpc(
        w,
        w.tokens["reader"],
        "tools/call",
        {"name": "kb_upsert_document", "arguments": {"knowledge_base_id": w.kb["id"], "key": "k", "title": "t"}},
    )
    assert r.status_code == 403 and r.json()["error"] == "INSUFFICIENT_SCOPE"
    challenge = r.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and "doc:write" in challenge.split('scope="', 1)[1]


# --- bad input ------------------------------------------------------------------------------------


def test_unknown_tool_is_a_json_rpc_error_and_bad_arguments_name_the_argument(w: World) -> None:
    r = rpc(w, w.tokens["reader"], "tools/call", {"name": "kb_nope", "arguments": {}})
    assert r.status_code == 200 and r.json()["error"]["code"] == -32602 and "kb_nope" in r.json()["error"]["message"]

    async def go(c: Any) -> list[str]:
        with pytest.raises(MCPError):
            await c.call_tool("kb_nope", {})
        return [
            error_text(await c.call_tool("kb_search", a))
            for a in (
                {"query": "x", "top_k": "many"},
                {"query": "x", "topk": 3},
                {"query": "x", "top_k": 1000},
                {"query": "x", "knowledge_base_ids": ["not-a-uuid"]},
            )
        ] + [
            error_text(await c.call_tool("kb_list_documents", {"knowledge_base_id": w.kb["id"], "cursor": "garbage"})),
            error_text(await c.call_tool("kb_get_document_markdown", {"document_id": w.long["id"], "offset": 10**7})),
        ]

    wrong_type, unknown, too_many, bad_uuid, cursor, offset = run(w.base, w.tokens["reader"], go)
    assert "invalid argument top_k" in wrong_type
    assert "unknown argument topk" in unknown
    assert "top_k must be between 1 and 20" in too_many
    assert "knowledge_base_ids" in bad_uuid
    assert '"field": "cursor"' in cursor
    assert '"field": "offset"' in offset


def test_oversized_request_is_413_before_parsing(w: World, app_ctx) -> None:
    before = app_ctx.settings.max_json_body_bytes
    app_ctx.settings.max_json_body_bytes = 2000
    try:
        r = rpc(w, w.tokens["reader"], "tools/call", {"name": "kb_search", "arguments": {"query": "x" * 5000}})
    finally:
        app_ctx.settings.max_json_body_bytes = before
    assert r.status_code == 413 and r.json()["error"] == "PAYLOAD_TOO_LARGE"


# --- credentials ----------------------------------------------------------------------------------


def test_missing_revoked_and_underscoped_tokens_get_the_challenge(w: World, engine) -> None:
    prm = f'resource_metadata="{w.ctx.settings.app_base_url.rstrip("/")}/.well-known/oauth-protected-resource/mcp"'
    r = rpc(w, None, "tools/list", {})
    assert r.status_code == 401 and prm in r.headers["www-authenticate"]
    assert 'scope="kb:read kb:search doc:read"' in r.headers["www-authenticate"]
    meta = httpx.get(w.base + "/.well-known/oauth-protected-resource/mcp", timeout=30)  # what the challenge names
    assert meta.status_code == 200 and meta.json()["resource"] == w.ctx.settings.app_base_url.rstrip("/") + "/mcp"
    assert rpc(w, "kbpat_nonsense", "tools/list", {}).status_code == 401

    _, token = make_user_with_pat(lambda: Session(engine, expire_on_commit=False), scopes=READ)
    assert rpc(w, token, "tools/list", {}).status_code == 200
    with Session(engine) as s:
        s.execute(
            text("UPDATE mcp_personal_access_tokens SET status = 'revoked', revoked_at = now() WHERE token_hash = :h"),
            {"h": hash_token(token)},
        )
        s.commit()
    r = rpc(w, token, "tools/list", {})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    assert prm in r.headers["www-authenticate"]

    r = rpc(w, w.tokens["adminonly"], "tools/list", {})
    assert r.status_code == 403 and 'error="insufficient_scope"' in r.headers["www-authenticate"]
    r = rpc(w, w.tokens["reader"], "tools/list", {}, Host="evil.example.com")
    assert r.status_code == 421
    r = httpx.get(
        w.base + "/mcp",
        headers={"Authorization": f"Bearer {w.tokens['reader']}", "Accept": "text/event-stream"},
        timeout=10,
    )
    assert r.status_code == 405 and r.headers["allow"] == "POST"  # stateless: no stream held open


def test_every_call_is_audited_with_client_query_and_documents(w: World) -> None:
    marker = f"audit{uuid.uuid4().hex[:8]}"
    ok(call(w, "reader", "kb_search", {"query": marker}))
    error_text(call(w, "reader", "kb_get_document", {"document_id": w.secret["id"]}))
    ok(call(w, "reader", "kb_get_document", {"document_id": w.long["id"]}))
    r = w.http["admin"].get(
        "/api/admin/audit-logs", params={"action": "mcp.", "limit": 200, "actor_user_id": str(w.users["reader"])}
    )
    assert r.status_code == 200, r.text
    rows = r.json()["items"]
    search = next(x for x in rows if x["metadata"].get("query") == marker)
    assert search["action"] == "mcp.tool_call" and search["metadata"]["tool"] == "kb_search"
    assert search["metadata"]["client_id"].startswith("pat:") and search["ip"] == "127.0.0.1"
    assert search["user_agent"]
    refused = next(x for x in rows if x["object_id"] == w.secret["id"])
    assert refused["metadata"]["outcome"] == "NOT_FOUND" and refused["metadata"]["document_ids"] == []
    read = next(x for x in rows if x["object_id"] == w.long["id"] and x["metadata"]["tool"] == "kb_get_document")
    assert read["metadata"]["document_ids"] == [w.long["id"]] and read["metadata"]["outcome"] == "ok"


def _oauth_token(w: World, engine: Any, who: str, resource: str, scopes: tuple[str, ...] = READ) -> tuple[str, Any]:
    """An access token as OpenKB's authorization server stores one (client, grant, token rows)."""
    import secrets
    from datetime import timedelta

    from openkb.models import McpOAuthAccessToken, McpOAuthClient, McpOAuthGrant, TenantMembership
    from openkb.models._base import utcnow

    plain = "kbat_" + secrets.token_urlsafe(32)
    with Session(engine, expire_on_commit=False) as s:
        tid = s.exec(select(TenantMembership.tenant_id).where(TenantMembership.user_id == w.users[who])).one()
        client = McpOAuthClient(
            tenant_id=tid,
            client_id=f"https://client.example/{uuid.uuid4().hex[:6]}",
            client_name="Test IDE",
            redirect_uris=["http://127.0.0.1/cb"],
            allowed_scopes=list(scopes),
            status="active",
        )
        s.add(client)
        s.flush()
        grant = McpOAuthGrant(
            tenant_id=tid, user_id=w.users[who], client_id=client.id, scopes=list(scopes), status="active"
        )
        s.add(grant)
        s.flush()
        s.add(
            McpOAuthAccessToken(
                tenant_id=tid,
                grant_id=grant.id,
                token_hash=hash_token(plain),
                scopes=list(scopes),
                resource=resource,
                expires_at=utcnow() + timedelta(minutes=10),
            )
        )
        s.commit()
    return plain, grant


def test_an_oauth_token_for_this_resource_works_until_its_grant_is_revoked(w: World, engine) -> None:
    resource = w.ctx.settings.app_base_url.rstrip("/") + "/mcp"
    token, grant = _oauth_token(w, engine, "reader", resource)

    async def go(c: Any) -> Any:
        return {t.name for t in (await c.list_tools()).tools}, ok(
            await c.call_tool("kb_get_document", {"document_id": w.long["id"]})
        )

    names, doc = run(w.base, token, go, MODERN)
    assert names == TOOLS and doc["id"] == w.long["id"]
    rows = (
        w.http["admin"]
        .get("/api/admin/audit-logs", params={"action": "mcp.", "actor_user_id": str(w.users["reader"]), "limit": 200})
        .json()["items"]
    )
    assert any(
        x["metadata"]["credential"] == "oauth"
        and x["metadata"]["credential_id"] == str(grant.id)
        and x["metadata"]["client_id"].startswith("https://client.example/")
        for x in rows
    )
    other, _ = _oauth_token(w, engine, "reader", "https://elsewhere.example/mcp")
    r = rpc(w, other, "tools/list", {})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    with Session(engine) as s:
        s.execute(
            text("UPDATE mcp_oauth_grants SET status = 'revoked', revoked_at = now() WHERE id = :g"), {"g": grant.id}
        )
        s.commit()
    assert rpc(w, token, "tools/list", {}).status_code == 401


def test_documents_shared_with_the_user(w: World) -> None:
    """kb_list_shared_documents: the page the owner shared with the outsider (a private knowledge
    base, a custom page) for the outsider alone, with role and sharer; readable through
    kb_get_document; nothing for the reader or another tenant's user."""
    own = w.http["owner"]
    page = w.secret
    assert own.put(f"/api/documents/{page['id']}", json={"permission_mode": "custom"}).status_code == 200
    r = own.post(
        f"/api/objects/document/{page['id']}/collaborators",
        json={"subject_id": str(w.users["outsider"]), "role": "viewer"},
    )
    assert r.status_code == 201, r.text
    got = ok(call(w, "outsider", "kb_list_shared_documents", {}))
    assert got["total"] == 1 and got["next_cursor"] is None
    (item,) = got["documents"]
    assert (item["id"], item["title"], item["role"], item["type"]) == (page["id"], "Secret plan", "viewer", "page")
    assert item["knowledge_base_id"] == w.private_kb["id"] and item["shared_by"] and item["url"].endswith(page["id"])
    assert ok(call(w, "outsider", "kb_get_document", {"document_id": page["id"]}))["title"] == "Secret plan"
    for who in ("reader", "other", "owner"):
        assert ok(call(w, who, "kb_list_shared_documents", {}))["documents"] == [], who


# --- inputs PostgreSQL cannot take, listings past their first hundred ----------------------------


@pytest.mark.parametrize(
    "filters,field",
    [
        ({"tags": ["ok", "bad\x00tag"]}, "filters.tags"),
        ({"tags": ["\ud83d"]}, "filters.tags"),
        ({"metadata": {"lang": "e\x00n"}}, "filters.metadata"),
        ({"metadata": {"owner": {"team": ["ml", "x\x00"]}}}, "filters.metadata"),
        ({"metadata": {"k\x00ey": 1}}, "filters.metadata"),
        ({"metadata": {"lang": "\udc00"}}, "filters.metadata"),
    ],
    ids=["nul-tag", "surrogate-tag", "nul-value", "nul-nested", "nul-key", "surrogate-value"],
)
def test_search_filters_with_nul_or_lone_surrogate_are_a_validation_error(
    w: World, filters: dict[str, Any], field: str, request: pytest.FixtureRequest
) -> None:
    """kb_search and POST /api/search share the filters: a NUL or a lone surrogate is the
    caller's mistake (VALIDATION_ERROR naming the field, audited as such), not a server error."""
    # sent as \u escapes (the SDK's client cannot encode a lone surrogate at all)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "kb_search", "arguments": {"query": "plain", "filters": filters}}
    r = httpx.post(
        w.base + "/mcp",
        content=json.dumps(body),
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {w.tokens['reader']}",
        },
        timeout=30,
    )
    if "surrogate" in request.node.callspec.id:  # MCP's JSON parser refuses these before any tool
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700, r.text
    else:
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        text_ = result["content"][0]["text"]
        assert result["isError"] and text_.startswith("VALIDATION_ERROR") and f'"field": "{field}"' in text_, text_
    r = w.http["reader"].post(
        "/api/search",
        content=json.dumps({"query": "plain", "filters": filters}),  # \u escapes, as a client sends them
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "VALIDATION_ERROR" and r.json()["field"] == field, r.json()
    rows = (
        w.http["admin"]
        .get("/api/admin/audit-logs", params={"action": "mcp.", "limit": 20, "actor_user_id": str(w.users["reader"])})
        .json()["items"]
    )
    if "surrogate" not in request.node.callspec.id:
        last = next(x for x in rows if x["metadata"].get("tool") == "kb_search")
        assert last["metadata"]["outcome"] == "VALIDATION_ERROR"


def test_document_changes_version_past_postgres_integer_is_an_argument_error(w: World) -> None:
    for arg in ("to_version", "from_version"):
        text_ = error_text(call(w, "reader", "kb_get_document_changes", {"document_id": w.long["id"], arg: 2**31}))
        assert f"invalid argument {arg}" in text_ and "2147483647" in text_, text_
    # the largest one is an ordinary "no such version"
    text_ = error_text(
        call(w, "reader", "kb_get_document_changes", {"document_id": w.long["id"], "to_version": 2**31 - 1})
    )
    assert "INTERNAL" not in text_ and "out of range" not in text_, text_


def test_knowledge_bases_of_a_hidden_or_missing_workspace_are_not_found(w: World, engine) -> None:
    """workspace_id of a workspace the user cannot see answers exactly like one that does not
    exist; a member of an empty workspace gets an empty list; a knowledge base shared with a
    non-member is listed for them under its workspace."""
    hidden = error_text(call(w, "outsider", "kb_list_knowledge_bases", {"workspace_id": w.ws["id"]}))
    missing_id = str(uuid.uuid4())
    missing = error_text(call(w, "outsider", "kb_list_knowledge_bases", {"workspace_id": missing_id}))
    assert hidden.startswith("NOT_FOUND") and missing.replace(missing_id, w.ws["id"]) == hidden
    assert error_text(call(w, "other", "kb_list_knowledge_bases", {"workspace_id": w.ws["id"]})) == hidden
    empty = w.http["owner"].post("/api/workspaces", json={"name": "Empty space"}).json()
    got = ok(call(w, "owner", "kb_list_knowledge_bases", {"workspace_id": empty["id"]}))
    assert got["knowledge_bases"] == [] and got["total"] == 0
    got = ok(call(w, "reader", "kb_list_knowledge_bases", {"workspace_id": w.ws["id"]}))
    assert w.kb["id"] in {k["id"] for k in got["knowledge_bases"]}
    shared = w.new_kb("private")
    r = w.http["owner"].post(
        f"/api/objects/knowledge_base/{shared['id']}/collaborators",
        json={"subject_id": str(w.users["outsider"]), "role": "viewer"},
    )
    assert r.status_code == 201, r.text
    got = ok(call(w, "outsider", "kb_list_knowledge_bases", {"workspace_id": w.ws["id"]}))
    assert [k["id"] for k in got["knowledge_bases"]] == [shared["id"]]


def test_shared_documents_page_past_the_first_hundred(w: World, engine) -> None:
    """103 pages shared with one user: paging with limit 50 reaches all 103, total says 103."""

    def committed() -> Session:
        return Session(engine, expire_on_commit=False)

    with committed() as s:
        tenant_id = s.execute(
            text("SELECT tenant_id FROM tenant_memberships WHERE user_id = :u"), {"u": w.users["owner"]}
        ).scalar_one()
        tenant = s.get(Tenant, tenant_id)
    user, token = make_user_with_pat(committed, tenant, scopes=READ)
    owner = Principal.user(w.users["owner"], tenant_id)
    ids = []
    with session_scope(engine) as s:
        for i in range(103):
            doc = create_document(
                s, Actor.of(owner), knowledge_base_id=uuid.UUID(w.private_kb["id"]), title=f"Shared {i}", type="folder"
            )[0]
            update_document(s, Actor.of(owner), doc.id, {"permission_mode": "custom"})
            add_collaborator(s, owner, doc, subject_type="user", subject_id=user.id, role="viewer")
            ids.append(str(doc.id))
    seen: list[str] = []
    cursor = None
    while True:
        args: dict[str, Any] = {"limit": 50, **({"cursor": cursor} if cursor else {})}
        got = run(w.base, token, lambda c, a=args: c.call_tool("kb_list_shared_documents", a))
        page = ok(got)
        assert page["total"] == 103
        seen += [d["id"] for d in page["documents"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 103 and set(seen) == set(ids)
