"""What an import reads: a folder, one file or a zip, as a flat list of entries.

Each entry has a relative path (``/``-separated, Unicode NFC — macOS zips write NFD) that
becomes its key, and either a way to read its bytes or the reason it cannot be imported. A bad
entry never stops the listing: it fails on its own and the batch goes on.

Safety (docs/importing.md#bad-input):

* a symlink whose target leaves PATH is not followed; a symlinked folder is never walked (loops);
* zip entries with ``..``, absolute or drive paths, symlink entries and encrypted entries fail;
* a zip is a bomb when it has too many entries, expands beyond a total size, or one entry
  expands beyond a ratio: the whole archive is refused before anything is unpacked (the caps
  are the converters' ``MAX_ZIP_*``);
* a file over the upload limit (``max_upload_bytes``) fails as oversize without being read;
* hidden files and folders (``.obsidian``, ``.git``, ``.DS_Store``), ``__MACOSX`` and Windows'
  ``Thumbs.db`` and ``desktop.ini`` are skipped: they are tool state, not content.

Names in a zip: only entries flagged UTF-8 say their encoding. Python reads every other name as
code page 437, which turns ``会议.md`` from a Linux or macOS zip (UTF-8 without the flag) or from
a Chinese Windows zip (GBK) into mojibake pages. ``_zip_names`` recovers them
(docs/importing.md#file-names-in-zips-and-folders).
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import stat
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from openkb.errors import ConversionFailed
from openkb.importing.converters import MAX_ZIP_ENTRIES, MAX_ZIP_RATIO, MAX_ZIP_TOTAL
from openkb.importing.sniff import ZIP_MAGIC

__all__ = ["Entry", "Source", "is_archive", "open_source", "source_from_bytes"]


@dataclass
class Entry:
    rel: str
    is_dir: bool = False
    size: int = 0
    read: Callable[[], bytes] | None = None
    error: str | None = None


@dataclass
class Source:
    name: str
    entries: list[Entry] = field(default_factory=list)
    _zip: zipfile.ZipFile | None = None

    def files(self) -> list[Entry]:
        return [e for e in self.entries if not e.is_dir]

    def folders(self) -> list[Entry]:
        return [e for e in self.entries if e.is_dir]

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


_DIGITS = re.compile(r"(\d+)")
LANDING_STEMS = frozenset({"readme", "index", "_index"})  # a folder's landing page, as sites and repositories name it


def _natural(name: str) -> tuple[Any, ...]:
    """A name's place as a file manager shows it: case-insensitive, numbers by value (``2 setup``
    before ``10 faq``), the exact name last to keep equal-looking names in a fixed order."""
    parts = _DIGITS.split(name.casefold())  # text, number, text, ...: the kinds alternate
    return (tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name)


def import_order(e: Entry) -> tuple[Any, ...]:
    """The order things are created in, which is their order in the tree: folders first (a parent
    before its children), then the files; within a folder its landing page (``README.md``,
    ``index.md``) first, then by name as a file manager sorts them (docs/importing.md#what-becomes-what)."""
    parts = e.rel.split("/")
    if e.is_dir:
        return (0, len(parts), *(_natural(p) for p in parts))
    *folders, name = parts
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return (1, *((1, _natural(p)) for p in folders), (0 if stem.casefold() in LANDING_STEMS else 1, _natural(name)))


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


# What the operating systems leave in folders they showed (Windows' thumbnail caches and folder
# settings; macOS's are dot files): tool state, never content.
OS_LITTER = frozenset({"thumbs.db", "ehthumbs.db", "ehthumbs_vista.db", "desktop.ini"})


def _hidden(part: str) -> bool:
    return part.startswith(".") or part == "__MACOSX" or part.casefold() in OS_LITTER


def _read_file(path: Path) -> Callable[[], bytes]:
    def read() -> bytes:
        try:
            return path.read_bytes()
        except PermissionError:
            raise ConversionFailed("cannot read the file: permission denied") from None
        except OSError as exc:
            raise ConversionFailed(f"cannot read the file: {exc.strerror or exc}") from None

    return read


def open_source(path: Path, max_file_bytes: int) -> Source:
    """A folder, a ``.zip`` (recognised by its bytes) or a single file."""
    if not path.exists() and not path.is_symlink():
        raise ConversionFailed(f"{path} does not exist")
    if path.is_dir():
        return _folder(path, max_file_bytes)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise ConversionFailed(f"cannot read {path}: {exc.strerror or exc}") from None
    if is_archive(head, path.name):
        return _zip(zipfile_open(path), _fs_name(path.name) or _shown_name(path.name), max_file_bytes)
    text = _fs_name(path.name)
    name = _nfc(text) if text is not None else _shown_name(path.name)
    size = path.stat().st_size
    e = Entry(name, size=size, read=_read_file(path))
    if text is None:
        e.read, e.error = None, _BAD_NAME
    elif size > max_file_bytes:
        e.read, e.error = None, f"oversize: {size} bytes; at most {max_file_bytes} are allowed"
    return Source(name, [e])


def is_archive(head: bytes, name: str) -> bool:
    """Whether a file named ``name`` starting with ``head`` is imported as a zip archive: its
    name says so and its bytes agree. A ``.zip`` whose bytes are something else is refused
    (CONVERSION_FAILED) rather than imported as one page of whatever it holds; any other name
    is one file, whatever its bytes (a .docx is a zip too)."""
    if not name.lower().endswith(".zip"):
        return False
    if head.startswith(ZIP_MAGIC):
        return True
    raise ConversionFailed(f"{PurePosixPath(name).name} is not a zip archive (a damaged or partial download?)")


def zipfile_open(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ConversionFailed(f"damaged zip archive: {exc}") from None


def source_from_bytes(data: bytes, name: str, max_file_bytes: int) -> Source:
    """An uploaded file: a zip archive is unpacked (with the same caps), anything else is one file."""
    if is_archive(data[:4], name):
        try:
            z = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile as exc:
            raise ConversionFailed(f"damaged zip archive: {exc}") from None
        return _zip(z, name, max_file_bytes)
    rel = _nfc(PurePosixPath(name.replace("\\", "/")).name) or "upload"
    e = Entry(rel, size=len(data), read=lambda: data)
    if len(data) > max_file_bytes:
        e.read, e.error = None, f"oversize: {len(data)} bytes; at most {max_file_bytes} are allowed"
    return Source(rel, [e])


def _fs_name(name: str) -> str | None:
    """A file or folder name on disk as text. Linux hands over a name's bytes, and Python keeps
    bytes that are not UTF-8 as surrogates, which no database or page title takes: a folder
    unzipped from a Chinese or Japanese Windows zip by a tool that kept its legacy names has them.
    Such a name is read with the legacy code page it fits (``_as_legacy``, ``_zip_names``'s rule
    for zips), else None (the entry then fails with the reason, the rest goes on)."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        legacy = _as_legacy([os.fsencode(name)])
    return legacy[0] if legacy else None


def _shown_name(name: str) -> str:
    """An undecodable name as it can be reported: its odd bytes as ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


_BAD_NAME = "the file name is neither UTF-8 nor GBK, Big5 or Shift-JIS text; rename it and import again"


def _folder(root: Path, max_file_bytes: int) -> Source:
    root_real = root.resolve()
    src = Source(_fs_name(root.name) or _shown_name(root.name))
    rel_dirs: dict[Path, str] = {root: ""}  # each walked folder's path in the import, names decoded
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        rel_dir = rel_dirs[here]
        dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
        for d in list(dirnames):
            p = here / d
            text = _fs_name(d)
            if text is None:
                dirnames.remove(d)
                src.entries.append(Entry(posixpath.join(rel_dir, _shown_name(d)), error=_BAD_NAME))
                continue
            rel = _nfc(posixpath.join(rel_dir, text))
            rel_dirs[p] = rel
            if p.is_symlink():
                dirnames.remove(d)
                inside = _inside(p, root_real)
                src.entries.append(
                    Entry(
                        rel,
                        error="symlinked folder not followed"
                        + ("" if inside else " (it points outside the imported folder)"),
                    )
                )
                continue
            src.entries.append(Entry(rel, is_dir=True))
        for f in sorted(filenames):
            if _hidden(f):
                continue
            p = here / f
            text = _fs_name(f)
            if text is None:
                src.entries.append(Entry(posixpath.join(rel_dir, _shown_name(f)), error=_BAD_NAME))
                continue
            rel = _nfc(posixpath.join(rel_dir, text))
            try:
                st = p.lstat()
            except OSError as exc:
                src.entries.append(Entry(rel, error=f"cannot read the file: {exc.strerror or exc}"))
                continue
            target = p
            if stat.S_ISLNK(st.st_mode):
                if not _inside(p, root_real):
                    src.entries.append(Entry(rel, error="symlink points outside the imported folder; not followed"))
                    continue
                target = p.resolve()
                try:
                    st = target.stat()
                except OSError:
                    src.entries.append(Entry(rel, error="broken symlink"))
                    continue
            if not stat.S_ISREG(st.st_mode):
                src.entries.append(Entry(rel, error="not a regular file"))
                continue
            if st.st_size > max_file_bytes:
                src.entries.append(
                    Entry(
                        rel,
                        size=st.st_size,
                        error=f"oversize: {st.st_size} bytes; at most {max_file_bytes} are allowed",
                    )
                )
                continue
            src.entries.append(Entry(rel, size=st.st_size, read=_read_file(target)))
    src.entries.sort(key=import_order)
    return src


def _inside(p: Path, root_real: Path) -> bool:
    try:
        real = p.resolve()
    except OSError:
        return False
    return real == root_real or root_real in real.parents


_UNICODE_PATH_FIELD = 0x7075  # Info-ZIP's Unicode Path extra field: version, CRC-32 of the name, UTF-8 name


def _unicode_path(info: zipfile.ZipInfo, raw: bytes) -> str | None:
    """The UTF-8 name some zip tools (Info-ZIP, 7-Zip, WinRAR) keep beside a legacy one, if it
    still belongs to that name (its CRC-32 matches: a renaming tool may have left it stale)."""
    extra, i = info.extra, 0
    while i + 4 <= len(extra):
        kind, size = int.from_bytes(extra[i : i + 2], "little"), int.from_bytes(extra[i + 2 : i + 4], "little")
        body = extra[i + 4 : i + 4 + size]
        if kind == _UNICODE_PATH_FIELD and len(body) > 5 and body[0] == 1:
            if int.from_bytes(body[1:5], "little") == zlib.crc32(raw):
                try:
                    return body[5:].decode("utf-8")
                except UnicodeDecodeError:
                    return None
        i += 4 + size
    return None


def _chinese(name: str) -> bool:
    """Whether every non-ASCII character of ``name`` is one a Chinese file name holds: CJK
    ideographs, CJK and full-width punctuation, the middle dot and curly quotes. GB18030 decodes
    most byte strings into something, so this is what tells a GBK name from a code-page-437 one
    (``Año`` from a Western Windows zip reads as a private-use character)."""
    for c in name:
        o = ord(c)
        if o < 0x80 or o in (0xB7, 0xD7):
            continue
        if not (
            0x3400 <= o <= 0x4DBF  # CJK Extension A
            or 0x4E00 <= o <= 0x9FFF  # CJK Unified Ideographs
            or 0xF900 <= o <= 0xFAFF  # CJK Compatibility Ideographs
            or 0x3000 <= o <= 0x303F  # CJK Symbols and Punctuation
            or 0xFF00 <= o <= 0xFFEF  # Halfwidth and Fullwidth Forms
            or 0x2010 <= o <= 0x2027  # dashes, curly quotes, ellipsis
        ):
            return False
    return True


def _gb2312_share(raws: list[bytes]) -> float:
    """The share of the two-byte characters in ``raws`` that GB2312 holds (lead byte 0xA1-0xF7,
    trail 0xA1-0xFE): the characters of everyday Chinese names. Code-page-437 names read as
    GBK land outside it (an accented letter is 0x80-0xA5 and is followed by a letter), so a
    Western ``Über.md`` is not taken for the rare ideograph GB18030 makes of it."""
    pairs = inside = 0
    for raw in raws:
        i = 0
        while i < len(raw):
            if raw[i] < 0x80:
                i += 1
                continue
            pairs += 1
            if i + 1 < len(raw) and 0xA1 <= raw[i] <= 0xF7 and 0xA1 <= raw[i + 1] <= 0xFE:
                inside += 1
            i += 2
    return inside / pairs if pairs else 0.0


def _as_gbk(raws: list[bytes]) -> list[str] | None:
    """``raws`` read as GB18030, if every one then reads as Chinese (``_chinese``) and nearly all
    of their two-byte characters are everyday ones (``_gb2312_share`` >= 0.9); else None."""
    try:
        decoded = [raw.decode("gb18030") for raw in raws]
    except UnicodeDecodeError:
        return None
    return decoded if all(_chinese(v) for v in decoded) and _gb2312_share(raws) >= 0.9 else None


def _japanese(name: str) -> bool:
    """Whether every non-ASCII character of ``name`` is one a Japanese file name holds: kana
    (half-width too), CJK ideographs and punctuation, full-width forms, dashes and quotes."""
    for c in name:
        o = ord(c)
        if o < 0x80 or o in (0xB7, 0xD7):
            continue
        if not (
            0x3040 <= o <= 0x30FF  # hiragana, katakana
            or 0x4E00 <= o <= 0x9FFF  # CJK Unified Ideographs
            or 0xF900 <= o <= 0xFAFF  # CJK Compatibility Ideographs
            or 0x3000 <= o <= 0x303F  # CJK Symbols and Punctuation
            or 0xFF00 <= o <= 0xFFEF  # Halfwidth (kana) and Fullwidth Forms
            or 0x2010 <= o <= 0x2027  # dashes, curly quotes, ellipsis
        ):
            return False
    return True


def _pairs(raws: list[bytes], two_byte: Callable[[int], bool]) -> list[tuple[int, int, int]]:
    """The (lead, trail, run) bytes of the two-byte characters of ``raws``, in an encoding whose
    lead bytes ``two_byte`` tells; ``run``: how many two-byte characters stand together where it
    stands (1 when single-byte characters are on both sides)."""
    out: list[tuple[int, int, int]] = []
    for raw in raws:
        run: list[tuple[int, int]] = []
        i = 0
        while i <= len(raw):
            if i < len(raw) and two_byte(raw[i]) and i + 1 < len(raw):
                run.append((raw[i], raw[i + 1]))
                i += 2
                continue
            out += [(lead, trail, len(run)) for lead, trail in run]
            run = []
            i += 1
    return out


_ASCII_LETTER = frozenset(range(0x41, 0x5B)) | frozenset(range(0x61, 0x7B))
# second bytes that, after an accented letter, read as a Western name's next letter: an ASCII
# letter, ß (Größe), é and â (créée, théâtre)
_WESTERN_NEXT = _ASCII_LETTER | {0xE1, 0x82, 0x83}


def _everyday(
    pairs: list[tuple[int, int, int]], lead_ok: Callable[[int], bool], *, runs_are_words: bool = False
) -> bool:
    """Whether ``pairs`` look like a legacy double-byte code page's own names, not a Western
    code-page-437 name misread: at least 90% of them are its everyday characters (``lead_ok``),
    and at most 60% look like an accented letter followed by a letter. A Western name's accented
    letter is one byte followed by a letter, which Big5 and Shift-JIS read as one character:
    ``Año`` would be Big5 ``A寸``, ``naïve`` Shift-JIS ``na久e``, ``Größe`` ``Gr批e`` and
    ``théâtre`` ``thｃtre``. Their own second bytes are letters for about a third of the
    characters.

    Only a first byte that *is* an accented letter in code page 437 (0x80-0xA5, and ß) counts:
    the others are box-drawing and symbols no Western name holds, so a short Big5 name whose
    every second byte is a letter (``臺灣`` is BB 4F C6 57: ``╗O╞W`` in code page 437) is read
    as Big5. ``runs_are_words`` (Shift-JIS): three or more two-byte characters in a row do not
    count either. Katakana and many kanji have a letter for a second byte (``プロジェクト`` is
    ``âvâìâWâFâNâg`` in code page 437), and no Western word alternates accented letters with
    single letters three times over; two do (``éléphant``), so Big5 (``Ñoño`` as ``叨寸``) and
    shorter runs keep the rule.

    Measured with names made of 150 German, French, Spanish, Finnish and Nordic words (25,743
    distinct): none is taken for Chinese or Japanese (the earlier rule, which counted every
    letter after any lead byte, took 180: ``Größe``, ``théâtre``); of 135 everyday Japanese
    names alone, 132 are read (120 before: ``バグ``, ``確認``, ``障害`` still are not); of 30
    Traditional Chinese, 29 (27 before; ``人`` alone, A4 48, is ``ñH``); Simplified Chinese
    (GBK's own test) 20 of 20."""
    if not pairs:
        return False
    everyday = sum(1 for lead, _, _ in pairs if lead_ok(lead))
    western = sum(
        1
        for lead, trail, run in pairs
        if (lead <= 0xA5 or lead == 0xE1) and trail in _WESTERN_NEXT and not (runs_are_words and run >= 3)
    )
    return everyday >= 0.9 * len(pairs) and western <= 0.6 * len(pairs)


def _as_big5(raws: list[bytes]) -> list[str] | None:
    """``raws`` read as Big5 (code page 950: Windows in Traditional Chinese), if every one then
    reads as Chinese and its characters are everyday ones (lead byte 0xA1-0xC6: punctuation and
    the 5,401 frequent characters)."""
    try:
        decoded = [raw.decode("cp950") for raw in raws]
    except UnicodeDecodeError:
        return None
    pairs = _pairs(raws, lambda b: b >= 0x81)
    ok = all(_chinese(v) for v in decoded) and _everyday(pairs, lambda lead: 0xA1 <= lead <= 0xC6)
    return decoded if ok else None


def _as_shift_jis(raws: list[bytes]) -> list[str] | None:
    """``raws`` read as Shift-JIS (code page 932: Windows in Japanese), if every one then reads
    as Japanese and its two-byte characters are everyday ones (lead byte 0x81-0x84: punctuation,
    full-width letters and kana; 0x88-0x98: the 2,965 level-1 kanji)."""
    try:
        decoded = [raw.decode("cp932") for raw in raws]
    except UnicodeDecodeError:
        return None
    pairs = _pairs(raws, lambda b: 0x81 <= b <= 0x9F or 0xE0 <= b <= 0xFC)
    ok = all(_japanese(v) for v in decoded) and _everyday(
        pairs, lambda lead: lead <= 0x84 or 0x88 <= lead <= 0x98, runs_are_words=True
    )
    return decoded if ok else None


def _as_legacy(raws: list[bytes]) -> list[str] | None:
    """``raws`` (not UTF-8) read with the first legacy code page that fits every one of them:
    GBK, then Big5, then Shift-JIS; None when none does. The one rule for names in zips and on
    disk. The order: a Japanese name's kana and level-1 kanji have lead bytes below GB2312's
    and Big5's everyday ranges, and a Big5 name's frequent characters have trail bytes outside
    GB2312's for about 40% of them, so each code page's test turns the others' names away."""
    for guess in (_as_gbk, _as_big5, _as_shift_jis):
        decoded = guess(raws)
        if decoded is not None:
            return decoded
    return None


def _zip_names(infos: list[zipfile.ZipInfo]) -> list[str]:
    """Each entry's name, by position: as stored when the entry is flagged UTF-8 (bit 11);
    otherwise from its Unicode Path field when it has a valid one; otherwise the stored bytes
    decoded once for the whole archive, as the first of these that fits every such name:
    UTF-8 (Linux and macOS tools write it without the flag), the legacy code page of Windows in
    Simplified Chinese, Traditional Chinese or Japanese (GBK, Big5, Shift-JIS) when every name
    then reads as that language's everyday characters (``_as_legacy``), and code page 437, the
    format's default."""
    names = [info.filename for info in infos]  # flagged UTF-8, ASCII, or code page 437 at worst
    legacy: dict[int, bytes] = {}
    for n, info in enumerate(infos):
        if info.flag_bits & 0x800:
            continue
        raw = info.orig_filename.encode("cp437")  # zipfile decoded the stored bytes as cp437: undo it
        unicode = _unicode_path(info, raw)
        if unicode is not None:
            names[n] = unicode
        elif not raw.isascii():
            legacy[n] = raw
    if legacy:
        raws = list(legacy.values())
        try:
            decoded: list[str] | None = [raw.decode("utf-8") for raw in raws]
        except UnicodeDecodeError:
            decoded = _as_legacy(raws)
        if decoded is not None:  # else the code page 437 names stay
            for n, name in zip(legacy, decoded, strict=True):
                names[n] = name.split("\0", 1)[0]  # as zipfile cuts a name at a NUL
    return names


def _zip(z: zipfile.ZipFile, name: str, max_file_bytes: int) -> Source:
    infos = z.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        z.close()
        raise ConversionFailed(f"the zip has {len(infos)} entries; at most {MAX_ZIP_ENTRIES} are allowed")
    total = sum(i.file_size for i in infos)
    if total > MAX_ZIP_TOTAL:
        z.close()
        raise ConversionFailed(f"the zip expands to {total} bytes; at most {MAX_ZIP_TOTAL} are allowed (zip bomb?)")
    src = Source(_nfc(PurePosixPath(name).stem), _zip=z)
    seen: dict[str, str] = {}
    dirs: set[str] = set()
    names = _zip_names(infos)
    for n, info in enumerate(infos):
        raw = names[n]
        clean = raw.replace("\\", "/")
        parts = [p for p in clean.split("/") if p not in ("", ".")]
        if clean.startswith("/") or ".." in parts or (parts and len(parts[0]) == 2 and parts[0][1] == ":"):
            src.entries.append(Entry(_nfc(clean.strip("/")) or raw, error="unsafe path in the zip (.. or absolute)"))
            continue
        if not parts or any(_hidden(p) for p in parts):
            continue
        rel = _nfc("/".join(parts))
        for k in range(1, len(parts)):
            d = _nfc("/".join(parts[:k]))
            if d not in dirs:
                dirs.add(d)
                src.entries.append(Entry(d, is_dir=True))
        if info.is_dir():
            if rel not in dirs:
                dirs.add(rel)
                src.entries.append(Entry(rel, is_dir=True))
            continue
        if stat.S_ISLNK(info.external_attr >> 16):
            src.entries.append(Entry(rel, error="symlink in the zip; not followed"))
            continue
        if rel in seen:
            src.entries.append(Entry(rel, error=f"name collision: {raw!r} and {seen[rel]!r} are the same path"))
            continue
        seen[rel] = raw
        if info.flag_bits & 0x1:
            src.entries.append(Entry(rel, error="password-protected zip entry"))
            continue
        if info.file_size > max_file_bytes:
            src.entries.append(
                Entry(
                    rel,
                    size=info.file_size,
                    error=f"oversize: {info.file_size} bytes; at most {max_file_bytes} are allowed",
                )
            )
            continue
        if info.file_size > 1 << 20 and info.file_size / max(1, info.compress_size) > MAX_ZIP_RATIO:
            src.entries.append(
                Entry(
                    rel,
                    size=info.file_size,
                    error=f"expands {info.file_size // max(1, info.compress_size)}x; a ratio above "
                    f"{MAX_ZIP_RATIO} looks like a zip bomb",
                )
            )
            continue
        src.entries.append(Entry(rel, size=info.file_size, read=_zip_reader(z, info)))
    src.entries.sort(key=import_order)
    return src


def _zip_reader(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], bytes]:
    def read() -> bytes:
        try:
            with z.open(info) as f:
                data = f.read(info.file_size + 1)
        except (zipfile.BadZipFile, OSError, RuntimeError, EOFError, ValueError) as exc:
            raise ConversionFailed(f"damaged zip entry: {exc}") from None
        if len(data) > info.file_size:
            raise ConversionFailed("zip entry is larger than its header says (zip bomb?)")
        return data

    return read
