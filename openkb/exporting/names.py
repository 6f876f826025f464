"""File names of an export: safe on every file system, unique among siblings, readable.

A title becomes a file name with as little change as possible, because the export is meant to be
opened in any Markdown editor: CJK and other letters are kept, and only what some file system or
the import refuses is replaced by ``_``:

* ``/ \\ : * ? " < > |`` and control characters (Windows refuses them; ``/`` would nest);
* ``#`` and ``%``: a relative link ``[x](a#b.md)`` would read as a fragment, ``%41`` as an escape;
* a leading ``.`` (a hidden file, which the import skips: docs/importing.md#what-becomes-what);
* trailing dots and spaces (Windows drops them, so ``a.`` and ``a`` would collide);
* ``.`` and ``..`` themselves, and the Windows device names (``CON``, ``NUL``, ``COM1`` ... with
  or without an extension), which get a ``_`` appended.

Unique: siblings are compared the way case-insensitive file systems do (NFC, case-folded), and a
second ``Notes`` becomes ``Notes (2)``. A page and its children share one name (``Notes.md`` and
``Notes/``), so a name is reserved once per sibling, whatever its type.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MAX_NAME_CHARS", "Namer", "safe_name"]

MAX_NAME_CHARS = 100  # well under the 255-byte limit of common file systems, in UTF-8 too
_BAD = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|#%]')
_RESERVED = {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}


def safe_name(title: str) -> str:
    """A file or folder name (without ``.md``) for ``title``; never empty."""
    name = unicodedata.normalize("NFC", title or "")
    name = _BAD.sub("_", name)
    name = " ".join(name.split())  # tabs and runs of spaces: one space (titles are one line)
    if len(name) > MAX_NAME_CHARS:
        name = name[:MAX_NAME_CHARS]
    name = name.rstrip(". ")
    if name.startswith("."):
        name = "_" + name[1:]
    if not name:
        return "untitled"
    if name.split(".", 1)[0].strip().lower() in _RESERVED:
        name += "_"
    return name


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


class Namer:
    """Unique names within one folder of the export; ``reserved`` names are never given."""

    def __init__(self, reserved: tuple[str, ...] = ()) -> None:
        self._taken = {_fold(r) for r in reserved}

    def take(self, title: str) -> str:
        base = safe_name(title)
        name, n = base, 1
        # ``a.md`` beside a page ``a.md`` (whose file is ``a.md.md``) cannot collide: both stems
        # are reserved as they are, and the ``.md`` is added to every page alike
        while _fold(name) in self._taken:
            n += 1
            name = f"{base} ({n})"
        self._taken.add(_fold(name))
        return name
