"""A tenant with people in every role, knowledge bases built through the content services, and
helpers to export (``export_tree``), import a zip back (the CLI's ``import_path``) and compare two
knowledge bases with their ids taken out."""

from __future__ import annotations

import hashlib
import io
import re
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from sqlmodel import Session, col, select

from openkb import jobs
from openkb.assets import upload_asset
from openkb.content.actor import Actor
from openkb.content.documents import create_document
from openkb.db import session_scope
from openkb.exporting.service import Target, export_tree
from openkb.importing.pipeline import ImportReport
from openkb.importing.service import import_path
from openkb.jobs import RecordingQueue
from openkb.models import Document, DocumentAsset, DocumentVersion
from openkb.permissions import Principal
from openkb.storage import LocalBlobStore
from tests.factories import add_member, grant, make_kb, make_tenant, make_user, make_workspace


def png(color: str = "red", size: int = 8) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, format="PNG")
    return buf.getvalue()


@dataclass
class Node:
    """One document to build: ``body`` may say ``{doc:KEY}`` and ``{asset:NAME}`` (its own asset, or
    else an earlier page's)."""

    key: str
    title: str
    type: str = "page"
    parent: str | None = None
    body: str = ""
    status: str = "published"
    meta: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    assets: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # name -> (bytes, mime)


class World:
    def __init__(self, engine: Any, blob_root: Path) -> None:
        self.engine = engine
        self.blobs = LocalBlobStore(blob_root)
        with Session(engine, expire_on_commit=False) as s:
            self.tenant = make_tenant(s)
            self.owner = make_user(s, self.tenant)
            self.editor = make_user(s, self.tenant)
            self.viewer = make_user(s, self.tenant)
            self.member = make_user(s, self.tenant)
            self.guest = make_user(s, self.tenant)
            self.outsider = make_user(s, self.tenant)  # same tenant, not in the workspace
            self.ws = make_workspace(s, self.tenant, self.owner)
            for u, role in ((self.editor, "member"), (self.viewer, "member"), (self.member, "member")):
                add_member(s, self.ws, u, role)
            add_member(s, self.ws, self.guest, "guest")
            s.commit()

    def units(self) -> Any:
        return session_scope(self.engine)

    def principal(self, who: Any = None) -> Principal:
        return Principal.user((who or self.owner).id, self.tenant.id)

    def actor(self, who: Any = None) -> Actor:
        return Actor.of(self.principal(who))

    def new_kb(self, visibility: str = "workspace") -> Any:
        with Session(self.engine, expire_on_commit=False) as s:
            kb = make_kb(s, self.ws, self.owner, visibility=visibility)
            grant(s, "knowledge_base", kb.id, self.editor, "editor", tenant_id=self.tenant.id)
            grant(s, "knowledge_base", kb.id, self.viewer, "viewer", tenant_id=self.tenant.id)
            s.commit()
        return kb

    def build(self, kb: Any, nodes: list[Node]) -> dict[str, uuid.UUID]:
        """Create ``nodes`` (parents first) with the owner; returns key -> document id."""
        ids = {n.key: uuid.uuid4() for n in nodes}
        shown: dict[str, uuid.UUID] = {}  # ``{asset:NAME}`` of an earlier page's asset: shown from elsewhere
        with self.units() as s:
            actor = self.actor()
            for n in nodes:
                asset_ids = {}
                for name, (data, mime) in n.assets.items():
                    a = upload_asset(
                        s, actor, self.blobs, io.BytesIO(data), size=len(data), filename=name, content_type=mime
                    )
                    asset_ids[name] = a.id
                body = re.sub(r"\{doc:([^}]+)\}", lambda m: f"openkb://document/{ids[m.group(1)]}", n.body)
                body = re.sub(
                    r"\{asset:([^}]+)\}",
                    lambda m, a=asset_ids: f"asset://{a.get(m.group(1)) or shown[m.group(1)]}",
                    body,
                )
                shown.update(asset_ids)
                create_document(
                    s,
                    actor,
                    knowledge_base_id=kb.id,
                    title=n.title,
                    type=n.type,
                    parent_id=ids[n.parent] if n.parent else None,
                    markdown=body if n.type == "page" else None,
                    status=None if n.status == "archived" else n.status,
                    metadata=n.meta or None,
                    tags=n.tags or None,
                    document_id=ids[n.key],
                )
                if n.status == "archived":  # archiving is a later change, not a creation status
                    doc = s.get(Document, ids[n.key])
                    doc.status = "archived"
                    s.add(doc)
                for aid in asset_ids.values():
                    a = s.get(DocumentAsset, aid)
                    a.document_id = ids[n.key]
                    s.add(a)
                s.flush()
        return ids

    def export(self, target: Target, who: Any = None, **kw: Any) -> bytes:
        out = io.BytesIO()
        with self.units() as s:
            export_tree(s, self.principal(who), target, out, self.blobs, **kw)
        return out.getvalue()

    def import_zip(self, data: bytes, kb: Any, tmp: Path, **kw: Any) -> ImportReport:
        path = tmp / f"export-{uuid.uuid4().hex[:8]}.zip"
        path.write_bytes(data)
        return import_path(self.units, self.blobs, self.actor(), kb.id, path, **kw)


def kb_target(kb: Any) -> Target:
    return Target("knowledge_base", kb.id)


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


_DOC = re.compile(r"openkb://document/([0-9a-f-]{36})")
_ASSET = re.compile(r"asset://([0-9a-f-]{36})")


def snapshot(engine: Any, kb_id: uuid.UUID) -> list[tuple[Any, ...]]:
    """The knowledge base without its ids: per document in tree order its title path, type,
    status, metadata, tags, body (links by title path, assets by checksum and name) and the
    checksums of its assets."""
    with Session(engine) as s:
        docs = s.exec(
            select(Document)
            .where(col(Document.knowledge_base_id) == kb_id, col(Document.status) != "deleted")
            .order_by(col(Document.sort_order), col(Document.created_at), col(Document.id))
        ).all()
        if not docs:
            return []
        by_id = {d.id: d for d in docs}

        def title_path(did: uuid.UUID) -> str:
            parts, cur = [], by_id.get(did)
            while cur is not None:
                parts.append(cur.title)
                cur = by_id.get(cur.parent_id)
            return "/".join(reversed(parts))

        assets = s.exec(select(DocumentAsset).where(col(DocumentAsset.tenant_id) == docs[0].tenant_id)).all()
        by_asset = {a.id: a for a in assets}
        out = []
        children: dict[Any, list[Document]] = {}
        for d in docs:
            children.setdefault(d.parent_id, []).append(d)
        stack = list(reversed(children.get(None, [])))
        while stack:
            d = stack.pop()
            body = None
            if d.current_version_id:
                body = s.get(DocumentVersion, d.current_version_id).markdown
                body = _DOC.sub(lambda m: "openkb://document/" + title_path(uuid.UUID(m.group(1))), body)
                body = _ASSET.sub(
                    lambda m: (
                        "asset://"
                        + (
                            f"{by_asset[uuid.UUID(m.group(1))].sha256}:{by_asset[uuid.UUID(m.group(1))].filename}"
                            if uuid.UUID(m.group(1)) in by_asset
                            else m.group(1)
                        )
                    ),
                    body,
                )
            own = sorted(a.sha256 for a in assets if a.document_id == d.id)
            out.append((title_path(d.id), d.type, d.status, d.meta, list(d.tags or []), body, own))
            stack.extend(reversed(children.get(d.id, [])))
        return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def queue() -> Any:
    previous = jobs._queue
    q = RecordingQueue()
    jobs.set_queue(q)
    yield q
    jobs.set_queue(previous)


@pytest.fixture(scope="module")
def world(engine, queue, tmp_path_factory) -> World:
    return World(engine, tmp_path_factory.mktemp("blobs"))
