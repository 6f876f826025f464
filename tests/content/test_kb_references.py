"""How an operator names a knowledge base in ``openkb import``, ``export`` and ``dify`` (id, slug in
any case, or a title only one has), and ``openkb kb list`` to find one
(openkb/content/knowledge_bases.py ``find_knowledge_base``, ``operator_list``)."""

from __future__ import annotations

import json
import uuid

import pytest

from openkb.content.knowledge_bases import find_knowledge_base, operator_list
from openkb.errors import Conflict, NotFound, ValidationError
from tests.factories import make_doc, make_kb, make_tenant, make_user, make_workspace


@pytest.fixture()
def kbs(committed):
    tag = uuid.uuid4().hex[:8]
    with committed() as s:
        t, other_t = make_tenant(s), make_tenant(s)
        owner, stranger = make_user(s, t), make_user(s, other_t)
        ws1, ws2 = make_workspace(s, t, owner), make_workspace(s, t, owner)
        handbook = make_kb(s, ws1, owner, title=f"Handbook {tag}")
        handbook.slug = f"handbook-{tag}"
        twin_a = make_kb(s, ws1, owner, title=f"Notes {tag}")
        twin_b = make_kb(s, ws2, owner, title=f"notes {tag}")  # the same title in another workspace
        theirs = make_kb(s, make_workspace(s, other_t, stranger), stranger, title=f"Theirs {tag}")
        make_doc(s, handbook, owner)
        make_doc(s, handbook, owner, type="folder")
        s.commit()
        return {
            "tag": tag,
            "tenant": t.id,
            "handbook": handbook.id,
            "twins": {twin_a.id, twin_b.id},
            "theirs": theirs.id,
            "tenant_slug": t.slug,
        }


def test_by_id_slug_in_any_case_or_a_title_only_one_has(db, kbs):
    tag = kbs["tag"]
    for ref in (str(kbs["handbook"]), f"handbook-{tag}", f"HANDBOOK-{tag}", f"Handbook {tag}", f" handbook {tag} "):
        assert find_knowledge_base(db, ref).id == kbs["handbook"], ref


def test_a_title_several_have_is_a_conflict_naming_them(db, kbs):
    with pytest.raises(Conflict) as exc:
        find_knowledge_base(db, f"Notes {kbs['tag']}")
    assert "give the id of one" in exc.value.detail
    assert all(str(i) in exc.value.detail for i in kbs["twins"])


def test_another_tenants_is_not_found_within_a_tenant(db, kbs):
    assert find_knowledge_base(db, str(kbs["theirs"])).id == kbs["theirs"]  # the operator's view: all tenants
    for ref in (str(kbs["theirs"]), f"Theirs {kbs['tag']}"):
        with pytest.raises(NotFound) as exc:
            find_knowledge_base(db, ref, kbs["tenant"])
        assert "in this tenant" in exc.value.detail and "Theirs" not in exc.value.detail.replace(ref, "")


def test_unknown_and_empty_references(db, kbs):
    with pytest.raises(NotFound) as exc:
        find_knowledge_base(db, "no-such-kb")
    assert "openkb kb list" in exc.value.detail
    with pytest.raises(NotFound):
        find_knowledge_base(db, str(uuid.uuid4()))
    with pytest.raises(ValidationError):
        find_knowledge_base(db, "  ")


def test_the_operator_list_counts_pages_and_folders(db, kbs):
    rows = {r["id"]: r for r in operator_list(db, tenant_id=kbs["tenant"])}
    assert str(kbs["theirs"]) not in rows and {str(i) for i in kbs["twins"]} <= set(rows)
    h = rows[str(kbs["handbook"])]
    assert (h["pages"], h["folders"], h["slug"], h["tenant"]) == (1, 1, f"handbook-{kbs['tag']}", kbs["tenant_slug"])
    assert str(kbs["theirs"]) in {r["id"] for r in operator_list(db)}


def test_openkb_kb_list_and_export_by_title(kbs, database_url, test_home, tmp_path):
    from tests.test_cli import run

    env = {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}
    p = run(["kb", "list", "--tenant", kbs["tenant_slug"], "--json"], env)
    assert p.returncode == 0, p.stderr
    assert str(kbs["handbook"]) in {r["id"] for r in json.loads(p.stdout)}
    p = run(["kb", "list", "--tenant", kbs["tenant_slug"]], env)
    assert p.returncode == 0 and str(kbs["handbook"]) in p.stdout  # piped: whole ids, not "ca6ce7…"
    assert f"Handbook {kbs['tag']}" in p.stdout
    out = tmp_path / "handbook.zip"
    p = run(["export", f"handbook {kbs['tag']}", "--out", str(out)], env)
    assert p.returncode == 0 and out.exists(), p.stderr
    p = run(["export", f"Notes {kbs['tag']}", "--out", str(tmp_path / "n.zip")], env)
    assert p.returncode != 0 and "give the id of one" in p.stderr and "Traceback" not in p.stderr
