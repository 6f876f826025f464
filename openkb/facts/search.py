"""``search(..., entities=[ref])`` for apps (docs/facts.md#mentions): only passages that mention
one of the entities, inside the collections the app may read.

The candidates come from ``entity_mentions`` (chunks of current versions that name the
entities, recorded at indexing), narrowed to the app's granted read roots and to what the user
may read — a query method: the rest is left out. With a query, the retrieval service ranks the
candidates' documents (a document the query does not match is dropped); without one, passages
are listed newest first. A merged entity's old ref means the survivor (its mentions moved
there); a deleted entity's ref fails with ``no entity``.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlmodel import Session

from openkb.apps import knowledge as K
from openkb.apps import refs as R
from openkb.apps.registry import AppCaller
from openkb.context import AppContext
from openkb.errors import ValidationError
from openkb.facts import entities as E
from openkb.permissions import filter_readable_documents

MAX_ENTITIES = 20
_CANDIDATES = text(f"""
SELECT DISTINCT c.id, c.document_id, c.ordinal, c.heading_path, c.content_text, d.title, d.metadata,
       ({K.DOC_TIME}) AS doc_time
FROM entity_mentions m
JOIN document_chunks c ON c.id = m.chunk_id
JOIN documents d ON d.id = c.document_id AND d.current_version_id = c.version_id
WHERE m.entity_id = ANY(:ents) AND d.type = 'page' AND d.status IN ('published', 'draft')
ORDER BY doc_time DESC, c.document_id, c.ordinal
LIMIT 2000
""").bindparams(bindparam("ents", type_=ARRAY(PGUUID(as_uuid=True))))


def search(
    ctx: AppContext,
    session: Session,
    caller: AppCaller,
    query: str,
    *,
    entities: list[str],
    collections: list[str] | None = None,
    time_from: Any = None,
    time_to: Any = None,
    limit: int = 10,
) -> list[dict[str, Any]]:
    from openkb.retrieval.service import search_documents

    if not entities or len(entities) > MAX_ENTITIES:
        raise ValidationError(f"entities lists 1 to {MAX_ENTITIES} entity refs", field="entities")
    if not isinstance(limit, int) or not 1 <= limit <= 100:
        raise ValidationError("limit must be between 1 and 100", field="limit")
    ents = sorted({E.entity_of_ref(session, caller, r).id for r in entities}, key=str)
    lo, hi = K.time_range({"from": time_from, "to": time_to})
    roots = K.granted_read_roots(session, caller, collections)
    if not roots:
        return []
    rows = session.execute(_CANDIDATES, {"ents": ents}).all()
    doc_ids = list(dict.fromkeys(r.document_id for r in rows))
    readable = set(filter_readable_documents(session, caller.principal, doc_ids, for_search=True))
    inside = K.inside_roots(session, caller, roots, [d for d in doc_ids if d in readable], lo, hi)
    rows = [r for r in rows if r.document_id in inside]
    q = (query or "").strip()
    if q and rows:
        kb_ids = sorted({inside[r.document_id].knowledge_base_id for r in rows}, key=str)
        hits = search_documents(ctx, session, caller.principal, q, knowledge_base_ids=kb_ids, top_k=100)
        rank = {uuid.UUID(h.document_id): i for i, h in enumerate(hits)}
        matched = {h.chunk_id for h in hits} | {s["chunk_id"] for h in hits for s in h.snippets}
        rows = [r for r in rows if r.document_id in rank]
        rows.sort(key=lambda r: (rank[r.document_id], str(r.id) not in matched, r.ordinal))
    out = []
    for r in rows[:limit]:
        kb_id, folder = inside[r.document_id].collection()
        out.append(
            {
                "document": caller.ref(R.DOCUMENT, r.document_id),
                "title": r.title,
                "collection": K.coll_ref(caller, kb_id, folder),
                "text": r.content_text,
                "locator": {"headingPath": list(r.heading_path or []), "chunk": r.ordinal},
                "meta": r.metadata or {},
            }
        )
    return out
