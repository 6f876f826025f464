"""A token without the scope a write needs hears which scope (issue 10 §8), before anything is
looked up; it used to get the object's permission message ("not allowed to create documents
here"), as if the user lacked a role."""

from __future__ import annotations

import re
import uuid

import pytest
from fastapi.routing import APIRoute

from tests.api.helpers import app_routes
from tests.content.http_world import sha

READ_ONLY = ("kb:read", "kb:search", "doc:read")


def _refused(r, scope: str) -> None:
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "INSUFFICIENT_SCOPE", r.text
    assert r.json()["detail"] == f"token lacks scope {scope}"


def _owner_token(w, scopes: tuple[str, ...]):
    """Another token of the world's owner (who may do everything there), with ``scopes``."""
    from openkb.accounts.tokens import issue_pat

    with w.committed() as s:
        _, token = issue_pat(s, tenant_id=w.tenant.id, user_id=w.users["owner"], name="narrow", scopes=list(scopes))
        s.commit()
    return w.client(token)


def test_read_only_token_of_the_owner_cannot_write_documents(w):
    page = w.doc("Page", markdown="a\n")
    ro = _owner_token(w, READ_ONLY)
    kb, doc_id = w.kb["id"], page["id"]
    _refused(ro.post("/api/documents", json={"knowledge_base_id": kb, "title": "T"}), "doc:write")
    _refused(ro.put(f"/api/documents/{doc_id}", json={"title": "T"}), "doc:write")
    _refused(
        ro.post(
            f"/api/documents/{doc_id}/versions",
            json={"base_version_id": page["current_version_id"], "markdown": "b\n", "markdown_hash": sha("b\n")},
        ),
        "doc:write",
    )
    _refused(ro.delete(f"/api/documents/{doc_id}"), "doc:write")
    _refused(ro.put(f"/api/knowledge-bases/{kb}/documents/by-key/k", json={"title": "T", "markdown": "x"}), "doc:write")
    _refused(ro.post("/api/uploads", files={"file": ("a.txt", b"hi", "text/plain")}), "doc:write")
    _refused(ro.post("/api/changes/revert", json={"run_id": "x"}), "doc:write")
    _refused(ro.post("/api/knowledge-bases", json={"workspace_id": w.ws["id"], "title": "K"}), "kb:write")
    _refused(ro.put(f"/api/workspaces/{w.ws['id']}", json={"name": "W"}), "kb:write")
    # checked before the lookup: an object that doesn't exist gets the same answer (nothing leaks)
    _refused(ro.put(f"/api/documents/{uuid.uuid4()}", json={"title": "T"}), "doc:write")
    assert w.c["owner"].get(f"/api/documents/{doc_id}").json()["markdown"] == "a\n"


def test_each_write_scope_opens_its_own_routes(w):
    docs_only = _owner_token(w, ("kb:read", "doc:read", "doc:write"))
    kbs_only = _owner_token(w, ("kb:read", "doc:read", "kb:write"))
    assert docs_only.post("/api/documents", json={"knowledge_base_id": w.kb["id"], "title": "T"}).status_code == 201
    _refused(docs_only.post("/api/knowledge-bases", json={"workspace_id": w.ws["id"], "title": "K"}), "kb:write")
    assert kbs_only.post("/api/knowledge-bases", json={"workspace_id": w.ws["id"], "title": "K"}).status_code == 201
    _refused(kbs_only.post("/api/documents", json={"knowledge_base_id": w.kb["id"], "title": "T"}), "doc:write")


def test_with_the_scope_the_permission_message_is_unchanged(w):
    """The scope check does not replace the permission check: a guest with doc:write still can't."""
    r = w.c["guest"].post("/api/documents", json={"knowledge_base_id": w.kb["id"], "title": "T"})
    assert r.status_code in (403, 404), r.text
    assert r.json()["error"] != "INSUFFICIENT_SCOPE"


def test_admin_scope_is_named(live_server, committed):
    from tests.api.helpers import bearer_client, make_user_with_pat

    _, token = make_user_with_pat(committed, role="tenant_admin", scopes=["kb:read"])
    with bearer_client(live_server, token) as b:
        _refused(b.get("/api/admin/users"), "admin")
        _refused(b.post("/api/admin/groups", json={"name": "G"}), "admin")


# Unsafe routes a read-only token may use, or that decide by themselves (not content writes).
# The apps' knowledge API takes only an installation's kbapp_ credential, which its permission
# strings narrow (docs/apps.md): a personal token is not an app credential there (401).
_NOT_CONTENT_WRITES = re.compile(
    r"^/+(retrieval|api/search$|api/auth/|api/me/tokens|api/me/oauth-grants|api/me/(profile|password|sessions)|oauth/|api/invitations/\{token\}/accept"
    r"|api/share/|api/apps/v1/knowledge/)"
)


@pytest.mark.parametrize("scopes", [READ_ONLY])
def test_every_content_write_route_checks_a_scope(app, w, scopes):
    """Walks the app: every unsafe route outside auth, invitations-by-token and share visits
    refuses a read-only token with INSUFFICIENT_SCOPE, whatever the ids (a new route can't forget)."""
    ro = w.add_user("walker", scopes=scopes)
    silent = []
    n = 0
    for route in app_routes(app):
        if not isinstance(route, APIRoute) or _NOT_CONTENT_WRITES.match(route.path):
            continue
        for method in route.methods - {"GET", "HEAD", "OPTIONS"}:
            url = re.sub(r"\{[^}]+\}", lambda m: "k" if m.group(0) == "{key:path}" else str(uuid.uuid4()), route.path)
            r = ro.request(method, url, json={})
            n += 1
            if (
                r.status_code != 403
                or r.json().get("error") != "INSUFFICIENT_SCOPE"
                or not r.json()["detail"].startswith("token lacks scope")
            ):
                silent.append(f"{method} {route.path} -> {r.status_code} {r.text[:80]}")
    assert n >= 30
    assert not silent, "\n".join(silent)
