"""What the embedded Milvus Lite holds on disk for a collection, read from its manifest
(docs/retrieval.md#flushes).

Why an operator needs it: every save that replaces a chunk leaves a tombstone, and Lite writes
them into a delta file at each flush. Lite drops a tombstone only once no data file is older
than it, and a compacted file keeps its rows' sequence numbers, so chunks nobody edits keep the
oldest tombstones alive; the map grows in memory (its copy for reads is made once per change:
``lite_tombstones``) and every flush rewrites a manifest listing every delta file. Searches and
saves slow down as they pile up (measured in the docs), and Lite answers no RPC that tells: ``openkb index status`` and ``openkb doctor`` read its
manifest instead, and say when ``openkb index rebuild --switch`` is due.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openkb.context import AppContext

__all__ = ["DELTA_FILES_WARN", "REBUILD_FIX", "home_lite", "home_lite_files", "lite_files"]

# delta files from which index status and doctor suggest a rebuild: bench/lite_flush.py measured
# saves ~25 % dearer by ~700 of them (docs/retrieval.md#flushes). A flush every five seconds of
# saving writes one, so 1,000 are some 80 minutes of saving without a pause
DELTA_FILES_WARN = 1000
REBUILD_FIX = "run `openkb index rebuild --switch` at a quiet hour: a new collection starts without them"


def lite_files(collection_dir: Path) -> dict[str, Any]:
    """One Lite collection's files, from its manifest: data segments (``data_files``), delta
    files (a deletion's tombstones), their bytes, the WAL's bytes and the manifest's own size
    (rewritten on every flush); ``{}`` when there is no readable manifest."""
    try:
        manifest = json.loads((collection_dir / "manifest.json").read_text())
        manifest_kb = (collection_dir / "manifest.json").stat().st_size // 1024
    except (OSError, ValueError):
        return {}
    parts = manifest.get("partitions", {})
    data = [(p, f) for p, c in parts.items() for f in c.get("data_files", [])]
    delta = [(p, f) for p, c in parts.items() for f in c.get("delta_files", [])]

    def size(rows: list[tuple[str, str]]) -> int:
        n = 0
        for p, f in rows:
            try:
                n += (collection_dir / "partitions" / p / f).stat().st_size
            except OSError:  # compacted away between the manifest's read and this
                pass
        return n

    wal_dir = collection_dir / "wal"
    wal = sum(f.stat().st_size for f in wal_dir.glob("*") if f.is_file()) if wal_dir.is_dir() else 0
    return {
        "data_files": len(data),
        "data_kb": size(data) // 1024,
        "delta_files": len(delta),
        "delta_kb": size(delta) // 1024,
        "wal_kb": wal // 1024,
        "manifest_kb": manifest_kb,
        "current_seq": manifest.get("current_seq"),
    }


def home_lite(ctx: AppContext) -> bool:
    """Whether the Milvus in use is the embedded Lite of this home: the API and workers under
    ``openkb up`` are handed its address in MILVUS_URI, so their settings alone say external."""
    from openkb.runtime.home import Home, read_record

    if ctx.settings.embedded("milvus"):
        return True
    rec = read_record(Home(ctx.settings.openkb_home), "milvus")
    return rec is not None and rec.get("uri") == ctx.endpoints.milvus_uri


def home_lite_files(ctx: AppContext, collection: str | None) -> dict[str, Any] | None:
    """``lite_files`` of ``collection`` in this home's Lite, with ``piling_up`` when its delta
    files reach ``DELTA_FILES_WARN``; None for a Milvus server, a Lite elsewhere or no
    collection."""
    from openkb.runtime.home import Home

    if not collection or not home_lite(ctx):
        return None
    files = lite_files(Home(ctx.settings.openkb_home).milvus_dir / "collections" / collection)
    if not files:
        return None
    return files | {"piling_up": files["delta_files"] >= DELTA_FILES_WARN}
