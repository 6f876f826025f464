"""Knowledge bases: list (readable only), create (caller becomes owner), read, update.

Visibility and the two configurable capability cells live in ``openkb.permissions.settings``
(manager+, audited); title, slug, description and status are plain content fields (manager+
too). Decisions:

* Who may create a knowledge base: workspace owner, admin and member — not guests (docs/permissions.md#roles,
  "guest: restricted member"): ``WsAction.CREATE_KNOWLEDGE_BASE`` of the permission rules.
* ``settings`` accepts the two capability cells and other small flags, but never model or
  provider configuration (docs/retrieval.md#principles: a knowledge-base owner cannot configure models).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import func, text
from sqlmodel import Session, col, select

from openkb.config import Settings
from openkb.content import limits
from openkb.content.actor import Actor
from openkb.content.changes import jsonable, record_change
from openkb.content.workspaces import check_slug, choose_slug, slugify, unique_slug
from openkb.errors import AlreadyExists, Conflict, ModelSettingsForbidden, NotFound, RevertConflict, ValidationError
from openkb.jobs import enqueue_after_commit
from openkb.models import Change, Document, KnowledgeBase
from openkb.models._base import utcnow
from openkb.models.enums import KB_STATUSES, VISIBILITIES
from openkb.permissions import (
    Action,
    KbAction,
    ObjectRef,
    Principal,
    WsAction,
    access_knowledge_base,
    access_workspace,
    knowledge_base_capabilities,
    tree_access,
)
from openkb.permissions import settings as access_settings
from openkb.permissions.collaborators import do_grant

CAPABILITY_KEYS = access_settings.KB_SETTING_KEYS
_MODEL_KEY = re.compile(r"model|embedding|rerank|provider|api_?key|endpoint", re.I)


def _model_key(value: Any, path: str) -> str | None:
    """The path of the first key naming a model or provider at any depth (``index.api_key``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if _MODEL_KEY.search(str(k)):
                return here
            found = _model_key(v, here)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _model_key(v, f"{path}[{i}]")
            if found:
                return found
    return None


def check_settings(value: Any, settings: Settings | None = None) -> dict[str, Any]:
    """Models and providers are instance-level (docs/permissions.md: ``settings`` never holds
    them), and settings are shown to every reader: a provider's API key nested anywhere, not
    only at the top, would be stored and shown, so keys are checked at every depth."""
    s = limits.check_metadata(value, "settings", settings)
    found = _model_key(s, "")
    if found:
        raise ModelSettingsForbidden(
            f"knowledge-base settings cannot configure models ({found!r}); "
            "embedding and rerank are instance-level (admin)",
            field="settings",
        )
    for k, v in s.items():
        if k in CAPABILITY_KEYS and not isinstance(v, bool):
            raise ValidationError(f"settings.{k} must be true or false", field="settings")
    return s


def kb_out(kb: KnowledgeBase, caps: frozenset[KbAction] | None = None, role: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": kb.id,
        "workspace_id": kb.workspace_id,
        "title": kb.title,
        "slug": kb.slug,
        "description": kb.description,
        "visibility": kb.visibility,
        "status": kb.status,
        "settings": kb.settings or {},
        "created_by": kb.created_by,
        "created_at": kb.created_at,
        "updated_at": kb.updated_at,
    }
    if caps is not None:
        out["capabilities"] = sorted(c.value for c in caps)
    if role is not None or caps is not None:
        out["role"] = role
    return out


def list_knowledge_bases(
    session: Session, principal: Principal, *, workspace_id: uuid.UUID | None = None
) -> list[dict[str, Any]]:
    """Readable knowledge bases of the caller's tenant: candidate ids, one batch decision."""
    if principal.tenant_id is None:
        return []
    q = select(KnowledgeBase).where(col(KnowledgeBase.tenant_id) == principal.tenant_id)
    if workspace_id is not None:
        q = q.where(col(KnowledgeBase.workspace_id) == workspace_id)
    if principal.kind == "anonymous":
        q = q.where(col(KnowledgeBase.visibility) == "public")
    kbs = list(session.exec(q.order_by(col(KnowledgeBase.created_at), col(KnowledgeBase.id))).all())
    caps = knowledge_base_capabilities(session, principal, [k.id for k in kbs])
    return [kb_out(k, caps[k.id]) for k in kbs if KbAction.READ in caps.get(k.id, frozenset())]


def get_knowledge_base(session: Session, principal: Principal, kb_id: uuid.UUID) -> dict[str, Any]:
    """The knowledge base with ``document_count``: the documents the caller may read, as its tree
    shows them. A raw count would tell a reader how many drafts, private pages and pages under a
    trashed folder it holds (docs/permissions.md#outsiders-get-404: what the caller cannot read
    is left out). The tree's fast path decides the whole knowledge base in one statement."""
    acc = access_knowledge_base(session, principal, kb_id)
    kb = acc.knowledge_base
    out = kb_out(kb, acc.actions, acc.role)
    out["document_count"] = len(tree_access(session, principal, kb.id, (Action.READ,)).ids_allowing(Action.READ))
    return out


def create_knowledge_base(
    session: Session,
    actor: Actor,
    *,
    workspace_id: uuid.UUID,
    title: str,
    visibility: str = "private",
    slug: str | None = None,
    description: str | None = None,
    settings: dict[str, Any] | None = None,
    cfg: Settings | None = None,
) -> KnowledgeBase:
    access_workspace(session, actor.principal, workspace_id, WsAction.CREATE_KNOWLEDGE_BASE)
    title = limits.check_title(title, settings=cfg)
    if visibility not in VISIBILITIES:
        raise ValidationError("visibility must be private, workspace or public", field="visibility")
    desc = limits.check_name(description, "description", cfg, allow_empty=True) if description is not None else None
    sets = check_settings(settings, cfg)
    taken = set(session.exec(select(KnowledgeBase.slug).where(col(KnowledgeBase.workspace_id) == workspace_id)).all())
    s = choose_slug(taken, slug, title, "a knowledge base with slug {slug!r} already exists in this workspace")
    kb = KnowledgeBase(
        tenant_id=actor.tenant_id,
        workspace_id=workspace_id,
        title=title,
        slug=s,
        description=desc or None,
        visibility=visibility,
        status="active",
        settings=sets,
        created_by=actor.user_id,
    )
    session.add(kb)
    session.flush()
    do_grant(
        session,
        tenant_id=kb.tenant_id,
        ref=ObjectRef("knowledge_base", kb.id),
        subject_type="user",
        subject_id=actor.user_id,
        role="owner",
        source="system",
        created_by=actor.user_id,
    )
    record_change(
        session,
        actor,
        op="knowledge_base.create",
        object_type="knowledge_base",
        object_id=kb.id,
        summary=f"created knowledge base {title!r}",
        scope=_scope(kb),
        before={},
        after=kb_state(kb),
    )
    return kb


KB_FIELDS = ("title", "slug", "description", "visibility", "status", "settings")


def kb_state(kb: KnowledgeBase, fields: tuple[str, ...] | list[str] = KB_FIELDS) -> dict[str, Any]:
    return {f: jsonable(dict(kb.settings or {}) if f == "settings" else getattr(kb, f)) for f in fields}


def _scope(kb: KnowledgeBase) -> dict[str, Any]:
    return {"knowledge_base_id": kb.id, "workspace_id": kb.workspace_id}


def update_knowledge_base(
    session: Session,
    actor: Actor,
    kb_id: uuid.UUID,
    fields: dict[str, Any],
    *,
    cfg: Settings | None = None,
    reverts: Change | None = None,
) -> KnowledgeBase:
    p = actor.principal
    unknown = set(fields) - set(KB_FIELDS)
    if unknown:
        raise ValidationError(f"cannot update {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
    kb = access_knowledge_base(session, p, kb_id, KbAction.MANAGE).knowledge_base
    for k, v in fields.items():
        if v is None and k != "description":
            raise ValidationError(f"{k} cannot be null", field=k)
    new: dict[str, Any] = {}
    if "title" in fields:
        new["title"] = limits.check_title(fields["title"], settings=cfg)
    if "description" in fields:
        d = fields["description"]
        new["description"] = (
            (limits.check_name(d, "description", cfg, allow_empty=True) or None) if d is not None else None
        )
    if "slug" in fields:
        s = check_slug(fields["slug"])
        if (
            s != kb.slug
            and session.exec(
                select(KnowledgeBase.id).where(
                    col(KnowledgeBase.workspace_id) == kb.workspace_id, col(KnowledgeBase.slug) == s
                )
            ).first()
        ):
            raise AlreadyExists(f"a knowledge base with slug {s!r} already exists in this workspace", field="slug")
        new["slug"] = s
    if "status" in fields:
        if fields["status"] not in KB_STATUSES:
            raise ValidationError("status must be active or archived", field="status")
        new["status"] = fields["status"]
    if "visibility" in fields:
        if fields["visibility"] not in VISIBILITIES:
            raise ValidationError("visibility must be private, workspace or public", field="visibility")
        new["visibility"] = fields["visibility"]
    if "settings" in fields:
        new["settings"] = check_settings(fields["settings"], cfg)
    changed = {k: v for k, v in new.items() if (dict(kb.settings or {}) if k == "settings" else getattr(kb, k)) != v}
    if not changed:
        return kb
    before = kb_state(kb, list(changed))
    if "visibility" in changed or ("settings" in changed and _cells(changed["settings"]) != _cells(kb.settings)):
        cells = _cells(changed.get("settings", kb.settings))
        access_settings.update_knowledge_base_access(
            session,
            p,
            kb.id,
            visibility=changed.get("visibility"),
            editor_can_delete=cells["editor_can_delete"],
            editor_can_create_share_links=cells["editor_can_create_share_links"],
        )
        session.refresh(kb)
    for k in ("title", "slug", "description", "status"):
        if k in changed:
            setattr(kb, k, changed[k])
    if "settings" in changed:
        kb.settings = {**changed["settings"], **_cells(kb.settings)}
    kb.updated_at = utcnow()
    session.add(kb)
    session.flush()
    record_change(
        session,
        actor,
        op="knowledge_base.update",
        object_type="knowledge_base",
        object_id=kb.id,
        summary=f"updated {', '.join(sorted(changed))} of knowledge base {kb.title!r}",
        scope=_scope(kb),
        before=before,
        after=kb_state(kb, list(changed)),
        reverts=reverts,
    )
    if changed.keys() & {"visibility", "status"}:
        enqueue_after_commit(session, "reindex_subtree", knowledge_base_id=str(kb.id))
    return kb


def _cells(settings: dict[str, Any] | None) -> dict[str, bool]:
    s = settings or {}
    return {k: bool(s.get(k, False)) for k in CAPABILITY_KEYS}


def delete_empty_knowledge_base(session: Session, actor: Actor, kb_id: uuid.UUID, *, reverts: Change) -> None:
    """Only as the revert of ``knowledge_base.create``: refuses a knowledge base with documents."""
    kb = access_knowledge_base(session, actor.principal, kb_id, KbAction.TRANSFER_OWNER).knowledge_base
    n = session.exec(select(func.count()).select_from(Document).where(col(Document.knowledge_base_id) == kb_id)).one()
    if n:
        raise RevertConflict("the knowledge base has documents; it cannot be removed by a revert")
    record_change(
        session,
        actor,
        op="knowledge_base.remove",
        object_type="knowledge_base",
        object_id=kb.id,
        summary=f"removed knowledge base {kb.title!r}",
        scope=_scope(kb),
        before={**kb_state(kb), "created_by": kb.created_by},
        after={},
        reverts=reverts,
    )
    for table in ("collaborators", "share_links", "invitations"):
        session.execute(
            text(f"DELETE FROM {table} WHERE object_type = 'knowledge_base' AND object_id = :id"), {"id": kb_id}
        )
    session.delete(kb)
    session.flush()


def recreate_knowledge_base(
    session: Session, actor: Actor, state: dict[str, Any], kb_id: uuid.UUID, *, reverts: Change
) -> KnowledgeBase:
    ws_id = uuid.UUID(state["workspace_id"])
    access_workspace(session, actor.principal, ws_id, WsAction.CREATE_KNOWLEDGE_BASE)
    if session.get(KnowledgeBase, kb_id) is not None:
        raise ValidationError("the knowledge base exists already")
    taken = set(session.exec(select(KnowledgeBase.slug).where(col(KnowledgeBase.workspace_id) == ws_id)).all())
    kb = KnowledgeBase(
        id=kb_id,
        tenant_id=actor.tenant_id,
        workspace_id=ws_id,
        title=state["title"],
        slug=unique_slug(taken, state.get("slug") or slugify(state["title"])),
        description=state.get("description"),
        visibility=state.get("visibility") or "private",
        status=state.get("status") or "active",
        settings=state.get("settings") or {},
        created_by=actor.user_id,
    )
    session.add(kb)
    session.flush()
    do_grant(
        session,
        tenant_id=kb.tenant_id,
        ref=ObjectRef("knowledge_base", kb.id),
        subject_type="user",
        subject_id=actor.user_id,
        role="owner",
        source="system",
        created_by=actor.user_id,
    )
    record_change(
        session,
        actor,
        op="knowledge_base.create",
        object_type="knowledge_base",
        object_id=kb.id,
        summary=f"re-created knowledge base {kb.title!r}",
        scope=_scope(kb),
        before={},
        after=kb_state(kb),
        reverts=reverts,
    )
    return kb


# -- the operator's references to a knowledge base (CLI: import, export, dify, kb list) -------------


def _readable_only(session: Session, principal: Principal, kbs: list[KnowledgeBase]) -> list[KnowledgeBase]:
    """The knowledge bases of a name lookup that ``principal`` may read (one batch decision)."""
    caps = knowledge_base_capabilities(session, principal, [k.id for k in kbs])
    return [k for k in kbs if KbAction.READ in caps.get(k.id, frozenset())]


def find_knowledge_base(
    session: Session, ref: str, tenant_id: uuid.UUID | None = None, *, readable_by: Principal | None = None
) -> KnowledgeBase:
    """A knowledge base by what an operator types: its id, its slug (any case: slugs are lower
    case, people type ``Handbook``), or its title when exactly one has it (any case). Within
    ``tenant_id`` when given (another tenant's is NOT_FOUND: nothing leaks); else any tenant (the
    operator administers them all). Slugs and titles are unique per workspace at most, so one
    that names several is a CONFLICT listing them, to be given by id; an unknown one says where
    to look (``openkb kb list``).

    ``readable_by``: a slug or title names only the knowledge bases this principal may read, so
    an administrator typing a name learns nothing of a private knowledge base closed to them
    (docs/permissions.md#administrators: administering grants no content access), neither by a
    match nor in a conflict's list. An id is taken as given; the caller decides what it may do
    with a knowledge base it cannot read."""
    ref = (ref or "").strip()
    if not ref:
        raise ValidationError("empty knowledge base reference", field="kb")
    where = "" if tenant_id is None else " in this tenant"
    try:
        kb = session.get(KnowledgeBase, uuid.UUID(ref))
    except ValueError:
        kb = None
    else:
        if kb is None or (tenant_id is not None and kb.tenant_id != tenant_id):
            raise NotFound(f"no knowledge base {ref!r}{where} (list them: openkb kb list)")
        return kb
    q = select(KnowledgeBase)
    if tenant_id is not None:
        q = q.where(col(KnowledgeBase.tenant_id) == tenant_id)
    for column, what in ((KnowledgeBase.slug, "slug"), (KnowledgeBase.title, "title")):
        found = list(
            session.exec(q.where(func.lower(col(column)) == ref.lower()).order_by(col(KnowledgeBase.created_at))).all()
        )
        if found and readable_by is not None:
            found = _readable_only(session, readable_by, found)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = "; ".join(f"{k.title} ({k.id})" for k in found[:5])
            raise Conflict(
                f"{len(found)} knowledge bases have the {what} {ref!r}: give the id of one ({names})",
                ids=[str(k.id) for k in found],
            )
    raise NotFound(f"no knowledge base {ref!r}{where} (list them: openkb kb list)")


def operator_list(session: Session, *, tenant_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    """Every knowledge base (of one tenant, or all) with its workspace and how many pages and
    folders it holds outside the trash: what ``openkb kb list`` shows an operator, who
    administers the instance (no per-user permission applies: nothing here is content)."""
    rows = session.execute(
        text(
            "SELECT k.id, k.title, k.slug, k.status, k.visibility, k.created_at, w.name, w.slug, t.slug, "
            "count(d.id) FILTER (WHERE d.type = 'page' AND d.status <> 'deleted'), "
            "count(d.id) FILTER (WHERE d.type = 'folder' AND d.status <> 'deleted') "
            "FROM knowledge_bases k JOIN workspaces w ON w.id = k.workspace_id JOIN tenants t ON t.id = k.tenant_id "
            "LEFT JOIN documents d ON d.knowledge_base_id = k.id "
            "WHERE CAST(:t AS uuid) IS NULL OR k.tenant_id = :t "
            "GROUP BY k.id, w.id, t.id ORDER BY t.slug, w.name, k.title, k.id"
        ),
        {"t": tenant_id},
    ).all()
    return [
        {
            "id": str(r[0]),
            "title": r[1],
            "slug": r[2],
            "status": r[3],
            "visibility": r[4],
            "created_at": r[5].isoformat(),
            "workspace": r[6],
            "workspace_slug": r[7],
            "tenant": r[8],
            "pages": int(r[9]),
            "folders": int(r[10]),
        }
        for r in rows
    ]
