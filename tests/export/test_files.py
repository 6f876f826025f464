"""The files of an export on their own (docs/export.md#the-zip): front matter any YAML reader
reads back exactly, and file names that every file system and the import accept."""

from __future__ import annotations

import json
import posixpath
import unicodedata

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from openkb.exporting.names import MAX_NAME_BYTES, MAX_NAME_CHARS, MIN_NAME_CHARS, Namer, fit, safe_name, units
from openkb.exporting.service import _JSON, ExportDoc, _doc_entry, _page_line, _rel, front_matter
from openkb.importing.openkb_export import split_front_matter

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=500, deadline=None)
@given(
    title=st.text(min_size=1),
    tags=st.lists(st.text(max_size=5), max_size=3),
    meta=st.dictionaries(st.text(max_size=4), JSON, max_size=4),
    body=st.text(max_size=20),
)
def test_front_matter_reads_back_exactly(title, tags, meta, body):
    text = front_matter(title, "published", tags, meta) + "\n" + body
    fm, rest = split_front_matter(text)
    assert fm == {"title": title, "status": "published", "tags": tags, "metadata": meta}
    assert rest == body
    assert yaml.safe_load(text.split("---\n", 2)[1]) == fm


WINDOWS_BAD = set('<>:"/\\|?*#%')


@settings(max_examples=500, deadline=None)
@given(titles=st.lists(st.text(max_size=120), min_size=1, max_size=6))
def test_names_are_safe_and_unique(titles):
    namer = Namer(("assets", "openkb-export.json"))
    names = [namer.take(t) for t in titles]
    folded = [unicodedata.normalize("NFC", n).casefold() for n in names]
    assert len(set(folded)) == len(names)
    for n in names:
        assert n and n not in (".", "..") and not n.startswith(".") and not n.endswith((".", " "))
        assert not (set(n) & WINDOWS_BAD) and all(ord(c) >= 32 and c != "\x7f" for c in n)
        assert n.split(".")[0].strip().lower() not in {"con", "prn", "aux", "nul", "com1", "lpt1"}
        assert len(n) <= MAX_NAME_CHARS + 6 and n.casefold() not in ("assets", "openkb-export.json")


def test_names_keep_letters():
    assert safe_name("知识库 Notes") == "知识库 Notes"
    assert safe_name("a/b:c") == "a_b_c"
    assert safe_name("CON") == "CON_" and safe_name("nul.txt") == "nul_.txt"
    assert safe_name("..") == "untitled" and safe_name(".env") == "_env"


@settings(max_examples=300, deadline=None)
@given(
    titles=st.lists(st.text(min_size=1, max_size=150) | st.just("知识库" * 60), min_size=1, max_size=5),
    limit=st.integers(1, 120),
)
def test_names_cut_to_a_budget_stay_unique_and_short(titles, limit):
    namer = Namer()
    names = [namer.take(t, limit) for t in titles]
    assert len({unicodedata.normalize("NFC", n).casefold() for n in names}) == len(names)
    for n in names:
        assert units(n) <= max(limit, MIN_NAME_CHARS) and len(n.encode()) <= MAX_NAME_BYTES
        assert not n.endswith((".", " ")) and not (set(n) & WINDOWS_BAD)
    again = Namer()
    assert [again.take(t, limit) for t in titles] == names  # stable: the same titles, the same names


def _first_free(taken: set[str], title: str, limit: int, keep_extension: bool) -> str:
    """What ``Namer.take`` gives, by its definition: the title's name, else "name (n)" for the
    smallest n >= 2 that is free (case and Unicode form folded)."""
    base = safe_name(title)
    n = 1
    while True:
        name = fit(base if n == 1 else f"{base} ({n})", limit, keep_extension=keep_extension)
        if unicodedata.normalize("NFC", name).casefold() not in taken:
            taken.add(unicodedata.normalize("NFC", name).casefold())
            return name
        n += 1


_ALIKE = st.sampled_from(["Notes", "notes", "Notes (2)", "Notes (3)", "NOTES (4)", "Notes (2) (2)", "ｎotes", "a.png"])


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(
        st.tuples(_ALIKE | st.text(max_size=20), st.sampled_from([MAX_NAME_CHARS, 12, 1]), st.booleans()),
        min_size=1,
        max_size=40,
    )
)
def test_names_are_the_first_free_number(calls):
    """Titles alike, titles that look numbered, different budgets: each name is the first free
    one, as if every number were tried from 1 (the namer skips those it gave before)."""
    namer, taken = Namer(("assets",)), {"assets"}
    for title, limit, keep in calls:
        assert namer.take(title, limit, keep_extension=keep) == _first_free(taken, title, limit, keep)


def test_many_pages_titled_alike_are_named_in_linear_time():
    """The k-th "Untitled" of a folder is not found by trying 1..k again (K²/2 names: 4,000
    pages took 6 s): the namer goes on from the last number it gave that title."""
    namer, tried = Namer(), []
    real = fit

    def counting(name, limit, *, keep_extension=False):
        tried.append(name)
        return real(name, limit, keep_extension=keep_extension)

    import openkb.exporting.names as names

    names.fit, saved = counting, names.fit
    try:
        got = [namer.take("Untitled") for _ in range(2_000)]
    finally:
        names.fit = saved
    assert got[:3] == ["Untitled", "Untitled (2)", "Untitled (3)"] and got[-1] == "Untitled (2000)"
    assert len(tried) == 2 * 2_000  # one in safe_name, one for the name given (trying 1..k: ~2 million)


def test_a_cut_name_keeps_its_hash_and_extension():
    long = "图片" * 80 + ".png"
    name = fit(long, 40, keep_extension=True)
    assert name.endswith(".png") and units(name) == 40 and "~" in name
    assert fit(long, 40, keep_extension=True) == name and fit(long + "x", 40) != name
    assert len(safe_name("知" * 100).encode()) <= MAX_NAME_BYTES  # 300 bytes uncut: past ext4's 255
    assert safe_name("😀" * 60) == fit("😀" * 60, MAX_NAME_CHARS) and units(safe_name("😀" * 60)) <= MAX_NAME_CHARS


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(),
    maybe=st.none() | st.text(max_size=8),
    assets=st.lists(st.text(max_size=6), max_size=3),
    n=st.integers(min_value=0, max_value=2**40),
    version_no=st.none() | st.integers(min_value=1, max_value=10**6),
)
def test_a_page_manifest_line_is_its_entry_as_json(text, maybe, assets, n, version_no):
    d = ExportDoc(
        id=text,
        type="page",
        title=text + '\x00"\\\u2028',
        status="published",
        parent=maybe,
        path=f"a/{text}.md",
        dir="a/",
        version_id=maybe,
        version_no=version_no,
        markdown_hash=maybe,
        assets=assets,
        sha256=maybe,
        bytes=n,
    )
    assert _page_line(d) == _JSON(_doc_entry(d))


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_the_built_once_encoder_is_json_dumps(value):
    # _JSON keeps one C encoder instead of building one per call (docs/export.md#speed): the
    # same text as json.dumps with the same arguments, which the manifest and front matter promise
    assert _JSON(value) == json.dumps(value, ensure_ascii=False, sort_keys=True)


NAME = st.sampled_from(["a", "b", "ab", "a b", "页", "页.md"])


@settings(max_examples=500, deadline=None)
@given(
    folder=st.lists(NAME, max_size=3).map("/".join),
    parts=st.lists(NAME, min_size=1, max_size=4).map("/".join),
    is_folder=st.booleans(),
)
def test_relative_links_are_posix_relpath(folder, parts, is_folder):
    # _rel's shortcuts (the top, a sibling) and its common-prefix walk agree with relpath
    path = parts + "/" if is_folder else parts + ".md"
    expected = posixpath.relpath(parts if is_folder else path, folder or ".") + ("/" if is_folder else "")
    assert _rel(path, folder) == expected


def test_device_names_keep_their_extension_and_stop_being_device_names():
    assert safe_name("CON.png", keep_extension=True) == "CON_.png"
    assert Namer().take("nul.txt") + ".md" == "nul_.txt.md"
    assert safe_name("aux.tar.gz", keep_extension=True) == "aux_.tar.gz"
    for dev in ("COM¹", "COM²", "COM³", "LPT¹", "LPT²", "LPT³"):
        assert safe_name(dev) == dev + "_" and safe_name(dev + ".txt") == dev + "_.txt"
