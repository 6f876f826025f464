"""The export format's fixed names (docs/export.md#the-zip), shared by the export and the import
of an export (``openkb/importing/openkb_export.py``) without either importing the other."""

from __future__ import annotations

__all__ = ["ASSETS_DIR", "FORMAT", "FORMAT_VERSION", "MANIFEST"]

FORMAT = "openkb-export"
# Raise it when an export gains something an older import would silently drop; the import
# refuses a newer version whole (EXPORT_FORMAT_UNSUPPORTED) instead of losing it.
FORMAT_VERSION = 1
MANIFEST = "openkb-export.json"
ASSETS_DIR = "assets"
