"""What a save leaves in the database besides the product's data (migration 0013, bench/soak.py):
the superseded version's export form goes (an export reads current versions only,
docs/export.md#speed) while every version stays (history is kept); the change log's index of
app installations holds apps' writes only and still serves a lookup by installation."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlmodel import select

from openkb.content import documents, versions
from openkb.content.versions import sha256_hex
from openkb.exporting.forms import FORM, make_form
from openkb.models import DocumentVersion

FORMS = text(
    "SELECT v.version_no, f.form, f.deflated FROM document_versions v "
    "JOIN document_export_forms f ON f.version_id = v.id WHERE v.document_id = :d ORDER BY v.version_no"
)


def _save(world, doc_id, base_id, md):
    return versions.save_version(
        world.db, world.actor(), doc_id, base_version_id=base_id, markdown=md, markdown_hash=sha256_hex(md)
    ).version


def test_a_save_keeps_every_version_and_only_the_current_versions_export_form(world):
    doc, v1 = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="Page", markdown="# One\n"
    )
    assert [r[0] for r in world.db.execute(FORMS, {"d": doc.id})] == [1]
    v2 = _save(world, doc.id, v1.id, "# Two\n")
    v3 = _save(world, doc.id, v2.id, "# Three\n")
    rows = world.db.execute(FORMS, {"d": doc.id}).all()
    assert [(no, form, bytes(d)) for no, form, d in rows] == [(3, FORM, make_form("# Three\n").deflated)]
    kept = world.db.exec(select(DocumentVersion.version_no).where(DocumentVersion.document_id == doc.id)).all()
    assert sorted(kept) == [1, 2, 3]  # history is kept: only the derived form went

    # restoring a version whose form is gone writes a new version with its own form
    v4 = versions.restore_version(world.db, world.actor(), doc.id, v1.id, base_version_id=v3.id).version
    rows = world.db.execute(FORMS, {"d": doc.id}).all()
    assert [(no, bytes(d)) for no, _f, d in rows] == [(v4.version_no, make_form("# One\n").deflated)]


def test_change_log_installation_index_skips_writes_without_an_app_and_serves_lookups(world):
    definition = world.db.execute(
        text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_changes_app_installation'")
    ).scalar_one()
    assert definition.endswith("WHERE (app_installation_id IS NOT NULL)")

    world.db.execute(text("SET LOCAL enable_seqscan = off"))  # the table is tiny here
    # No tenant predicate: with one, a backward scan of ix_changes_tenant_created filtered on the
    # installation costs about the same on a tiny table, and which one the planner picks depends
    # on what other tests wrote (one fresh-clone run of the suite on two workers picked it). The
    # question here is only whether ``= :i`` can use the partial index.
    plan = "\n".join(
        r[0]
        for r in world.db.execute(
            text("EXPLAIN SELECT id FROM changes WHERE app_installation_id = :i ORDER BY created_at DESC LIMIT 20"),
            {"i": uuid.uuid4()},
        )
    )
    assert "ix_changes_app_installation" in plan  # ``= :i`` implies NOT NULL: the partial index applies
