"""Version history in the web app (docs/web.md#version-history): a version shows what changed
from the one before it (the changed words marked inside a changed line, unchanged stretches
folded), what changed since it up to the current version, or its full text; older versions load a
page at a time (the conflict dialog's differences: tests/web/test_browser.py)."""

from __future__ import annotations

import hashlib
import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sa_text
from sqlmodel import Session

from tests.web.test_browser import api, autosaved, editor, new_page, owner, sign_in, type_at_end  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def _save(c, doc_id: str, markdown: str, title: str | None = None) -> None:
    base = c.get(f"/api/documents/{doc_id}").json()["current_version_id"]
    body = {
        "base_version_id": base,
        "markdown": markdown,
        "markdown_hash": hashlib.sha256(markdown.encode()).hexdigest(),
    }
    if title is not None:
        body["title"] = title
    r = c.post(f"/api/documents/{doc_id}/versions", json=body)
    assert r.status_code == 201, r.text


def _history(page):
    page.get_by_role("button", name="More").click()
    page.get_by_role("menuitem", name="Version history").click()
    return page.get_by_role("dialog", name="Version history")


def _saves(dialog, first: int, last: int):
    """The rows of the versions of one sitting (saves a moment apart), opened from its row."""
    dialog.locator(".history > ul > li").filter(has_text=f"Versions {first}–{last}").get_by_role(
        "button", name="Each save"
    ).click()
    return dialog.get_by_role("list", name=f"Saves of versions {first}–{last}").get_by_role("listitem")


def _version(rows, no: int):
    return rows.filter(has_text=re.compile(rf"^Version {no}(?!\d)"))


def test_a_version_shows_what_changed_word_by_word(contexts, live_server, owner):  # noqa: F811
    filler = "".join(f"Unchanged line {n}.\n\n" for n in range(1, 13))
    first = f"# Plan\n\nWe ship the release on Monday after the review.\n\n{filler}Last words.\n"
    second = first.replace("on Monday", "on Thursday")
    third = second.replace("Last words.\n", "Last words.\n\n新的一段 added at the end.\n")
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Release plan", first)
        _save(c, doc["id"], second)
        _save(c, doc["id"], third, title="Release plan v2")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    expect(editor(page)).to_contain_text("新的一段")
    dialog = _history(page)
    saves = _saves(dialog, 1, 3)
    _version(saves, 2).get_by_role("button", name="View").click()

    shown = dialog.get_by_role("region", name="Version 2")
    # from the version before: the paragraph is one line, and only its changed word is marked
    changes = shown.get_by_role("region", name="Changes from version 1 to version 2")
    expect(changes).to_contain_text("1 line added, 1 removed")
    expect(changes.locator("tr.del mark")).to_have_text(["Monday"])
    expect(changes.locator("tr.add mark")).to_have_text(["Thursday"])
    expect(changes.locator("tr.del td.line")).to_have_text(["removed: We ship the release on Monday after the review."])
    # three unchanged lines kept on each side, the rest folded into one row
    expect(changes.locator("tr.fold")).to_have_text(["23 unchanged lines"])
    expect(changes.locator("tr.fold")).to_be_in_viewport()  # a row of the table, not moved off screen
    expect(changes.locator("tr.same")).to_have_count(5)  # two above (the first lines), three below
    expect(shown.get_by_role("button", name="Changes from the version before")).to_have_attribute(
        "aria-pressed", "true"
    )

    # since this version, up to the current one: the title change and the added paragraph
    shown.get_by_role("button", name="Changes since, up to the current version").click()
    since = shown.get_by_role("region", name="Changes from version 2 to version 3")
    expect(since.locator(".title-change")).to_have_text("Title: Release plan → Release plan v2")
    expect(since).to_contain_text("2 lines added, 0 removed")
    expect(since.locator("tr.add td.line")).to_have_text(["added:", "added: 新的一段 added at the end."])

    shown.get_by_role("button", name="Full text").click()
    expect(shown.locator("pre")).to_contain_text("on Thursday after the review")
    expect(shown.locator("table")).to_have_count(0)

    # the first version has no version before it: its full text, and no such choice
    _version(saves, 1).get_by_role("button", name="View").click()
    first_shown = dialog.get_by_role("region", name="Version 1")
    expect(first_shown.locator("pre")).to_contain_text("on Monday")
    expect(first_shown.get_by_role("button", name="Changes from the version before")).to_have_count(0)


def test_saves_of_one_sitting_are_one_row_showing_their_changes(contexts, live_server, owner, engine):  # noqa: F811
    """Saves by one person less than 10 minutes apart are one row; viewing it compares its last
    version with the version before its first (docs/web.md#version-history)."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Sittings", "Intro.\n")
        with Session(engine) as s:  # the page was written an hour ago
            s.execute(
                sa_text(
                    "UPDATE document_versions SET created_at = created_at - interval '1 hour' WHERE document_id = :d"
                ),
                {"d": doc["id"]},
            )
            s.commit()
        _save(c, doc["id"], "Intro.\n\nFirst point.\n")
        _save(c, doc["id"], "Intro.\n\nFirst point.\n\nSecond point.\n")
        name = c.get("/api/auth/me").json()["user"]["display_name"]
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    expect(editor(page)).to_contain_text("Second point")
    dialog = _history(page)
    rows = dialog.locator(".history > ul > li")
    expect(rows).to_have_text(
        [
            re.compile(rf"^Versions 2–3 · current {re.escape(name)} · .+ – .+ · 2 saves View\s*Each save$"),
            re.compile(rf"^Version 1 {re.escape(name)} · .+ · 7 characters View\s*Restore$"),
        ]
    )
    rows.first.get_by_role("button", name="View").click()
    shown = dialog.get_by_role("region", name="Version 3")
    expect(shown.get_by_role("button", name="Changes in these 2 saves")).to_have_attribute("aria-pressed", "true")
    changes = shown.get_by_role("region", name="Changes from version 1 to version 3")
    expect(changes).to_contain_text("4 lines added, 0 removed")
    expect(changes.locator("tr.add td.line")).to_have_text(
        ["added:", "added: First point.", "added:", "added: Second point."]
    )
    expect(rows.first).to_have_attribute("aria-current", "true")
    # one save of the sitting, viewed alone, compares with the save before it
    _version(_saves(dialog, 2, 3), 3).get_by_role("button", name="View").click()
    expect(shown.get_by_role("region", name="Changes from version 2 to version 3")).to_contain_text(
        "2 lines added, 0 removed"
    )


def test_older_versions_load_a_page_at_a_time(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Busy page", "edit 1\n")
        for n in range(2, 56):
            _save(c, doc["id"], f"edit {n}\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    expect(editor(page)).to_contain_text("edit 55")
    dialog = _history(page)
    # 55 saves a moment apart: one sitting, of which the first page of the history holds 50
    expect(dialog.locator(".history > ul > li")).to_have_count(1)
    items = _saves(dialog, 6, 55)
    expect(items).to_have_count(50)
    expect(items.last).to_contain_text("Version 6")
    dialog.get_by_role("button", name="Show older versions").click()
    # the older page joins the same sitting, which stays open
    items = dialog.get_by_role("list", name="Saves of versions 1–55").get_by_role("listitem")
    expect(items).to_have_count(55)
    expect(items.last).to_contain_text("Version 1")
    expect(dialog.get_by_role("button", name="Show older versions")).to_have_count(0)
    # an older version loaded this way compares with the one before it like any other
    _version(items, 3).get_by_role("button", name="View").click()
    changes = dialog.get_by_role("region", name="Changes from version 2 to version 3")
    expect(changes.locator("tr.del td.line")).to_have_text(["removed: edit 2"])
    expect(changes.locator("tr.add td.line")).to_have_text(["added: edit 3"])


def test_the_history_knows_the_version_the_editor_just_saved(contexts, live_server, owner):  # noqa: F811
    """The page was opened at version 1 and the editor saved version 2 since: the history marks
    version 2 current (it offers no Restore of it), and "since" compares with it."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Typed", "Typed at first.\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    editor(page)
    autosaved(page, type_at_end(page, " Then more."))
    dialog = _history(page)
    saves = _saves(dialog, 1, 2)
    expect(saves).to_have_text(
        [re.compile(r"^Version 2 · current .+ View$"), re.compile(r"^Version 1 .+ View\s*Restore$")]
    )
    _version(saves, 1).get_by_role("button", name="View").click()
    dialog.get_by_role("button", name="Changes since, up to the current version").click()
    since = dialog.get_by_role("region", name="Changes from version 1 to version 2")
    expect(since.locator("tr.add mark")).to_have_text([" Then more."])


def test_too_many_changes_show_the_full_text(contexts, live_server, owner):  # noqa: F811
    """Past 5,000 changed lines the comparison gives up at once and says so (docs/web.md#version-history)."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Rewritten", "".join(f"old line {n}\n\n" for n in range(3000)))
        _save(c, doc["id"], "".join(f"new line {n}\n\n" for n in range(3000)))
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    expect(editor(page)).to_contain_text("new line 0")
    dialog = _history(page)
    _version(_saves(dialog, 1, 2), 2).get_by_role("button", name="View").click()
    changes = dialog.get_by_role("region", name="Changes from version 1 to version 2")
    expect(changes).to_contain_text("Too many changes to show line by line; the full text follows.")
    expect(changes.locator("pre")).to_contain_text("new line 2999")
    expect(changes.locator("table")).to_have_count(0)


def test_restoring_right_after_typing_keeps_the_typed_words_in_the_history(contexts, live_server, owner):  # noqa: F811
    """Words typed less than the autosave pause before *Restore* are saved first (the history
    keeps them under the restored version); before, the restore replaced them unsaved."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Restored soon", "First text.\n")
        _save(c, doc["id"], "Second text.\n")
    page = contexts.page()
    asked: list[str] = []
    page.on("dialog", lambda d: (asked.append(d.message), d.accept()))
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    expect(editor(page)).to_contain_text("Second text.")
    type_at_end(page, " Typed just now.")
    dialog = _history(page)
    _version(_saves(dialog, 1, 2), 1).get_by_role("button", name="Restore").click()
    expect(dialog).to_have_count(0)
    expect(editor(page)).to_have_text("First text.")
    assert asked == []  # saved, nothing to ask
    with api(live_server, owner) as c:
        items = c.get(f"/api/documents/{doc['id']}/versions").json()["items"]
        texts = [c.get(f"/api/documents/{doc['id']}/versions/{v['id']}").json()["markdown"] for v in items]
    assert texts == ["First text.\n", "Second text. Typed just now.\n", "Second text.\n", "First text.\n"]
