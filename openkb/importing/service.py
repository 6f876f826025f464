"""The import as the adapters call it: find the caller and target, open the input, run, revert.

The CLI operator administers every tenant but every stored row names a user (``created_by``),
so an import from the command line acts as a user: ``--as EMAIL`` or, by default, the
knowledge base's creator. That user's permissions apply (docs/permissions.md): an operator
cannot import where the named user may not write.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from openkb.accounts.users import find_user
from openkb.config import Settings, get_settings
from openkb.content.actor import Actor
from openkb.content.knowledge_bases import find_knowledge_base
from openkb.content.revert import revert
from openkb.errors import NotFound
from openkb.importing.openkb_export import run_any
from openkb.importing.pipeline import ImportReport, Progress, Units
from openkb.importing.sources import open_source
from openkb.models import KnowledgeBase, TenantMembership
from openkb.permissions import Principal
from openkb.storage import BlobStore

__all__ = ["find_knowledge_base", "import_path", "operator_actor", "revert_import"]


def operator_actor(session: Session, kb: KnowledgeBase, as_user: str | None, run_id: str | None) -> Actor:
    """The user an operator's import acts as: ``as_user``, else the knowledge base's creator."""
    if as_user:
        user = find_user(session, as_user)
        member = session.exec(
            select(TenantMembership).where(
                col(TenantMembership.user_id) == user.id, col(TenantMembership.tenant_id) == kb.tenant_id
            )
        ).first()
        if member is None:
            raise NotFound(f"{user.email} is not a member of the knowledge base's tenant")
        uid = user.id
    else:
        uid = kb.created_by
    return Actor.of(Principal.user(uid, kb.tenant_id), run_id, source="import")


def import_path(
    units: Units,
    blobs: BlobStore,
    actor: Actor,
    kb_id: uuid.UUID,
    path: Path,
    *,
    target_id: uuid.UUID | None = None,
    jobs: int = 1,
    dry_run: bool = False,
    prune: bool = False,
    settings: Settings | None = None,
    progress: Any = None,
) -> ImportReport:
    settings = settings or get_settings()
    source = open_source(path, settings.max_upload_bytes)
    try:
        return run_any(  # an OpenKB export by its manifest (docs/export.md), else the pipeline
            units,
            blobs,
            actor,
            kb_id,
            source,
            target_id=target_id,
            jobs=jobs,
            dry_run=dry_run,
            prune=prune,
            settings=settings,
            progress=progress,
        )
    finally:
        source.close()


def revert_import(
    session: Session, actor: Actor, run_id: str, blobs: BlobStore, *, knowledge_base_id: uuid.UUID
) -> dict[str, Any]:
    """Undo an import run's changes in ``knowledge_base_id`` (newest first), as new recorded
    writes. NotFound when the run changed nothing there: a run id pasted next to the wrong
    ``--kb`` must not undo an import into another knowledge base."""
    return revert(session, actor, run_id=run_id, blobs=blobs, knowledge_base_id=knowledge_base_id)


__all__ += ["Progress"]
