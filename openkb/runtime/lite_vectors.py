"""A partial update on the embedded Milvus Lite keeps the stored dense vector of a row whose text
it does not change (docs/retrieval.md#partial-updates).

OpenKB rewrites a chunk's scalar fields in place (``partial_update`` upserts) whenever who may
read it or how it is filed changes: a knowledge base's visibility, a page's status, tags or
metadata, a move. Milvus Lite 3.x merges such an upsert onto the stored row and then inserts the
merged row as new, running the collection's functions on it again: every chunk was embedded
again although its text had not changed. Changing the visibility of a knowledge base of 5,000
pages sent some 20,000 chunks through the embedder (minutes of the appliance's CPU) to get the
same vectors back.

This module is installed in the Lite server process ``openkb up`` starts
(``openkb.runtime.lite_server``), beside ``lite_bm25``. Before an upsert runs, each record whose
primary key is stored and whose embedding input is absent or unchanged lends the stored vector
to the embedding step, which embeds only the other texts. A text gives one vector (the same
provider and model: a collection's function is fixed when it is created), so the rows are what
Lite would have written, without the embedder's work. BM25's sparse vectors are computed again as
before (tokenizing is cheap).

Trap: this reaches into Lite's internals (``Collection.upsert``, ``Collection._get_raw``,
``Collection._embedding_providers``, ``EmbeddingExpr.execute``). ``install()`` checks each name and
leaves Lite as it is (re-embedding, as before) when a Lite release moves them;
``tests/retrieval/test_lite_vectors.py`` fails on the pinned version if it no longer applies.
Only a collection with exactly one embedding function is helped: the embedding step is told
texts, not which function's input they are.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

log = logging.getLogger("openkb.lite_vectors")

__all__ = ["install"]

# text -> stored vector, for the upsert running in this thread (None: embed everything)
_KNOWN: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("openkb_lite_vectors", default=None)
_INSTALLED = False


def _stored_vectors(col: Any, records: Any) -> dict[str, Any]:
    """Text -> stored vector of the records of this upsert that leave their embedding input as
    it is stored (the field left out, or sent with the same text)."""
    providers = getattr(col, "_embedding_providers", None)
    if not isinstance(records, list) or not providers or len(providers) != 1:
        return {}
    in_name, out_name, _provider = providers[0]
    pk_name = col._pk_name
    known: dict[str, Any] = {}
    for rec in records:
        if not isinstance(rec, dict) or rec.get(pk_name) is None or out_name in rec:
            continue
        old = col._get_raw(rec[pk_name])
        if not old:
            continue
        text, vector = old.get(in_name), old.get(out_name)
        if isinstance(text, str) and text and vector is not None and rec.get(in_name, text) == text:
            known[text] = vector
    return known


def install() -> bool:
    """Make this process's Milvus Lite keep stored vectors on partial updates; False (and Lite
    unchanged) when its internals are not the ones this module knows."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        from milvus_lite.engine.collection import Collection
        from milvus_lite.function.expr.embedding_expr import EmbeddingExpr
    except ImportError as exc:
        log.warning("Milvus Lite re-embeds rows on partial updates: %s", exc)
        return False
    missing = [
        f"{o.__name__}.{n}"
        for o, n in ((Collection, "upsert"), (Collection, "_get_raw"), (EmbeddingExpr, "execute"))
        if not hasattr(o, n)
    ]
    if missing:
        log.warning("Milvus Lite re-embeds rows on partial updates: this Lite has no %s", ", ".join(missing))
        return False

    upsert = Collection.upsert
    execute = EmbeddingExpr.execute

    def _upsert(self: Any, records: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            known = _stored_vectors(self, records)
        except Exception:  # noqa: BLE001 - an upsert must not fail for want of a saving
            log.warning("could not read the stored vectors of an upsert; embedding every row", exc_info=True)
            known = {}
        if not known:
            return upsert(self, records, *args, **kwargs)
        token = _KNOWN.set(known)
        try:
            return upsert(self, records, *args, **kwargs)
        finally:
            _KNOWN.reset(token)

    def _execute(self: Any, ctx: Any, inputs: list[list]) -> list[list]:
        known = _KNOWN.get()
        if not known:
            return execute(self, ctx, inputs)
        texts = inputs[0]
        out: list[Any] = [None] * len(texts)
        todo: list[int] = []
        for i, text in enumerate(texts):
            vector = known.get(text) if isinstance(text, str) else None
            if vector is None:
                todo.append(i)
            else:
                out[i] = vector
        if todo:
            fresh = execute(self, ctx, [[texts[i] for i in todo], *inputs[1:]])[0]
            for i, vector in zip(todo, fresh, strict=True):
                out[i] = vector
        return [out]

    Collection.upsert = _upsert
    EmbeddingExpr.execute = _execute
    _INSTALLED = True
    return True
