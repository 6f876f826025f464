"""File names of an export: safe on every file system, unique among siblings, readable.

A title becomes a file name with as little change as possible, because the export is meant to be
opened in any Markdown editor: CJK and other letters are kept, and only what some file system or
the import refuses is replaced by ``_``:

* ``/ \\ : * ? " < > |`` and control characters (Windows refuses them; ``/`` would nest);
* ``#`` and ``%``: a relative link ``[x](a#b.md)`` would read as a fragment, ``%41`` as an escape;
* a leading ``.`` (a hidden file, which the import skips: docs/importing.md#what-becomes-what);
* trailing dots and spaces (Windows drops them, so ``a.`` and ``a`` would collide);
* ``.`` and ``..`` themselves, and the Windows device names (``CON``, ``NUL``, ``COM1`` ...,
  ``COM¹``-``COM³`` and ``LPT¹``-``LPT³`` too, with or without an extension), which get a ``_``
  after the device part: ``CON_.png`` keeps its extension, ``nul_.txt.md`` is no device name
  (``nul.txt_.md`` still was: Windows reads the part before the first dot).

Unique: siblings are compared the way case-insensitive file systems do (NFC, case-folded), and a
second ``Notes`` becomes ``Notes (2)``. A page and its children share one name (``Notes.md`` and
``Notes/``), so a name is reserved once per sibling, whatever its type.

Short enough: a name is at most ``MAX_NAME_CHARS`` UTF-16 code units (what Windows counts) and
``MAX_NAME_BYTES`` UTF-8 bytes (what Linux and macOS file systems count: 100 CJK characters are
300 bytes, past their 255). A whole entry path is kept within ``MAX_PATH_CHARS`` counting a top
folder named like the zip, since unzipping ``X.zip`` on Windows creates a folder ``X`` and Explorer
refuses paths past 260 characters: the export gives each name a budget (``fit``) that leaves
room for the levels below it. A name cut to fit ends in ``~`` and 6 hex digits of the SHA-256 of
the whole name, so the same title always gives the same name (a re-export, an export of an
imported copy) and two long titles sharing a beginning stay apart.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_NAME_CHARS",
    "MAX_PATH_CHARS",
    "MAX_TOP_CHARS",
    "MIN_NAME_CHARS",
    "Namer",
    "fit",
    "safe_name",
    "units",
]

MAX_NAME_CHARS = 100  # UTF-16 code units of one name
MAX_NAME_BYTES = 200  # UTF-8 bytes of one name: room for " (99)" and ".md" under 255
MAX_PATH_CHARS = 240  # a whole entry path with the zip's top folder, under Windows' 260
MAX_TOP_CHARS = 60  # the zip's name (without .zip), which is the top folder once unzipped
MIN_NAME_CHARS = 8  # the shortest a name is cut to: one character, "~" and the 6-digit hash
_HASH = 6
_BAD = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|#%]')
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_RESERVED = (
    {"con", "prn", "aux", "nul"}
    | {f"{d}{i}" for d in ("com", "lpt") for i in [*range(10), "\u00b9", "\u00b2", "\u00b3"]}  # COM¹ too
)


def units(text: str) -> int:
    """Length in UTF-16 code units, as Windows counts a path (a character past U+FFFF is two).
    Encoded only when such a character is there: a search costs a tenth of the encoding."""
    if text.isascii() or not _ASTRAL.search(text):
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def safe_name(title: str, *, keep_extension: bool = False) -> str:
    """A file or folder name (without ``.md``) for ``title``; never empty."""
    name = unicodedata.normalize("NFC", title or "")
    name = _BAD.sub("_", name)
    name = " ".join(name.split())  # tabs and runs of spaces: one space (titles are one line)
    name = name.rstrip(". ")
    if name.startswith("."):
        name = "_" + name[1:]
    if not name:
        return "untitled"
    name = fit(name, MAX_NAME_CHARS, keep_extension=keep_extension)
    if _reserved(name):
        stem, dot, rest = name.partition(".")
        name = stem + "_" + dot + rest
    return name


def _reserved(name: str) -> bool:
    return name.split(".", 1)[0].strip().lower() in _RESERVED


def fit(name: str, limit: int, *, keep_extension: bool = False) -> str:
    """``name`` if it is within ``limit`` UTF-16 units and ``MAX_NAME_BYTES`` bytes, else cut
    with ``~`` and a hash of the whole name (``keep_extension``: a file's ``.png`` stays)."""
    limit = max(limit, MIN_NAME_CHARS)
    n = len(name)
    if 4 * n <= MAX_NAME_BYTES and 2 * n <= limit:  # fits whatever its characters (most titles)
        return name
    if units(name) <= limit and len(name.encode()) <= MAX_NAME_BYTES:
        return name
    stem, ext = name, ""
    if keep_extension and "." in name[1:]:
        dot = name.rindex(".")
        if 1 < len(name) - dot <= 12:
            stem, ext = name[:dot], name[dot:]
    digest = "~" + hashlib.sha256(name.encode()).hexdigest()[:_HASH]
    room = limit - units(ext) - len(digest)
    room_bytes = MAX_NAME_BYTES - len(ext.encode()) - len(digest)
    cut: list[str] = []
    n = b = 0
    for ch in stem:
        w, cb = (2 if ord(ch) > 0xFFFF else 1), len(ch.encode())
        if n + w > room or b + cb > room_bytes:
            break
        cut.append(ch)
        n, b = n + w, b + cb
    out = "".join(cut).rstrip(". ") + digest + ext
    return "_" + out if _reserved(out) else out


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


class Namer:
    """Unique names within one folder of the export; ``reserved`` names are never given."""

    def __init__(self, reserved: tuple[str, ...] = ()) -> None:
        self._taken = {_fold(r) for r in reserved}
        # the last number given to each base: names are never released, so every number below it
        # is still taken, and the next page of that title starts there. Without it, a folder of
        # K pages titled alike ("Untitled") tried 1..k for the k-th: K²/2 names (4,000: 6 s)
        self._last: dict[tuple[str, int, bool], int] = {}

    def take(self, title: str, limit: int = MAX_NAME_CHARS, *, keep_extension: bool = False) -> str:
        """A unique name for ``title`` of at most ``limit`` UTF-16 units (see ``fit``)."""
        base = safe_name(title)
        key = (base, limit, keep_extension)
        n = self._last.get(key, 0)
        while True:
            n += 1
            # "Notes (2)"; cut to fit, the hash is of "Notes (2)" and keeps the name in budget.
            # ``a.md`` beside a page ``a.md`` (whose file is ``a.md.md``) cannot collide: both
            # stems are reserved as they are, and the ``.md`` is added to every page alike
            name = fit(base if n == 1 else f"{base} ({n})", limit, keep_extension=keep_extension)
            folded = _fold(name)
            if folded not in self._taken:
                break
        self._taken.add(folded)
        self._last[key] = n
        return name
