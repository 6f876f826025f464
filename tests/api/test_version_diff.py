"""``GET /api/documents/{id}/diff`` (docs/api.md#comparing-versions): what changed between two
versions of a page, for anyone who may read it; refused with a code for everything else."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from openkb.content import compare
from tests.content.http_world import OUTSIDERS


def _diff(c, doc, **params):
    return c.get(f"/api/documents/{doc['id']}/diff", params=params)


def test_a_reader_sees_what_changed_and_who_saved_it(w):
    page = w.doc("Runbook", markdown="# Runbook\n\nRestart the service.\n")
    assert w.save(page, "# Runbook\n\nRestart the service, then check the logs.\n").status_code == 201
    page = w.c["owner"].get(f"/api/documents/{page['id']}").json()
    r = w.save(
        page, "# Runbook\n\nRestart the service, then check the logs.\n\nCall the on-call.\n", title="Runbook v2"
    )
    assert r.status_code == 201, r.text

    r = _diff(w.c["member"], page)  # a workspace member reads the knowledge base
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["from_version"]["version_no"] == 2 and got["to_version"]["version_no"] == 3
    assert got["title"] == "Runbook v2" and got["title_changed"] is True
    assert (got["saves"], got["added_lines"], got["removed_lines"]) == (1, 2, 0)
    assert got["diff"] == (
        "--- version 2\n+++ version 3\n@@ -1,3 +1,5 @@\n # Runbook\n \n Restart the service, then check the logs.\n"
        "+\n+Call the on-call.\n"
    )
    owner_name = got["to_version"]["created_by_name"]
    assert owner_name and got["authors"] == [owner_name]
    assert got["knowledge_base_id"] == w.kb["id"]

    got = _diff(w.c["member"], page, from_no=1).json()
    assert got["saves"] == 2 and got["from_version"]["title"] == "Runbook"
    assert "-Restart the service.\n+Restart the service, then check the logs.\n" in got["diff"]

    got = _diff(w.c["member"], page, from_no=0, to_no=1).json()  # version 1 against an empty page
    assert got["from_version"] is None and got["removed_lines"] == 0 and got["added_lines"] == 3
    assert got["diff"].startswith("--- (empty)\n+++ version 1\n@@ -0,0 +1,3 @@\n+# Runbook\n")

    same = _diff(w.c["member"], page, from_no=2, to_no=2)
    assert same.status_code == 422 and same.json()["error"] == "VALIDATION_ERROR"
    assert same.json()["detail"] == "version 2 is not older than version 2"


def test_since_a_time_needs_no_version_numbers(w, committed):
    page = w.doc("Weekly notes", markdown="Monday.\n")
    for md in ("Monday.\n\nTuesday.\n", "Monday.\n\nTuesday.\n\nWednesday.\n"):
        cur = w.c["owner"].get(f"/api/documents/{page['id']}").json()
        assert w.save(cur, md).status_code == 201
    with committed() as s:  # saved on three days
        s.execute(
            text(
                "UPDATE document_versions SET created_at = TIMESTAMPTZ '2026-11-30 09:00:00+00' + (version_no - 1) "
                "* interval '1 day' WHERE document_id = :d"
            ),
            {"d": page["id"]},
        )
        s.commit()
    owner = w.c["owner"]
    got = _diff(owner, page, since="2026-11-30T12:00:00Z").json()  # the version of that moment: 1
    assert got["from_version"]["version_no"] == 1 and got["saves"] == 2
    assert got["diff"] == "--- version 1\n+++ version 3\n@@ -1 +1,5 @@\n Monday.\n+\n+Tuesday.\n+\n+Wednesday.\n"
    got = _diff(owner, page, since="2026-12-01T09:00:00").json()  # no zone: UTC; version 2 saved then
    assert got["from_version"]["version_no"] == 2 and got["saves"] == 1
    got = _diff(owner, page, since="2026-11-01T00:00:00Z").json()  # before the page: from an empty page
    assert got["from_version"] is None and got["saves"] == 3 and got["added_lines"] == 5
    got = _diff(owner, page, since="2026-12-03T00:00:00Z").json()  # nothing saved since
    assert (got["saves"], got["diff"], got["from_version"]["version_no"], got["to_version"]["version_no"]) == (
        0,
        "",
        3,
        3,
    )
    r = _diff(owner, page, since="2026-11-30T12:00:00Z", from_no=1)
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (422, "VALIDATION_ERROR", "since")
    r = _diff(owner, page, since="last monday")
    assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR")


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"to_no": 9}, 404, "NOT_FOUND"),
        ({"from_no": -1}, 422, "VALIDATION_ERROR"),
        ({"to_no": 0}, 422, "VALIDATION_ERROR"),
        ({"from_no": "two"}, 422, "VALIDATION_ERROR"),
    ],
)
def test_bad_versions_get_a_code(w, params, status, code):
    page = w.doc("Two versions", markdown="one\n")
    assert w.save(page, "two\n").status_code == 201
    r = _diff(w.c["owner"], page, **params)
    assert (r.status_code, r.json()["error"]) == (status, code), r.text


def test_a_folder_has_nothing_to_compare(w):
    folder = w.doc("Shelf", type="folder")
    r = _diff(w.c["owner"], folder)
    assert (r.status_code, r.json()["error"]) == (422, "NOT_A_PAGE")


def test_too_many_changes_are_refused_with_their_code(w, monkeypatch):
    page = w.doc("Repetitive", markdown="".join(f"{'ab'[i % 2]}\n\n" for i in range(20)))
    assert w.save(page, "".join(f"{'ba'[i % 3 % 2]}\n\n" for i in range(21))).status_code == 201
    monkeypatch.setattr(compare, "MAX_LINE_PAIRS", 100)
    r = _diff(w.c["owner"], page)
    assert r.status_code == 422 and r.json()["error"] == "TOO_MANY_CHANGES", r.text
    assert len(r.json()["lines"]) == 2


def test_outsiders_get_404_as_for_a_missing_page(w):
    kb = w.new_kb(visibility="private")
    page = w.doc("Private plan", kb=kb, markdown="secret one\n")
    assert w.save(page, "secret two\n").status_code == 201
    for name in (*OUTSIDERS, "member"):  # a member of the workspace does not read a private knowledge base
        r = _diff(w.by_name(name), page, from_no=1, to_no=2)
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", (name, r.text)
        assert "secret" not in r.text
