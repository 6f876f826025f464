"""Index-only documents: ``documents.upsert`` with ``text`` + ``sourceUri`` (docs/apps.md#api).
The text is plain text, indexed as it is and given back as ``text``: never read as Markdown."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openkb.apps import knowledge as K
from openkb.apps import plaintext
from openkb.content.actor import Actor
from openkb.content.documents import update_document
from openkb.content.versions import current_version, save_version, sha256_hex
from openkb.errors import ValidationError
from openkb.markdown.validate import validate_and_normalize
from openkb.models import Document
from tests.apps.conftest import AppWorld

SRC = "https://example.org/page"
SCRAPED = "Price: $5 <b>today</b>\n<div>menu</div>\n\n* [ ] not a task\n    not code\n[[not a link]] ![x](y.png) `z`\n番茄牛腩"


def test_text_is_stored_as_text_never_refused_as_markdown(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.read:keep")
    r = K.documents_upsert(aw.db, c, collection="keep", key="page", title="scraped", text_=SCRAPED, source_uri=SRC)
    assert r["status"] == "created"  # raw HTML in the text was refused by the dialect before
    got = K.documents_get(aw.db, c, r["ref"])
    assert "body" not in got and got["sourceUri"] == SRC and got["meta"]["indexOnly"] is True
    assert got["text"] == SCRAPED.replace("    not code", "not code")  # blanks around lines go
    again = K.documents_upsert(aw.db, c, collection="keep", key="page", title="scraped", text_=SCRAPED, source_uri=SRC)
    assert again["status"] == "unchanged"
    listed = K.search(None, aw.db, c, "", collections=["keep"])  # type: ignore[arg-type]  # newest first
    assert [x["text"] for x in listed if x["document"] == r["ref"]] == [got["text"]]


def test_markdown_over_an_index_only_document_is_refused(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.read:keep")
    r = K.documents_upsert(aw.db, c, collection="keep", key="p", title="t", text_="words", source_uri=SRC)
    for kw in ({"collection": "keep", "key": "p"}, {"ref": r["ref"]}):
        with pytest.raises(ValidationError, match="index-only"):
            with aw.db.begin_nested():
                K.documents_upsert(aw.db, c, title="t", body="# Markdown now", **kw)
    with pytest.raises(ValidationError, match="set by OpenKB"):
        K.documents_upsert(aw.db, c, collection="keep", title="t", body="b", meta={"indexOnly": True})
    # with a new meta it becomes an ordinary page
    out = K.documents_upsert(aw.db, c, ref=r["ref"], title="t", body="# Markdown now", meta={})
    assert out["status"] == "updated" and K.documents_get(aw.db, c, r["ref"])["body"].startswith("# Markdown now")


def test_an_editor_cannot_save_markdown_over_an_index_only_document(aw: AppWorld) -> None:
    """The web app opens it read-only; the REST save (``save_version``) refuses its body too, until
    the user drops ``indexOnly`` from its metadata. Its title may still change."""
    c = aw.grant("collections.write:keep", "collections.read:keep")
    r = K.documents_upsert(aw.db, c, collection="keep", key="src", title="t", text_="indexed words", source_uri=SRC)
    _, doc_id = c.read_ref(r["ref"], "d", "document")
    me = Actor.of(aw.user)
    cur = current_version(aw.db, aw.db.get(Document, doc_id))
    body = "# my own notes"
    with pytest.raises(ValidationError, match="index-only") as refused:
        with aw.db.begin_nested():
            save_version(aw.db, me, doc_id, markdown=body, markdown_hash=sha256_hex(body), base_version_id=cur.id)
    assert refused.value.extra["field"] == "markdown" and SRC in refused.value.detail
    renamed = save_version(aw.db, me, doc_id, markdown=cur.markdown, markdown_hash=cur.markdown_hash,
                           base_version_id=cur.id, title="renamed")  # fmt: skip
    assert renamed.status == "created" and K.documents_get(aw.db, c, r["ref"])["text"] == "indexed words"
    update_document(aw.db, me, doc_id, {"metadata": {}})  # now an ordinary page
    saved = save_version(
        aw.db, me, doc_id, markdown=body, markdown_hash=sha256_hex(body), base_version_id=renamed.version.id
    )
    assert saved.status == "created" and K.documents_get(aw.db, c, r["ref"])["body"] == body + "\n"


_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00"), max_size=200)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT, max_size=6))
def test_any_text_survives_the_dialect(lines: list[str]) -> None:
    text = "\n".join(lines)
    stored = validate_and_normalize(plaintext.to_markdown(text))
    assert plaintext.from_markdown(stored).split() == text.split()
