"""Registrations, installations, credentials and the user's switches (docs/apps.md).

* ``register_app``: a manifest (name, description, requested permission strings, declared
  predicates, reason, network hosts) checked by the permission-string parser as a whole.
* ``install_app``: binds the app to the calling user in their tenant, creates the user's
  personal space (``diary`` and ``keep``) if it is missing, one grant row per requested string
  **all switched off**, and a ``kbapp_...`` credential returned once (SHA-256 stored).
* ``set_grant`` / ``set_selected_collections``: the user's switches and ``user-selected``
  choices. Nothing caches them: ``resolve_caller`` re-reads them on every call, so a switch
  applies to the very next call.

Every service here takes the *user's* principal (session or PAT); the app's own calls go
through ``openkb.apps.knowledge`` with an ``AppCaller``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.apps import refs as R
from openkb.apps.quotas import TIME_ZONE_SQL
from openkb.apps.strings import parse_set, sentences
from openkb.audit import record_audit
from openkb.content import limits
from openkb.content.actor import Actor
from openkb.content.knowledge_bases import create_knowledge_base
from openkb.content.upsert import KEY_LOCK_CLASS
from openkb.content.workspaces import create_workspace
from openkb.errors import AlreadyExists, NotFound, Unauthenticated, ValidationError
from openkb.facts.mentions import record_selected
from openkb.facts.vocabulary import check_declared, declare_app_predicates
from openkb.models import (
    App,
    AppCredential,
    AppGrant,
    AppInstallation,
    AppPersonalSpace,
    AppSelectedCollection,
)
from openkb.models._base import utcnow
from openkb.permissions import Principal, access_document, access_knowledge_base
from openkb.security import hash_token, new_token

TOKEN_PREFIX = "kbapp"
# what the installation's principal may do before grants narrow it: read, search and write
APP_SCOPES = frozenset({"kb:read", "kb:search", "doc:read", "kb:write", "doc:write"})
MAX_HOSTS = 50


def _user(principal: Principal) -> tuple[uuid.UUID, uuid.UUID]:
    if principal.kind != "user" or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in to manage apps")
    return principal.user_id, principal.tenant_id


def _hosts(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_HOSTS or not all(isinstance(h, str) for h in value):
        raise ValidationError(f"network hosts must be a list of at most {MAX_HOSTS} host names", field="hosts")
    out = []
    for h in value:
        h = h.strip().lower()
        if not h or "/" in h or ":" in h or " " in h or len(h) > 253:
            raise ValidationError(f"not a host name: {h!r}", field="hosts")
        out.append(h)
    return sorted(set(out))


# --- apps -------------------------------------------------------------------------------------


def parse_manifest(raw: bytes) -> dict[str, Any]:
    """A manifest file's bytes as the object ``register_app``'s arguments come from: UTF-8 JSON,
    an object, its ``knowledge`` and ``network`` objects too. Anything else is the operator's
    typo (a list, a truncated file, a Latin-1 export), refused in one line instead of a crash
    deep in the registration."""
    import json

    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValidationError("the manifest is not UTF-8 text", field="manifest") from None
    except ValueError as exc:  # JSONDecodeError, or a number past Python's digit limit
        raise ValidationError(f"the manifest is not JSON: {exc}", field="manifest") from None
    if not isinstance(data, dict):
        raise ValidationError('the manifest must be a JSON object ({"name": ...})', field="manifest")
    for key in ("knowledge", "network"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise ValidationError(f"the manifest's {key} must be a JSON object", field=f"manifest.{key}")
    return data


def register_app(
    session: Session,
    principal: Principal,
    *,
    name: str,
    description: str = "",
    permissions: list[str],
    predicates: list[dict[str, Any]] | None = None,
    reason: str | None = None,
    hosts: list[str] | None = None,
) -> App:
    """Any active user of the tenant (or an operator at the command line) registers an app."""
    uid, tid = _user(principal)
    name = limits.check_name(name, "name")
    description = limits.check_name(description or "", "description", allow_empty=True)
    if reason is not None:
        reason = limits.check_name(reason, "reason", allow_empty=True) or None
    perms = [str(p) for p in parse_set(permissions)]
    preds = check_declared(predicates or [])  # names, cardinality, description (docs/facts.md#predicates)
    for p in preds:
        if not isinstance(p, dict) or not isinstance(p.get("predicate"), str):
            raise ValidationError("each predicate needs a 'predicate' name", field="predicates")
        desc = p.get("description")
        if not isinstance(desc, str) or not desc.strip() or len(desc) > 200:
            raise ValidationError("each predicate needs a description of at most 200 characters", field="predicates")
        if p.get("cardinality", "many") not in ("one", "many"):
            raise ValidationError("cardinality is one or many", field="predicates")
    host_list = _hosts(hosts)
    if session.exec(select(App.id).where(col(App.tenant_id) == tid, col(App.name) == name)).first():
        raise AlreadyExists(f"an app named {name!r} is already registered")
    app = App(
        tenant_id=tid,
        name=name,
        description=description,
        reason=reason,
        manifest={"permissions": perms, "predicates": preds, "reason": reason, "network": {"hosts": host_list}},
        permissions=perms,
        allowed_hosts=host_list,
        registered_by=uid,
    )
    session.add(app)
    session.flush()
    record_audit(
        session, tenant_id=tid, actor=principal, action="app.registered", object_type="app", object_id=app.id,
        metadata={"name": name, "permissions": perms},
    )  # fmt: skip
    return app


def list_apps(session: Session, principal: Principal) -> list[App]:
    _, tid = _user(principal)
    return list(session.exec(select(App).where(col(App.tenant_id) == tid).order_by(col(App.name))).all())


def access_app(session: Session, principal: Principal, app_ref: str | uuid.UUID) -> App:
    """An app of the caller's tenant, by id or name; NotFound otherwise."""
    _, tid = _user(principal)
    q = select(App).where(col(App.tenant_id) == tid)
    try:
        app = session.exec(q.where(col(App.id) == uuid.UUID(str(app_ref)))).first()
    except ValueError:
        app = session.exec(q.where(col(App.name) == str(app_ref))).first()
    if app is None:
        raise NotFound("app not found")
    return app


def app_out(app: App) -> dict[str, Any]:
    return {
        "id": app.id,
        "name": app.name,
        "description": app.description,
        "reason": app.reason,
        "permissions": [{"permission": p, "sentences": sentences(p)} for p in app.permissions],
        "predicates": app.manifest.get("predicates", []),
        "hosts": list(app.allowed_hosts),
        "status": app.status,
        "created_at": app.created_at,
    }


# --- personal space ---------------------------------------------------------------------------


def personal_space(session: Session, principal: Principal) -> AppPersonalSpace:
    """The user's personal workspace with builtin ``diary`` and ``keep`` (created on first use,
    as ordinary content the user owns: the web app shows and manages it like any other)."""
    uid, tid = _user(principal)
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 18))"), {"k": f"space:{tid}:{uid}"})
    row = session.exec(
        select(AppPersonalSpace).where(col(AppPersonalSpace.tenant_id) == tid, col(AppPersonalSpace.user_id) == uid)
    ).first()
    if row is not None:
        return row
    actor = Actor.of(Principal.user(uid, tid))
    ws = create_workspace(session, actor, name="Personal", slug=f"personal-{str(uid)[:8]}")
    diary = create_knowledge_base(session, actor, workspace_id=ws.id, title="diary", slug="diary", visibility="private")
    keep = create_knowledge_base(session, actor, workspace_id=ws.id, title="keep", slug="keep", visibility="private")
    row = AppPersonalSpace(tenant_id=tid, user_id=uid, workspace_id=ws.id, diary_kb_id=diary.id, keep_kb_id=keep.id)
    session.add(row)
    session.flush()
    return row


# --- installations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    installation: AppInstallation
    credential: str  # plaintext, shown once


def install_app(session: Session, principal: Principal, app_ref: str | uuid.UUID) -> Installed:
    uid, tid = _user(principal)
    app = access_app(session, principal, app_ref)
    if app.status != "active":
        raise ValidationError("this app is disabled", field="app_id")
    live = session.exec(
        select(AppInstallation.id).where(
            col(AppInstallation.app_id) == app.id,
            col(AppInstallation.user_id) == uid,
            col(AppInstallation.status) == "active",
        )
    ).first()
    if live is not None:
        raise AlreadyExists(f"{app.name!r} is already installed")
    personal_space(session, principal)
    inst = AppInstallation(tenant_id=tid, app_id=app.id, user_id=uid, allowed_hosts=list(app.allowed_hosts))
    session.add(inst)
    session.flush()
    for p in app.permissions:
        session.add(AppGrant(installation_id=inst.id, permission=p, enabled=False))
    declare_app_predicates(session, tid, app)  # kept after uninstall (docs/facts.md#predicates)
    token = _new_credential(session, inst)
    record_audit(
        session, tenant_id=tid, actor=principal, action="app.installed", object_type="app_installation",
        object_id=inst.id, metadata={"app_id": str(app.id), "app": app.name},
    )  # fmt: skip
    return Installed(inst, token)


def _new_credential(session: Session, inst: AppInstallation) -> str:
    token, h = new_token(TOKEN_PREFIX)
    session.add(AppCredential(installation_id=inst.id, token_hash=h))
    session.flush()
    return token


def access_installation(session: Session, principal: Principal, installation_id: uuid.UUID) -> AppInstallation:
    """One of the caller's own installations (live or uninstalled); NotFound for anyone else's."""
    uid, tid = _user(principal)
    inst = session.get(AppInstallation, installation_id)
    if inst is None or inst.user_id != uid or inst.tenant_id != tid:
        raise NotFound("installation not found")
    return inst


def _live(inst: AppInstallation) -> None:
    if inst.status != "active":
        raise ValidationError("the app is uninstalled", field="installation_id")


def list_installations(
    session: Session, principal: Principal, *, include_uninstalled: bool = False
) -> list[dict[str, Any]]:
    uid, tid = _user(principal)
    q = select(AppInstallation, App).join(App, col(App.id) == col(AppInstallation.app_id))
    q = q.where(col(AppInstallation.user_id) == uid, col(AppInstallation.tenant_id) == tid)
    if not include_uninstalled:
        q = q.where(col(AppInstallation.status) == "active")
    rows = session.exec(q.order_by(col(AppInstallation.created_at))).all()
    return [installation_out(session, inst, app) for inst, app in rows]


_LAST_USED = text("""
SELECT greatest((SELECT max(last_used_at) FROM app_credentials WHERE installation_id = :i),
                (SELECT max(g.last_used_at) FROM mcp_oauth_grants g JOIN mcp_oauth_clients oc ON oc.id = g.client_id
                 WHERE oc.installation_id = :i))
""")


def installation_out(session: Session, inst: AppInstallation, app: App | None = None) -> dict[str, Any]:
    app = app or session.get(App, inst.app_id)
    assert app is not None
    grants = session.exec(select(AppGrant).where(col(AppGrant.installation_id) == inst.id)).all()
    enabled = {g.permission: g.enabled for g in grants}
    selected = session.exec(
        select(AppSelectedCollection).where(col(AppSelectedCollection.installation_id) == inst.id)
    ).all()
    return {
        "id": inst.id,
        "app": {"id": app.id, "name": app.name, "description": app.description, "reason": app.reason},
        "status": inst.status,
        "created_at": inst.created_at,
        "uninstalled_at": inst.uninstalled_at,
        "uninstall_mode": inst.uninstall_mode,
        "uninstall_run_id": inst.uninstall_run_id,
        # the app's latest call with any of its credentials, to the minute (None: never used):
        # ``kbapp_`` credentials and the grants of its OAuth client (also stamped when a token is
        # issued or refreshed); ``greatest`` skips NULLs
        "last_used_at": session.execute(_LAST_USED, {"i": inst.id}).scalar(),
        "grants": [
            {"permission": p, "enabled": enabled.get(p, False), "sentences": sentences(p)}
            for p in app.permissions
            if p in enabled
        ],
        "selected_collections": [
            {"knowledge_base_id": s.knowledge_base_id, "document_id": s.document_id} for s in selected
        ],
        "contributions": contributions(session, inst.id),
    }


def contributions(session: Session, installation_id: uuid.UUID) -> dict[str, int]:
    """What the uninstall dialog shows: documents it wrote that still exist, collections it
    created (facts come with the next issue)."""
    docs = session.execute(
        text(
            "SELECT count(*) FROM app_documents a JOIN documents d ON d.id = a.document_id "
            "WHERE a.installation_id = :i AND d.status <> 'deleted' AND d.type = 'page'"
        ),
        {"i": installation_id},
    ).scalar_one()
    cols = session.execute(
        text(
            "SELECT count(*) FROM app_collections c LEFT JOIN documents d ON d.id = c.document_id "
            "JOIN knowledge_bases k ON k.id = c.knowledge_base_id "
            "WHERE c.installation_id = :i AND k.status = 'active' AND (c.document_id IS NULL OR d.status <> 'deleted')"
        ),
        {"i": installation_id},
    ).scalar_one()
    facts = session.execute(
        text("SELECT count(*) FROM facts WHERE installation_id = :i AND valid_to IS NULL"), {"i": installation_id}
    ).scalar_one()
    return {"documents": int(docs), "collections": int(cols), "facts": int(facts)}


def set_grant(
    session: Session, principal: Principal, installation_id: uuid.UUID, permission: str, enabled: bool
) -> AppGrant:
    """Switch one requested string on or off; the next call of the app sees it."""
    inst = access_installation(session, principal, installation_id)
    _live(inst)
    g = session.exec(
        select(AppGrant).where(col(AppGrant.installation_id) == inst.id, col(AppGrant.permission) == permission)
    ).first()
    if g is None:
        raise NotFound("the app did not ask for this permission")
    if g.enabled != enabled:
        g.enabled = enabled
        g.updated_at = utcnow()
        session.add(g)
        session.flush()
        record_audit(
            session, tenant_id=inst.tenant_id, actor=principal, action="app.grant_changed",
            object_type="app_installation", object_id=inst.id,
            metadata={"permission": permission, "before": not enabled, "after": enabled},
        )  # fmt: skip
    return g


def set_selected_collections(
    session: Session, principal: Principal, installation_id: uuid.UUID, items: list[dict[str, Any]]
) -> list[AppSelectedCollection]:
    """Replace the ``user-selected`` collections: knowledge bases (``document_id`` absent) or
    folders the user can read. Each includes everything below it, present and future.

    An item names a folder (``document_id``; a ``knowledge_base_id`` beside it, as the web app
    sends, must be the folder's) or a knowledge base (``knowledge_base_id`` alone); an item
    naming neither is a ``ValidationError``, checked before anything is looked up."""
    inst = access_installation(session, principal, installation_id)
    _live(inst)
    for it in items:
        if not isinstance(it, dict) or (it.get("document_id") is None and it.get("knowledge_base_id") is None):
            raise ValidationError(
                "each collection names a knowledge base (knowledge_base_id) or a folder (document_id)",
                field="collections",
            )
    wanted: list[tuple[uuid.UUID, uuid.UUID | None]] = []
    for it in items:
        doc_id, kb_id = it.get("document_id"), it.get("knowledge_base_id")
        if doc_id is not None:
            doc = access_document(session, principal, doc_id).document
            if doc.type != "folder":
                raise ValidationError("only knowledge bases and folders are collections", field="document_id")
            if kb_id is not None and str(kb_id) != str(doc.knowledge_base_id):
                raise ValidationError("the folder is not in this knowledge base", field="knowledge_base_id")
            wanted.append((doc.knowledge_base_id, doc.id))
        else:
            kb = access_knowledge_base(session, principal, kb_id).knowledge_base
            wanted.append((kb.id, None))
    before: set[uuid.UUID] = set()
    for old in session.exec(
        select(AppSelectedCollection).where(col(AppSelectedCollection.installation_id) == inst.id)
    ).all():
        before.add(old.knowledge_base_id)
        session.delete(old)
    session.flush()
    rows = []
    for kb_id, doc_id in dict.fromkeys(wanted):
        r = AppSelectedCollection(installation_id=inst.id, knowledge_base_id=kb_id, document_id=doc_id)
        session.add(r)
        rows.append(r)
    session.flush()
    # the user's entities named in what is indexed there already (docs/facts.md#mentions)
    record_selected(session, inst.tenant_id, inst.user_id, {k for k, _ in wanted} - before)
    record_audit(
        session, tenant_id=inst.tenant_id, actor=principal, action="app.collections_selected",
        object_type="app_installation", object_id=inst.id,
        metadata={"collections": [[str(k), str(d) if d else None] for k, d in dict.fromkeys(wanted)]},
    )  # fmt: skip
    return rows


def rotate_credential(session: Session, principal: Principal, installation_id: uuid.UUID) -> str:
    """A new ``kbapp_...`` for the installation; the old ones stop working at once."""
    inst = access_installation(session, principal, installation_id)
    _live(inst)
    _revoke_credentials(session, inst.id)
    token = _new_credential(session, inst)
    record_audit(
        session, tenant_id=inst.tenant_id, actor=principal, action="app.credential_rotated",
        object_type="app_installation", object_id=inst.id,
    )  # fmt: skip
    return token


def _revoke_credentials(session: Session, installation_id: uuid.UUID) -> None:
    session.execute(
        text(
            "UPDATE app_credentials SET status = 'revoked', revoked_at = now() "
            "WHERE installation_id = :i AND status = 'active'"
        ),
        {"i": installation_id},
    )


# --- the caller -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppCaller:
    """One app call: the installation, the user's principal it acts as, and what is switched on
    (read from PostgreSQL for this call; never cached beyond it)."""

    installation_id: uuid.UUID
    tenant_id: uuid.UUID
    user_id: uuid.UUID
    app_id: uuid.UUID
    app_name: str
    principal: Principal
    grants: frozenset[str]
    selected: tuple[tuple[uuid.UUID, uuid.UUID | None], ...]
    created: tuple[tuple[uuid.UUID, uuid.UUID | None], ...]
    diary_kb_id: uuid.UUID | None
    keep_kb_id: uuid.UUID | None
    allowed_hosts: tuple[str, ...]
    secret: str
    time_zone: str = "UTC"  # the user's (docs/apps.md#limits-and-quotas): the quota's local day
    # a keyed write into ``diary``/``keep`` located in the same statement (``resolve_caller``'s
    # ``keyed``): (builtin, key, row or None); ``knowledge.documents_upsert`` uses it once
    keyed: tuple[str, str, Any] | None = None

    def has(self, permission: str) -> bool:
        """Switched on; ``entities.write:<kind>`` includes ``entities.resolve:<kind>``."""
        if permission in self.grants:
            return True
        if permission.startswith("entities.resolve:"):
            return "entities.write:" + permission.partition(":")[2] in self.grants
        return False

    def ref(self, kind: str, object_id: uuid.UUID) -> str:
        return R.make_ref(self.secret, self.installation_id, kind, object_id)

    def read_ref(self, ref: str, kinds: str, what: str) -> tuple[str, uuid.UUID]:
        return R.read_ref(self.secret, self.installation_id, ref, kinds, what)


_CALLER_SQL_T = """
{touch}SELECT i.id, i.tenant_id, i.user_id, i.app_id, a.name, i.allowed_hosts,
       ARRAY(SELECT g.permission FROM app_grants g WHERE g.installation_id = i.id AND g.enabled) AS grants,
       ARRAY(SELECT s.knowledge_base_id::text || '/' || coalesce(s.document_id::text, '')
             FROM app_selected_collections s WHERE s.installation_id = i.id) AS selected,
       ARRAY(SELECT c.knowledge_base_id::text || '/' || coalesce(c.document_id::text, '')
             FROM app_collections c WHERE c.installation_id = i.id) AS created,
       ps.diary_kb_id, ps.keep_kb_id, {tz} AS time_zone{cols}
FROM {source}
JOIN apps a ON a.id = i.app_id AND a.status = 'active'
JOIN users u ON u.id = i.user_id AND u.status = 'active'
JOIN tenant_memberships tmm ON tmm.user_id = i.user_id AND tmm.tenant_id = i.tenant_id
LEFT JOIN app_personal_spaces ps ON ps.tenant_id = i.tenant_id AND ps.user_id = i.user_id{joins}
WHERE {where}
"""
# the document a keyed write into a builtin collection names, with its writer: what
# ``reach.locate_key`` answers for a top-level document, without its own round trip. The same
# statement takes the key's advisory lock (``upsert_by_key``'s, ``key_locked=True`` then skips
# its own statement for it). Trap: the lock is granted after this statement's snapshot, so a
# document created meanwhile by the lock's previous holder is not in ``k_*``: a key found
# missing here is looked up again by ``upsert_by_key`` (a statement of its own, fresh snapshot).
_KEYED_COLS = """,
       kd.id AS k_id, kd.knowledge_base_id AS k_kb, kd.type AS k_type, kd.status AS k_status,
       kd.parent_id AS k_parent, ka.installation_id AS k_writer,
       pg_advisory_xact_lock(hashtextextended('key:' || (CASE WHEN :b = 'diary' THEN ps.diary_kb_id
                                                    ELSE ps.keep_kb_id END)::text || ':' || :key, {lock})) IS NULL
         AS k_locked"""
_KEYED_JOINS = """
LEFT JOIN documents kd ON kd.knowledge_base_id = (CASE WHEN :b = 'diary' THEN ps.diary_kb_id ELSE ps.keep_kb_id END)
                      AND kd.external_key = :key
LEFT JOIN app_documents ka ON ka.document_id = kd.id"""
# ``last_used_at`` at most once a minute per credential, in the statement that reads it: the
# data-modifying CTE runs whether or not the SELECT refers to it, and writes only when the
# stamp is a minute old. ``SKIP LOCKED``: a concurrent call that already holds the row (its
# own touch, until its transaction ends) is not waited for — it is stamping the same minute.
# Trap: the touch belongs to the call's transaction, so a call that fails and rolls back does
# not count as a use.
_TOUCH = """WITH touched AS (
    UPDATE app_credentials SET last_used_at = now()
    WHERE id IN (SELECT id FROM app_credentials
                 WHERE token_hash = :h AND status = 'active'
                   AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
                 FOR UPDATE SKIP LOCKED)
    RETURNING id
)
"""
_BY_CREDENTIAL = "app_credentials c\nJOIN app_installations i ON i.id = c.installation_id AND i.status = 'active'"


def caller_statements(*, touch: str, source: str, where: str, cols: str = "") -> tuple[Any, Any]:
    """The caller's statement and its keyed variant (``resolve_keyed``) for one kind of
    credential: ``source`` joins the credential to ``app_installations i``; ``cols`` adds what
    the credential's own checks need."""

    def one(keyed: bool) -> Any:
        return text(
            _CALLER_SQL_T.format(
                touch=touch, tz=TIME_ZONE_SQL, source=source, where=where,
                cols=cols + (_KEYED_COLS.format(lock=KEY_LOCK_CLASS) if keyed else ""),
                joins=_KEYED_JOINS if keyed else "",
            )
        )  # fmt: skip

    return one(False), one(True)


_CALLER_SQL, _CALLER_KEYED_SQL = caller_statements(
    touch=_TOUCH, source=_BY_CREDENTIAL, where="c.token_hash = :h AND c.status = 'active'"
)
_CALLER_BY_ID_SQL = text(
    _CALLER_SQL_T.format(
        touch="", tz=TIME_ZONE_SQL, source="app_installations i", where="i.id = :i AND i.status = 'active'", cols="",
        joins="",
    )
)  # fmt: skip


def _pairs(values: list[str]) -> tuple[tuple[uuid.UUID, uuid.UUID | None], ...]:
    out = []
    for v in values or ():
        kb, _, doc = v.partition("/")
        out.append((uuid.UUID(kb), uuid.UUID(doc) if doc else None))
    return tuple(out)


def resolve_caller(
    session: Session, token: str, secret: str, *, keyed: tuple[str | None, str | None] | None = None
) -> AppCaller:
    """The installation behind a ``kbapp_...`` credential, with its switches as of now (one
    statement). Unknown, revoked, uninstalled or disabled, or a user no longer active (e.g.
    suspended) or no longer a member of the installation's tenant: ``Unauthenticated``, as the
    OAuth path answers. Trap: this is checked here, not left to the permission service, because
    facts and entities are the user's own rows and go through no ``access_*`` check that would
    notice the user's status.

    ``keyed=(collection, key)``: the call is a keyed ``documents.upsert``; when the collection
    is ``diary`` or ``keep`` the same statement also finds the document with that key and takes
    the key's lock (the most common app write pays no round trip for its credential,
    docs/apps.md#figures). Nothing is decided from it here: ``documents_upsert`` still checks
    the grant and the place."""
    if not token or not token.startswith(TOKEN_PREFIX + "_"):
        raise Unauthenticated("not an app credential")
    row, caller = resolve_keyed(session, (_CALLER_SQL, _CALLER_KEYED_SQL), {"h": hash_token(token)}, keyed, secret)
    if row is None:
        raise Unauthenticated("the app credential is invalid or revoked")
    return caller  # type: ignore[return-value]


def resolve_keyed(
    session: Session,
    statements: tuple[Any, Any],
    params: dict[str, Any],
    keyed: tuple[str | None, str | None] | None,
    secret: str,
) -> tuple[Any, AppCaller | None]:
    """Run a credential's caller statement (the keyed variant for a keyed write into
    ``diary``/``keep``): its row (None: no such live credential) and the caller built from it."""
    builtin, key = keyed or (None, None)
    # only a key the write will accept as it is (stripped, no NUL: PostgreSQL refuses NUL in a
    # parameter, and the write's own check must be the one that answers)
    if builtin in ("diary", "keep") and isinstance(key, str) and key and key == key.strip() and "\x00" not in key:
        row = session.execute(statements[1], {**params, "b": builtin, "key": key}).first()
    else:
        row, builtin = session.execute(statements[0], params).first(), None
    if row is None:
        return None, None
    caller = caller_from_row(row, secret)
    if builtin is not None:
        found = row if row.k_id is not None else None
        caller = replace(caller, keyed=(builtin, str(key), found))
    return row, caller


def caller_from_row(row: Any, secret: str) -> AppCaller:
    return AppCaller(
        installation_id=row.id,
        tenant_id=row.tenant_id,
        user_id=row.user_id,
        app_id=row.app_id,
        app_name=row.name,
        principal=Principal.user(row.user_id, row.tenant_id, scopes=APP_SCOPES),
        grants=frozenset(row.grants or ()),
        selected=_pairs(row.selected),
        created=_pairs(row.created),
        diary_kb_id=row.diary_kb_id,
        keep_kb_id=row.keep_kb_id,
        allowed_hosts=tuple(row.allowed_hosts or ()),
        secret=secret,
        time_zone=row.time_zone,
    )


def caller_for_installation(session: Session, installation_id: uuid.UUID, secret: str) -> AppCaller:
    """The same caller as ``resolve_caller``, by installation id (CLI, tests, bench)."""
    row = session.execute(_CALLER_BY_ID_SQL, {"i": installation_id}).first()
    if row is None:
        raise NotFound("installation not found")
    return caller_from_row(row, secret)


def check_source_uri(caller: AppCaller, uri: str) -> str:
    """An http(s) URL on one of the installation's hosts, else ``SourceUriNotAllowed``
    (docs/apps.md#api). Trap: ``urlsplit`` and ``.hostname`` raise ``ValueError`` on a malformed
    bracketed host (``http://[::1``, ``http://[example.org]/x``): that is the same refusal."""
    from openkb.errors import SourceUriNotAllowed

    try:
        parts = urlsplit(uri.strip())
        host = parts.hostname
    except ValueError:
        raise SourceUriNotAllowed("sourceUri must be an http(s) URL", field="sourceUri") from None
    if parts.scheme not in ("http", "https") or not host:
        raise SourceUriNotAllowed("sourceUri must be an http(s) URL", field="sourceUri")
    if host.lower() not in caller.allowed_hosts:
        raise SourceUriNotAllowed(f"sourceUri host {host!r} is not among the app's network hosts", field="sourceUri")
    return uri.strip()


__all__ = [
    "AppCaller",
    "Installed",
    "access_app",
    "access_installation",
    "app_out",
    "caller_for_installation",
    "install_app",
    "installation_out",
    "list_apps",
    "list_installations",
    "personal_space",
    "register_app",
    "resolve_caller",
    "rotate_credential",
    "set_grant",
    "set_selected_collections",
]


def operator_act_as(session: Session, operator: Principal, user: str, tenant: str | None = None) -> Principal:
    """The operator at the command line (``openkb app ...``) acts for a user: registering,
    installing, switching and uninstalling are then exactly the user's own actions (audited as
    such, with ``via: cli``). A tenant admin may do it only inside its tenant."""
    from openkb.accounts.tokens import _operator_target

    u, tid = _operator_target(session, operator, user, tenant)
    return Principal.user(u.id, tid)


def operator_list_apps(session: Session, operator: Principal, tenant: str | None = None) -> list[App]:
    """The apps of a tenant (default: the default tenant) for an administrator of it."""
    from openkb.accounts.users import access_admin, get_tenant
    from openkb.bootstrap import default_tenant

    scope = access_admin(session, operator)
    t = get_tenant(session, tenant) if tenant else default_tenant(session)
    if not scope.is_system_admin and scope.tenant_id != t.id:
        raise NotFound(f"no tenant {tenant!r}")
    return list(session.exec(select(App).where(col(App.tenant_id) == t.id).order_by(col(App.name))).all())
