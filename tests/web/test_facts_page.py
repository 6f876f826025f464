"""Facts and contacts in the account area, in a real browser (docs/facts.md#the-users-page): an
installed app's card lists the facts about you its strings cover (core ones by name, the app's
own with "added by this app"); a value set there is user-said, so the app's own write on that
one-value predicate is a conflict; the contacts page merges and deletes entities."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from openkb.apps import registry
from openkb.apps.client import KnowledgeClient
from openkb.bootstrap import default_tenant
from openkb.permissions import Principal
from tests.api.helpers import make_login_user
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow

PERMS = [
    "facts.read:self:location.home.*",
    "facts.write:self:location.home.*",
    "facts.read:self:pref.food.*",
    "facts.write:self:pref.food.*",
    "entities.write:person",
]
RATED = {"predicate": "pref.food.rated", "cardinality": "many", "description": "Dishes you rated highly", "aliases": []}


def test_facts_in_the_app_card_and_the_contacts_page(contexts, live_server, committed):
    acct = make_login_user(committed)
    with committed() as s:
        user = Principal.user(acct.user_id, default_tenant(s).id)
        app = registry.register_app(s, user, name=f"home-{acct.user_id.hex[:6]}", permissions=PERMS, predicates=[RATED])
        done = registry.install_app(s, user, app.id)
        for p in PERMS:
            registry.set_grant(s, user, done.installation.id, p, True)
        s.commit()
    kb = KnowledgeClient(live_server, done.credential)
    assert kb.facts.put(predicate_hint="pref.food.rated", value="Stamppot")["status"] == "applied"
    page = contexts.page()
    sign_in(page, acct.email)
    page.goto("/app/account/apps")
    facts = page.get_by_role("region", name="Facts about you")
    expect(facts).to_contain_text("home city")
    expect(facts).to_contain_text("added by this app")
    expect(facts).to_contain_text("Stamppot")
    with page.expect_response(lambda r: r.url.endswith("/api/apps/v1/facts") and r.request.method == "POST") as put:
        facts.get_by_label("home city").fill("Utrecht")
        facts.get_by_label("home city").press("Enter")
    assert put.value.ok
    expect(facts).to_contain_text("Utrecht (you)")
    assert kb.profile.get("location.home") == [{"predicate": "location.home.city", "value": "Utrecht"}]
    assert kb.facts.put(predicate_hint="location.home.city", value="Delft")["status"] == "conflict"
    facts.get_by_role("button", name="Delete home city: Utrecht").click()
    expect(facts).not_to_contain_text("Utrecht")
    assert kb.profile.get("location.home") == []

    a = kb.entities.resolve({"email": "zhangsan@acme.nl", "name": "张三"}, create=True)
    b = kb.entities.resolve({"phone": "+31 6 1234 5678"}, create=True, display_name="Zhang San")
    assert a and b
    page.goto("/app/account")
    page.get_by_role("link", name="Contacts and places").click()

    def row(name: str):  # noqa: ANN202
        return page.get_by_role("row").filter(has=page.get_by_role("cell", name=name, exact=True))

    expect(row("张三")).to_be_visible()
    page.get_by_label("Merge Zhang San into").select_option(label="张三")
    row("Zhang San").get_by_role("button", name="Merge into").click()
    expect(row("Zhang San")).to_have_count(0)
    expect(row("张三")).to_contain_text("+31 6 1234 5678")  # its identifiers moved to the survivor
    page.get_by_role("button", name="Delete 张三").click()
    expect(page.get_by_text("No contacts yet.")).to_be_visible()
