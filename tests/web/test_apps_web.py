"""Issue 18's pieces of the web app in a real browser (docs/apps.md, docs/web.md#my-account):
an installation's OAuth client on /app/account/apps, the time zone on the profile, and an
app's index-only document opening read-only with a safe link to its original."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sa_text
from sqlmodel import select

from openkb.apps import registry
from openkb.apps.client import KnowledgeClient
from openkb.bootstrap import default_tenant
from openkb.models import Document
from openkb.permissions import Principal
from tests.api.helpers import login, make_login_user
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def _installed(committed, acct, *, perms: list[str], on: bool = False, hosts: list[str] | None = None):
    with committed() as s:
        user = Principal.user(acct.user_id, default_tenant(s).id)
        app = registry.register_app(
            s, user, name=f"tool-{acct.user_id.hex[:6]}", description="a small tool", permissions=perms, hosts=hosts
        )
        done = registry.install_app(s, user, app.id)
        for p in perms if on else []:
            registry.set_grant(s, user, done.installation.id, p, True)
        s.commit()
        return done.installation.id, done.credential


def test_the_owner_creates_and_replaces_the_oauth_client(contexts, live_server, committed):
    acct = make_login_user(committed)
    inst_id, _ = _installed(committed, acct, perms=["collections.read:keep"])
    page = contexts.page()
    sign_in(page, acct.email, next_path="/app/account/apps")
    box = page.get_by_role("region", name="OAuth client")
    expect(box).to_contain_text("No OAuth client")
    box.get_by_label("Redirect URIs (one per line)").fill("https://tool.example.org/callback\n")
    with page.expect_response(lambda r: r.url.endswith("/oauth-client") and r.request.method == "PUT") as put:
        box.get_by_role("button", name="Create OAuth client").click()
    assert put.value.status == 200, put.value.text()
    client_id = put.value.json()["client_id"]
    expect(box.get_by_text(client_id)).to_be_visible()
    expect(box.get_by_label("Redirect URIs (one per line)")).to_have_value("https://tool.example.org/callback")

    box.get_by_label("Redirect URIs (one per line)").fill("http://127.0.0.1:8765/cb\nhttps://tool.example.org/v2")
    with page.expect_response(lambda r: r.url.endswith("/oauth-client") and r.request.method == "PUT") as put:
        box.get_by_role("button", name="Replace redirect URIs").click()
    assert put.value.status == 200, put.value.text()
    with login(live_server, acct.email) as c:
        got = c.get(f"/api/apps/v1/installations/{inst_id}/oauth-client").json()
    assert got["client_id"] == client_id  # replaced, not a new client
    assert got["redirect_uris"] == ["http://127.0.0.1:8765/cb", "https://tool.example.org/v2"]


def test_profile_time_zone_refuses_an_unknown_name_and_offers_the_browsers(contexts, live_server, committed):
    acct = make_login_user(committed)
    ctx = contexts.browser.new_context(base_url=live_server, locale="en-US", timezone_id="Asia/Shanghai")
    contexts.opened.append(ctx)
    page = ctx.new_page()
    contexts.watch(page)
    sign_in(page, acct.email, next_path="/app/account")
    zone = page.get_by_label("Time zone")
    expect(zone).to_have_value("")  # unset: UTC
    zone.fill("Mars/Olympus_Mons")
    with page.expect_response(lambda r: r.url.endswith("/api/me/profile")) as put:
        page.get_by_role("button", name="Save", exact=True).click()
    assert put.value.status == 422
    expect(page.locator("#profile-zone-error")).to_contain_text("unknown time zone")
    expect(zone).to_have_attribute("aria-invalid", "true")

    page.get_by_role("button", name="Use this browser’s time zone (Asia/Shanghai)").click()
    expect(zone).to_have_value("Asia/Shanghai")
    with page.expect_response(lambda r: r.url.endswith("/api/me/profile")) as put:
        page.get_by_role("button", name="Save", exact=True).click()
    assert put.value.status == 200, put.value.text()
    with login(live_server, acct.email) as c:
        assert c.get("/api/auth/me").json()["user"]["time_zone"] == "Asia/Shanghai"


def test_an_index_only_document_opens_read_only_with_its_source(contexts, live_server, committed, engine):
    acct = make_login_user(committed)
    _, credential = _installed(committed, acct, perms=["collections.write:keep"], on=True, hosts=["example.org"])
    with KnowledgeClient(live_server, credential) as kb:
        kb.documents.upsert(
            collection="keep", key="scraped", title="Scraped page", text="<b>hello</b> costs $5",
            source_uri="https://example.org/a?b=1",
        )  # fmt: skip
    with committed() as s:
        doc = s.exec(
            select(Document).where(Document.title == "Scraped page", Document.created_by == acct.user_id)
        ).one()
        path = f"/app/kb/{doc.knowledge_base_id}/docs/{doc.id}"
    page = contexts.page()
    sign_in(page, acct.email, next_path=path)
    surface = page.locator(".editor[data-ready='true'] .ProseMirror")
    expect(surface).to_contain_text("<b>hello</b> costs $5")  # the text itself, not HTML or a formula
    expect(surface).to_have_attribute("contenteditable", "false")
    expect(page.get_by_role("button", name="Edit")).to_have_count(0)
    expect(page.get_by_role("button", name="Source")).to_have_count(0)
    expect(page.get_by_role("status")).to_have_count(0)  # no autosave state
    link = page.get_by_role("link", name="https://example.org/a?b=1")
    expect(link).to_have_attribute("href", "https://example.org/a?b=1")
    expect(link).to_have_attribute("rel", re.compile("noopener"))

    # a source that is not http(s) is never made a link (set behind the API's back)
    with engine.begin() as conn:
        conn.execute(
            sa_text(
                "UPDATE documents SET metadata = jsonb_set(metadata, '{sourceUri}', '\"javascript:alert(1)\"') WHERE id = :i"
            ),
            {"i": str(doc.id)},
        )
    page.reload()
    expect(page.locator("[data-index-only]")).to_contain_text("javascript:alert(1)")
    expect(page.locator("[data-index-only] a")).to_have_count(0)
