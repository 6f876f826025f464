"""Apps on a person's knowledge, at the service layer (docs/apps.md): grants, collections,
documents, refs, changes, quotas, uninstall. Each test runs on the rolled-back ``db`` session."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlmodel import select

from openkb.apps import changes as C
from openkb.apps import knowledge as K
from openkb.apps import quotas, registry, uninstall
from openkb.content.actor import Actor
from openkb.content.documents import create_document, trash_document, update_document
from openkb.errors import (
    AppQuotaExceeded,
    CollectionNotNestable,
    DocumentInTrash,
    InvalidPermissionString,
    KnowledgePermissionMissing,
    NotFound,
    SourceUriNotAllowed,
    Unauthenticated,
    ValidationError,
)
from openkb.models import AppGrant, AppInstallation, Document, Tenant, User
from openkb.permissions import Principal
from tests.apps.conftest import ALL, AppWorld
from tests.factories import add_member, make_kb, make_user, make_workspace


def lacks(perm: str):
    return pytest.raises(KnowledgePermissionMissing, match=f"lacks knowledge permission {perm}$")


def diary(aw: AppWorld, key: str = "2026-09-29", body: str = "# Today\n\nrain", caller=None):
    return K.documents_upsert(
        aw.db, caller or aw.caller(), collection="diary", key=key, title=key, body=body, meta={"date": key}
    )


# --- installation and grants -----------------------------------------------------------------------


def test_install_switches_every_grant_off_and_returns_a_hashed_credential(aw: AppWorld) -> None:
    grants = aw.db.exec(select(AppGrant).where(AppGrant.installation_id == aw.installation_id)).all()
    assert sorted(g.permission for g in grants) == sorted(ALL)
    assert not any(g.enabled for g in grants)
    assert aw.token.startswith("kbapp_")
    stored = aw.db.execute(text("SELECT token_hash FROM app_credentials")).scalars().all()
    assert aw.token not in stored
    out = registry.installation_out(aw.db, registry.access_installation(aw.db, aw.user, aw.installation_id))
    by = {g["permission"]: g for g in out["grants"]}
    assert by["collections.read:diary"]["sentences"] == {"zh-CN": "读取你的日记", "en": "Read your diary"}


def test_register_refuses_bad_permission_strings(aw: AppWorld) -> None:
    with pytest.raises(InvalidPermissionString) as e:
        registry.register_app(aw.db, aw.user, name="bad", permissions=["facts.write:self:pref.food.*", "email.read"])
    assert {i["permission"] for i in e.value.extra["issues"]} == {"facts.write:self:pref.food.*", "email.read"}


def test_no_grants_sees_nothing_and_every_single_object_call_names_the_missing_string(aw: AppWorld) -> None:
    # a document the app could otherwise reach, written while its grants were on
    doc = diary(aw, caller=aw.grant("collections.write:diary"))
    aw.grant("collections.write:diary", on=False)
    c = aw.caller()
    assert c.grants == frozenset()
    assert K.collections_list(aw.db, c) == []
    assert all(x["own"] for x in C.changes_list(aw.db, c))  # its own write only
    with lacks("collections.write:diary"):
        diary(aw, caller=c)
    with lacks("collections.read:diary"):
        K.documents_get(aw.db, c, doc["ref"])
    with lacks("collections.read:diary"):
        K.documents_get_by_key(aw.db, c, "diary", "2026-09-29")
    with lacks("collections.read:keep"):
        K.documents_list(aw.db, c, "keep")
    with lacks("collections.write:diary"):
        K.documents_delete(aw.db, c, doc["ref"])
    with lacks("collections.create"):
        K.collections_create(aw.db, c, "菜谱")
    with lacks("collections.write:diary"):
        K.documents_upsert(aw.db, c, ref=doc["ref"], title="x", body="y")


def test_a_switch_applies_to_the_next_call(aw: AppWorld) -> None:
    with lacks("collections.write:keep"):
        K.documents_upsert(aw.db, aw.caller(), collection="keep", key="a", title="a", body="a")
    c = aw.grant("collections.write:keep")
    assert K.documents_upsert(aw.db, c, collection="keep", key="a", title="a", body="a")["status"] == "created"
    c = aw.grant("collections.write:keep", on=False)
    with lacks("collections.write:keep"):
        K.documents_upsert(aw.db, c, collection="keep", key="a", title="a", body="b")


def test_an_uninstalled_or_rotated_credential_is_dead(aw: AppWorld) -> None:
    new = registry.rotate_credential(aw.db, aw.user, aw.installation_id)
    with pytest.raises(Unauthenticated):
        aw.caller()
    aw.token = new
    assert aw.caller().installation_id == aw.installation_id
    uninstall.uninstall(aw.db, aw.user, aw.installation_id, "keep")
    with pytest.raises(Unauthenticated):
        aw.caller()


# --- documents -----------------------------------------------------------------------------------


def test_keyed_diary_upsert_created_unchanged_updated(aw: AppWorld) -> None:
    c = aw.grant("collections.write:diary", "collections.read:diary")
    first = diary(aw, caller=c)
    assert first["status"] == "created"
    again = diary(aw, caller=c)
    assert again == {**first, "status": "unchanged", "runId": again["runId"]}
    assert diary(aw, body="# Today\n\nsun", caller=c)["status"] == "updated"
    got = K.documents_get_by_key(aw.db, c, "diary", "2026-09-29")
    assert got is not None and got["ref"] == first["ref"] and "sun" in got["body"]
    assert got["meta"]["date"] == "2026-09-29"
    assert K.documents_get_by_key(aw.db, c, "diary", "2026-09-30") is None
    listed = K.documents_list(aw.db, c, "diary", time_from="2026-09-29", time_to="2026-09-29")
    assert [d["ref"] for d in listed] == [first["ref"]] and listed[0]["updatedAt"]
    assert K.documents_list(aw.db, c, "diary", time_from="2026-09-30") == []
    with pytest.raises(ValidationError, match="keyed by their date"):
        K.documents_upsert(aw.db, c, collection="diary", key="not-a-date", title="x", body="x")


@pytest.mark.parametrize("key", ["2026-02-31", "2026-13-45", "0000-01-01", "2026-9-29", "２０２６-09-29"])
def test_a_diary_key_is_a_real_date(aw: AppWorld, key: str) -> None:
    c = aw.grant("collections.write:diary")
    with pytest.raises(ValidationError) as err:
        K.documents_upsert(aw.db, c, collection="diary", key=key, title=key, body="x")
    assert err.value.extra.get("field") == "key"


def test_a_diary_key_is_taken_stripped_and_its_date_has_no_newline(aw: AppWorld) -> None:
    c = aw.grant("collections.write:diary", "collections.read:diary")
    first = K.documents_upsert(aw.db, c, collection="diary", key="2026-09-29\n", title="t", body="x")
    doc = K.documents_get_by_key(aw.db, c, "diary", "2026-09-29")
    assert doc is not None and doc["ref"] == first["ref"]
    assert doc["key"] == "2026-09-29" and doc["meta"]["date"] == "2026-09-29"
    again = K.documents_upsert(aw.db, c, collection="diary", key="2026-09-29", title="t", body="x")
    assert again == {**first, "status": "unchanged", "runId": again["runId"]}


def test_unchanged_writes_nothing_and_costs_no_quota(aw: AppWorld) -> None:
    c = aw.grant("collections.write:diary")
    diary(aw, caller=c)
    before = quotas.usage(aw.db, aw.installation_id)
    n_changes = aw.db.execute(text("SELECT count(*) FROM changes WHERE tenant_id = :t"), {"t": aw.tenant_id}).scalar()
    assert diary(aw, caller=c)["status"] == "unchanged"
    assert quotas.usage(aw.db, aw.installation_id) == before
    assert (
        aw.db.execute(text("SELECT count(*) FROM changes WHERE tenant_id = :t"), {"t": aw.tenant_id}).scalar()
        == n_changes
    )


def test_get_whole_or_a_chunk_range_and_delete(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.read:keep")
    d = K.documents_upsert(aw.db, c, collection="keep", title="note", body="# A\n\none\n\n# B\n\ntwo")
    assert d["status"] == "created"
    whole = K.documents_get(aw.db, c, d["ref"])
    assert whole["body"].startswith("# A") and whole["title"] == "note"
    assert K.documents_get(aw.db, c, d["ref"], range_from=0, range_to=3)["chunks"] == []  # not indexed here
    assert K.documents_delete(aw.db, c, d["ref"])["status"] == "deleted"
    with pytest.raises(NotFound):
        K.documents_get(aw.db, c, d["ref"])


def test_overwriting_another_writers_document_needs_changes_manage(aw: AppWorld) -> None:
    c = aw.grant("collections.write:diary", "collections.read:diary")
    other = aw.install_another("journal")
    oc = other.grant("collections.write:diary")
    diary(other, caller=oc)  # the other app wrote today's entry
    assert diary(aw, caller=c)["status"] == "unchanged"  # same content: nothing is overwritten
    with lacks("changes.manage"):
        diary(aw, body="mine now", caller=c)
    c = aw.grant("changes.manage")
    assert diary(aw, body="mine now", caller=c)["status"] == "updated"


def test_origin_is_set_by_openkb_unless_overridden(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep")
    with lacks("origin.override"):
        K.documents_upsert(aw.db, c, collection="keep", key="k", title="t", body="b", origin="app:other")
    c = aw.grant("origin.override")
    r = K.documents_upsert(aw.db, c, collection="keep", key="k", title="t", body="b", origin="app:other", source="x")
    row = aw.db.execute(
        text("SELECT origin, source FROM app_documents WHERE installation_id = :i"), {"i": aw.installation_id}
    ).one()
    assert (row.origin, row.source) == ("app:other", "x") and r["status"] == "created"


def test_source_uri_must_be_http_on_an_allowed_host(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep")
    for bad in ("file:///etc/passwd", "https://evil.example.com/x", "ftp://example.org/x"):
        with pytest.raises(SourceUriNotAllowed):
            K.documents_upsert(aw.db, c, collection="keep", title="t", text_="imported", source_uri=bad)
    ok = K.documents_upsert(
        aw.db, c, collection="keep", title="t", text_="imported", source_uri="https://example.org/a"
    )
    assert ok["status"] == "created"


@pytest.mark.parametrize("bad", ["http://[::1", "http://[example.org]/x", "https://[", "http://[::1]]/"])
def test_a_malformed_source_uri_is_refused_like_any_other(aw: AppWorld, bad: str) -> None:
    c = aw.grant("collections.write:keep")
    with pytest.raises(SourceUriNotAllowed) as err:
        K.documents_upsert(aw.db, c, collection="keep", title="t", text_="imported", source_uri=bad)
    assert err.value.extra.get("field") == "sourceUri"


# --- collections -----------------------------------------------------------------------------------


def test_collections_create_nest_to_five_levels_and_diary_has_none(aw: AppWorld) -> None:
    c = aw.grant("collections.create", "collections.write:diary")
    top = K.collections_create(aw.db, c, "菜谱")
    assert top["parent"] is None
    c = aw.caller()
    parent = top["ref"]
    for level in (2, 3, 4, 5):
        parent = K.collections_create(aw.db, c, f"level {level}", parent=parent)["ref"]
        c = aw.caller()
    with pytest.raises(CollectionNotNestable, match="5 levels"):
        K.collections_create(aw.db, c, "level 6", parent=parent)
    with pytest.raises(CollectionNotNestable, match="diary"):
        K.collections_create(aw.db, c, "sub", parent="diary")
    listed = K.collections_list(aw.db, c)
    names = {x["name"]: x for x in listed}
    assert {"菜谱", "level 2", "level 5"} <= set(names)
    assert names["level 2"]["parent"] == top["ref"] and names["菜谱"]["parent"] is None
    assert all(x["canWrite"] for x in listed if x["name"] != "diary")
    # its own collection is readable and writable by its creator with no other grant
    d = K.documents_upsert(aw.db, c, collection=parent, key="r1", title="红烧肉", body="# 红烧肉")
    assert K.documents_get(aw.db, c, d["ref"])["title"] == "红烧肉"


def test_keep_subcollection_needs_write_on_keep(aw: AppWorld) -> None:
    c = aw.grant("collections.create")
    with lacks("collections.write:keep"):
        K.collections_create(aw.db, c, "sub", parent="keep")
    c = aw.grant("collections.write:keep")
    assert K.collections_create(aw.db, c, "sub", parent="keep")["parent"] == "keep"


def _team(aw: AppWorld):
    """A team knowledge base of the user with two folders, and a page written by the user."""
    owner_actor = Actor.of(aw.user)
    t = aw.db.get(Tenant, aw.tenant_id)
    u = aw.db.get(User, aw.user.user_id)
    ws = make_workspace(aw.db, t, u)
    kb = make_kb(aw.db, ws, u, visibility="private")
    a, _ = create_document(aw.db, owner_actor, knowledge_base_id=kb.id, title="A", type="folder")
    b, _ = create_document(aw.db, owner_actor, knowledge_base_id=kb.id, title="B", type="folder")
    page, _ = create_document(aw.db, owner_actor, knowledge_base_id=kb.id, parent_id=b.id, title="P", markdown="hi")
    return kb, a, b, page, owner_actor


def _colleagues_kb(aw: AppWorld):
    """A knowledge base of a colleague's workspace the user is a member of: the user reads its
    published pages and neither reads its drafts nor writes anywhere in it."""
    t = aw.db.get(Tenant, aw.tenant_id)
    colleague = make_user(aw.db, t)
    ws = make_workspace(aw.db, t, colleague)
    add_member(aw.db, ws, aw.db.get(User, aw.user.user_id), "member")
    kb = make_kb(aw.db, ws, colleague, visibility="workspace")
    return kb, Actor.of(Principal.user(colleague.id, aw.tenant_id))


def test_documents_list_counts_only_pages_the_user_may_read(aw: AppWorld) -> None:
    kb, colleague = _colleagues_kb(aw)
    create_document(aw.db, colleague, knowledge_base_id=kb.id, title="published", markdown="x")
    for i in range(3):  # newer drafts the user may not read
        create_document(aw.db, colleague, knowledge_base_id=kb.id, title=f"draft {i}", markdown="x", status="draft")
    registry.set_selected_collections(aw.db, aw.user, aw.installation_id, [{"knowledge_base_id": kb.id}])
    c = aw.grant("collections.read:user-selected")
    [coll] = K.collections_list(aw.db, c)
    assert [d["title"] for d in K.documents_list(aw.db, c, coll["ref"], limit=1)] == ["published"]
    assert [d["title"] for d in K.documents_list(aw.db, c, coll["ref"])] == ["published"]


def test_a_folder_the_user_only_reads_is_not_writable_for_the_app(aw: AppWorld) -> None:
    kb, colleague = _colleagues_kb(aw)
    folder, _ = create_document(aw.db, colleague, knowledge_base_id=kb.id, title="shared", type="folder")
    registry.set_selected_collections(aw.db, aw.user, aw.installation_id, [{"document_id": folder.id}])
    c = aw.grant("collections.read:user-selected", "collections.write:user-selected")
    [coll] = K.collections_list(aw.db, c)
    assert (coll["name"], coll["canWrite"]) == ("shared", False)


def test_a_keyed_page_below_a_folder_in_the_trash(aw: AppWorld) -> None:
    """``getByKey`` finds nothing there (as ``documents.get`` does), and writing the key again
    answers that it is in the trash."""
    c = aw.grant("collections.read:keep", "collections.write:keep", "collections.create")
    folder = K.collections_create(aw.db, c, "notes", parent="keep")
    K.documents_upsert(aw.db, c, collection=folder["ref"], key="k", title="k", body="x")
    assert K.documents_get_by_key(aw.db, c, "keep", "k")["title"] == "k"
    _, folder_id = c.read_ref(folder["ref"], "f", "collection")
    trash_document(aw.db, Actor.of(aw.user), folder_id)
    assert K.documents_get_by_key(aw.db, c, "keep", "k") is None
    with pytest.raises(DocumentInTrash):
        K.documents_upsert(aw.db, c, collection="keep", key="k", title="k", body="y")


def test_an_empty_search_finds_a_granted_folders_page_behind_newer_pages_elsewhere(aw: AppWorld) -> None:
    kb, a, _b, _page, owner = _team(aw)
    create_document(aw.db, owner, knowledge_base_id=kb.id, parent_id=a.id, title="in A", markdown="x")
    for i in range(12):  # newer pages of the same knowledge base, outside the granted folder
        create_document(aw.db, owner, knowledge_base_id=kb.id, title=f"elsewhere {i}", markdown="x")
    registry.set_selected_collections(aw.db, aw.user, aw.installation_id, [{"document_id": a.id}])
    c = aw.grant("collections.read:user-selected")
    assert [h["title"] for h in K.search(None, aw.db, c, "", limit=1)] == ["in A"]  # type: ignore[arg-type]
    assert [h["title"] for h in K.search(None, aw.db, c, "", limit=5)] == ["in A"]  # type: ignore[arg-type]


def test_a_selected_collection_names_a_knowledge_base_or_a_folder(aw: AppWorld) -> None:
    kb, a, _b, _page, _owner = _team(aw)
    registry.set_selected_collections(aw.db, aw.user, aw.installation_id, [{"knowledge_base_id": kb.id}])
    for bad in ([{}], [{"knowledge_base_id": None, "document_id": None}], [{"document_id": a.id}, {}]):
        with pytest.raises(ValidationError) as err:
            registry.set_selected_collections(aw.db, aw.user, aw.installation_id, bad)
        assert err.value.extra.get("field") == "collections"
    other_kb, *_ = _team(aw)
    with pytest.raises(ValidationError):
        registry.set_selected_collections(
            aw.db, aw.user, aw.installation_id, [{"knowledge_base_id": other_kb.id, "document_id": a.id}]
        )
    out = registry.installation_out(aw.db, aw.db.get(AppInstallation, aw.installation_id))
    assert out["selected_collections"] == [{"knowledge_base_id": kb.id, "document_id": None}]  # unchanged
    # the web app sends both for a folder
    registry.set_selected_collections(
        aw.db, aw.user, aw.installation_id, [{"knowledge_base_id": kb.id, "document_id": a.id}]
    )
    out = registry.installation_out(aw.db, aw.db.get(AppInstallation, aw.installation_id))
    assert out["selected_collections"] == [{"knowledge_base_id": kb.id, "document_id": a.id}]


def test_user_selected_follows_location_including_future_subcollections(aw: AppWorld) -> None:
    kb, a, b, page, owner = _team(aw)
    c = aw.grant("collections.read:user-selected", "collections.write:user-selected")
    assert K.collections_list(aw.db, c) == []
    registry.set_selected_collections(aw.db, aw.user, aw.installation_id, [{"document_id": a.id}])
    c = aw.caller()
    listed = K.collections_list(aw.db, c)
    assert [x["name"] for x in listed] == ["A"] and listed[0]["parent"] is None
    # a sub-collection the user creates later is included
    sub, _ = create_document(aw.db, owner, knowledge_base_id=kb.id, parent_id=a.id, title="A1", type="folder")
    assert {x["name"] for x in K.collections_list(aw.db, aw.caller())} == {"A", "A1"}
    # the user's page in B is out of reach; moved into A it becomes readable, moved out it is not
    other = aw.install_another("other")
    oc = other.grant("collections.write:user-selected", "collections.read:user-selected")
    registry.set_selected_collections(aw.db, aw.user, other.installation_id, [{"document_id": b.id}])
    oc = other.caller()
    hits = K.search(None, aw.db, oc, "", collections=None)  # type: ignore[arg-type]
    assert [h["title"] for h in hits] == ["P"]
    ref = hits[0]["document"]
    assert K.documents_get(aw.db, other.caller(), ref)["body"].strip() == "hi"
    update_document(aw.db, owner, page.id, {"parent_id": sub.id})
    with lacks("collections.read:user-selected"):
        K.documents_get(aw.db, other.caller(), ref)  # moved out of B: same ref, no longer reachable
    mine = K.search(None, aw.db, aw.caller(), "")  # type: ignore[arg-type]
    assert [h["title"] for h in mine] == ["P"]  # moved into A's subtree: reachable
    assert K.documents_get(aw.db, aw.caller(), mine[0]["document"])["title"] == "P"


def test_refs_differ_across_installations_and_are_not_found_across_them(aw: AppWorld) -> None:
    c = aw.grant("collections.write:diary", "collections.read:diary")
    other = aw.install_another("journal")
    oc = other.grant("collections.read:diary", "collections.write:diary")
    mine = diary(aw, caller=c)["ref"]
    theirs = K.documents_get_by_key(aw.db, oc, "diary", "2026-09-29")["ref"]
    assert mine != theirs
    with pytest.raises(NotFound):
        K.documents_get(aw.db, oc, mine)
    with pytest.raises(NotFound):
        K.documents_get(aw.db, c, theirs)
    with pytest.raises(NotFound):
        K.documents_get(aw.db, c, mine[:-2] + ("AA" if not mine.endswith("AA") else "BB"))
    assert {x["ref"] for x in K.collections_list(aw.db, c)}.isdisjoint(
        {x["ref"] for x in K.collections_list(aw.db, oc)}
    )


# --- changes and revert ---------------------------------------------------------------------------


def test_changes_carry_the_run_and_revert_by_run(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.read:keep")
    a = K.documents_upsert(aw.db, c, collection="keep", key="a", title="a", body="1", run_id="nightly-1")
    K.documents_upsert(aw.db, c, collection="keep", key="a", title="a", body="2", run_id="nightly-2")
    ch = C.changes_list(aw.db, c)
    assert [x["op"] for x in ch] == ["document.upsert", "document.create"]
    assert ch[0]["runId"] != ch[1]["runId"] and all(x["actor"] == "app:recipes" and x["own"] for x in ch)
    out = C.changes_revert(aw.db, c, run_id="nightly-2")
    assert len(out["reverted"]) == 1
    assert K.documents_get(aw.db, c, a["ref"])["body"].strip() == "1"
    assert [x["status"] for x in C.changes_list(aw.db, c, status="reverted")] == ["reverted"]
    # another app sees none of it without changes.manage, and can't revert it
    other = aw.install_another("other")
    oc = other.grant("collections.read:keep")
    assert C.changes_list(aw.db, oc) == []
    with pytest.raises(NotFound):
        C.changes_revert(aw.db, oc, ref=ch[0]["ref"])
    oc = other.grant("changes.manage")
    assert {x["op"] for x in C.changes_list(aw.db, oc)} >= {"document.create", "document.upsert"}


@pytest.mark.parametrize("batch", [100, 1])
def test_changes_manage_lists_the_apps_own_change_behind_newer_ones_out_of_reach(
    aw: AppWorld, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    monkeypatch.setattr(C, "MIN_BATCH", batch, raising=False)
    c = aw.grant("collections.write:keep", "collections.read:keep")
    K.documents_upsert(aw.db, c, collection="keep", key="mine", title="mine", body="1")
    kb, _a, _b, _page, owner = _team(aw)  # the user's newer changes, outside the app's reach
    for i in range(4):
        create_document(aw.db, owner, knowledge_base_id=kb.id, title=f"n{i}", markdown="x")
    [own] = C.changes_list(aw.db, c, limit=1)
    assert own["own"] and own["op"] == "document.create"
    c = aw.grant("changes.manage")
    assert C.changes_list(aw.db, c, limit=1) == [own]
    # the user's own changes inside the reach (creating keep) follow; the team's never show
    listed = C.changes_list(aw.db, c, limit=50)
    assert listed[0] == own and all(x["op"] != "document.create" for x in listed[1:])


def test_a_revert_is_a_write_and_needs_the_switches_the_app_has_now(aw: AppWorld) -> None:
    c = aw.grant("collections.write:diary", "collections.read:diary")
    d = diary(aw, caller=c)
    [ch] = C.changes_list(aw.db, c)
    c = aw.grant("collections.write:diary", "collections.read:diary", on=False)
    with lacks("collections.write:diary"):
        C.changes_revert(aw.db, c, run_id=ch["runId"])
    with lacks("collections.write:diary"):
        C.changes_revert(aw.db, c, ref=ch["ref"])
    assert [x["status"] for x in C.changes_list(aw.db, c)] == ["applied"]  # nothing was reverted
    c = aw.grant("collections.read:diary")
    assert K.documents_get(aw.db, c, d["ref"])["title"] == "2026-09-29"
    c = aw.grant("collections.write:diary")
    assert len(C.changes_revert(aw.db, c, ref=ch["ref"])["reverted"]) == 1
    with pytest.raises(NotFound):
        K.documents_get(aw.db, c, d["ref"])


# --- quotas ---------------------------------------------------------------------------------------


def _set_usage(aw: AppWorld, writes: int, chars: int) -> None:
    aw.db.execute(
        text(
            "INSERT INTO app_quota_usage (installation_id, day, writes, chars) VALUES (:i, (now() AT TIME ZONE 'UTC')::date, :w, :c) "
            "ON CONFLICT (installation_id, day) DO UPDATE SET writes = :w, chars = :c"
        ),
        {"i": aw.installation_id, "w": writes, "c": chars},
    )


def test_daily_write_quota_at_the_boundary(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep")
    _set_usage(aw, quotas.WRITES_PER_DAY - 1, 0)
    assert K.documents_upsert(aw.db, c, collection="keep", key="last", title="t", body="b")["status"] == "created"
    with pytest.raises(AppQuotaExceeded, match="quota"):
        with aw.db.begin_nested():
            K.documents_upsert(aw.db, c, collection="keep", key="one-more", title="t", body="b")
    assert K.documents_upsert(aw.db, c, collection="keep", key="last", title="t", body="b")["status"] == "unchanged"


def test_daily_character_quota_and_bulk(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep")
    _set_usage(aw, 0, quotas.CHARS_PER_DAY - 2)
    assert K.documents_upsert(aw.db, c, collection="keep", title="t", body="b")["status"] == "created"  # 2 chars
    with pytest.raises(AppQuotaExceeded, match="quota"):
        with aw.db.begin_nested():
            K.documents_upsert(aw.db, c, collection="keep", title="t", body="b")
    c = aw.grant("collections.bulk")
    assert K.documents_upsert(aw.db, c, collection="keep", title="t", body="b")["status"] == "created"


# --- uninstall --------------------------------------------------------------------------------------


def test_uninstall_keep_leaves_content_and_a_reinstall_needs_new_grants(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.create")
    K.documents_upsert(aw.db, c, collection="keep", key="k", title="kept", body="b")
    K.collections_create(aw.db, c, "mine")
    out = uninstall.uninstall(aw.db, aw.user, aw.installation_id, "keep")
    assert out["contributions"] == {"documents": 1, "collections": 1, "facts": 0} and out["run_id"] is None
    assert (
        aw.db.execute(
            text("SELECT count(*) FROM documents WHERE title = 'kept' AND status <> 'deleted' AND tenant_id = :t"),
            {"t": aw.tenant_id},
        ).scalar()
        == 1
    )
    done = registry.install_app(aw.db, aw.user, "recipes")
    again = AppWorld(aw.db, aw.tenant_id, aw.user, done.installation.id, done.credential)
    with lacks("collections.read:keep"):
        K.documents_get_by_key(aw.db, again.caller(), "keep", "k")
    assert K.documents_get_by_key(aw.db, again.grant("collections.read:keep"), "keep", "k")["title"] == "kept"


def _live_titles(aw: AppWorld) -> set[str]:
    sql = "SELECT title FROM documents WHERE status <> 'deleted' AND tenant_id = :t"
    return set(aw.db.execute(text(sql), {"t": aw.tenant_id}).scalars())


def test_uninstall_delete_removes_contributions_and_is_revertible(aw: AppWorld) -> None:
    kb, a, b, page, owner = _team(aw)
    c = aw.grant("collections.write:keep", "collections.create")
    K.documents_upsert(aw.db, c, collection="keep", key="k", title="app page", body="b")
    col_ref = K.collections_create(aw.db, c, "app kb")["ref"]
    c = aw.caller()
    K.documents_upsert(aw.db, c, collection=col_ref, title="inside", body="x")
    # the user puts a page of their own into the app's collection: it goes with the collection
    kb_id = c.created[0][0]
    create_document(aw.db, owner, knowledge_base_id=kb_id, title="user's page", markdown="mine")
    out = uninstall.uninstall(aw.db, aw.user, aw.installation_id, "delete")
    assert out["deleted"]["documents"] >= 3 and out["deleted"]["collections"] == 1
    live = _live_titles(aw)
    assert {"app page", "inside", "user's page"}.isdisjoint(live) and "P" in live
    uninstall.revert_uninstall(aw.db, aw.user, aw.installation_id)
    live = _live_titles(aw)
    assert {"app page", "inside", "user's page"} <= live
    assert aw.db.execute(text("SELECT status FROM knowledge_bases WHERE id = :k"), {"k": kb_id}).scalar() == "active"
    assert aw.db.get(Document, page.id).status != "deleted"


def test_a_keyed_document_moved_out_of_reach_is_refused_not_rewritten(aw: AppWorld) -> None:
    kb, a, b, page, owner = _team(aw)
    registry.set_selected_collections(aw.db, aw.user, aw.installation_id, [{"document_id": a.id}])
    c = aw.grant("collections.write:user-selected", "collections.read:user-selected")
    a_ref = next(x["ref"] for x in K.collections_list(aw.db, c) if x["name"] == "A")
    first = K.documents_upsert(aw.db, c, collection=a_ref, key="k", title="t", body="one")
    assert first["status"] == "created"
    doc_id = aw.db.execute(
        text("SELECT id FROM documents WHERE external_key = 'k' AND tenant_id = :t"), {"t": aw.tenant_id}
    ).scalar()
    update_document(aw.db, Actor.of(aw.user), doc_id, {"parent_id": b.id})  # the user moves it out
    with lacks("collections.write:user-selected"):
        K.documents_upsert(aw.db, aw.caller(), collection=a_ref, key="k", title="t", body="two")
    update_document(aw.db, Actor.of(aw.user), doc_id, {"parent_id": a.id})  # and back in
    again = K.documents_upsert(aw.db, aw.caller(), collection=a_ref, key="k", title="t", body="two")
    assert again == {**first, "status": "updated", "runId": again["runId"]}


def test_the_user_sees_what_an_installation_wrote_and_reverts_it(aw: AppWorld) -> None:
    from openkb.content import revert as revert_service

    c = aw.grant("collections.write:keep")
    K.documents_upsert(aw.db, c, collection="keep", key="a", title="a", body="1", run_id="r")
    K.documents_upsert(aw.db, aw.install_another("x").grant("collections.write:keep"), collection="keep", title="b")
    rows = C.installation_changes(aw.db, aw.user, aw.installation_id)
    assert [r["op"] for r in rows] == ["document.create"] and rows[0]["summary"].startswith("created page")
    revert_service.revert(aw.db, Actor.of(aw.user), change_id=rows[0]["id"])
    assert C.installation_changes(aw.db, aw.user, aw.installation_id)[0]["status"] == "reverted"


def test_update_by_ref_keeps_what_is_left_out_and_guards_other_writers(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.read:keep")
    keyed = K.documents_upsert(aw.db, c, collection="keep", key="k", title="t", body="keyed body")
    plain = K.documents_upsert(aw.db, c, collection="keep", title="p", body="plain body")
    r = K.documents_upsert(aw.db, c, ref=keyed["ref"], title="t2")
    assert r["status"] == "updated" and K.documents_get(aw.db, c, keyed["ref"])["body"].strip() == "keyed body"
    assert K.documents_upsert(aw.db, c, ref=plain["ref"], title="p")["status"] == "unchanged"
    assert K.documents_upsert(aw.db, c, ref=plain["ref"], title="p", body="new")["status"] == "updated"
    assert K.documents_get(aw.db, c, plain["ref"])["body"].strip() == "new"
    # another app with write on keep may not overwrite them without changes.manage
    other = aw.install_another("other")
    oc = other.grant("collections.write:keep", "collections.read:keep")
    theirs = K.documents_get_by_key(aw.db, oc, "keep", "k")["ref"]
    with lacks("changes.manage"):
        K.documents_upsert(aw.db, oc, ref=theirs, title="hijacked", body="x")
    assert K.documents_get(aw.db, c, keyed["ref"])["title"] == "t2"  # nothing was written
    with lacks("changes.manage"):
        K.documents_delete(aw.db, oc, theirs)


def test_an_impossible_meta_date_does_not_break_time_filters(aw: AppWorld) -> None:
    c = aw.grant("collections.write:keep", "collections.read:keep")
    bad = K.documents_upsert(aw.db, c, collection="keep", title="odd", body="x", meta={"date": "2026-02-31"})
    good = K.documents_upsert(aw.db, c, collection="keep", title="ok", body="y", meta={"date": "2026-02-28"})
    day = K.documents_list(aw.db, c, "keep", time_from="2026-02-28", time_to="2026-02-28")
    assert [d["ref"] for d in day] == [good["ref"]]
    recent = K.search(None, aw.db, c, "", time_from="2000-01-01")  # type: ignore[arg-type]
    assert {h["document"] for h in recent} == {bad["ref"], good["ref"]}  # the odd one counts by its update time


def test_time_range_bounds_at_the_ends_of_time(aw: AppWorld) -> None:
    """``to`` on the last day there is covers that whole day; ``0`` (the epoch) is a bound like any
    other, not a missing one."""
    c = aw.grant("collections.write:keep", "collections.read:keep")
    doc = K.documents_upsert(aw.db, c, collection="keep", title="t", body="x")
    end = K.parse_time("9999-12-31", True, "timeRange.to")
    assert (end.year, end.month, end.day, end.hour, end.minute, end.second) == (9999, 12, 31, 23, 59, 59)
    assert [d["ref"] for d in K.documents_list(aw.db, c, "keep", time_to="9999-12-31")] == [doc["ref"]]
    assert [h["document"] for h in K.search(None, aw.db, c, "", time_to="9999-12-31")] == [doc["ref"]]  # type: ignore[arg-type]
    assert K.documents_list(aw.db, c, "keep", time_to=0) == []
    assert K.search(None, aw.db, c, "", time_to=0) == []  # type: ignore[arg-type]
    assert [d["ref"] for d in K.documents_list(aw.db, c, "keep", time_from=0)] == [doc["ref"]]


@pytest.mark.parametrize(
    "value", [10**400, 1e300, float("nan"), float("inf"), "2026-13-45", "2026-02-30", True, "soon"]
)
def test_a_time_that_is_no_time_is_a_validation_error_naming_its_field(value) -> None:
    """Apps send times as milliseconds or ISO text in raw JSON: out of range, NaN or a date
    shaped like one but not one (2026-02-30) raised OverflowError/ValueError, a 500."""
    with pytest.raises(ValidationError) as err:
        K.parse_time(value, False, "timeRange.from")
    assert err.value.extra.get("field") == "timeRange.from" and len(err.value.detail) < 120
