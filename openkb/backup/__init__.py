"""Backup and restore of a whole OpenKB (docs/operations.md#backup-and-restore).

``create_backup`` writes one tar archive: a PostgreSQL dump taken in an exported snapshot, the
asset blobs that snapshot references, and a manifest (versions, counts, index state, a SHA-256
of every file). ``restore_backup`` loads it into an empty database and blob store, then rebuilds
the active Milvus collection from PostgreSQL (Milvus is derived data, never archived).
"""

from openkb.backup.service import FORMAT, create_backup, read_archive, restore_backup

__all__ = ["FORMAT", "create_backup", "read_archive", "restore_backup"]
