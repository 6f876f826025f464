"""The export's textual link replacement (openkb/exporting/links.py) writes exactly what the
parse-and-normalize reference (``openkb.importing.links.rewrite``) writes, on normalized pages
mixing links with code spans, fences, math, tables, images, titles, escapes and nesting; and it
is taken for ordinary pages (it is what keeps an export near raw read speed: bench/export.py)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from openkb.exporting.links import fast_rewrite, rewrite_links
from openkb.importing.links import rewrite
from openkb.markdown import normalize

IDS = [str(uuid.UUID(int=i * 7919 + 1)) for i in range(4)]
KNOWN = set(IDS[:3])  # the fourth is not exported: its links stay


def resolve(url: str) -> str | None:
    if url.startswith("openkb://document/"):
        ref, hash_, frag = url[len("openkb://document/") :].partition("#")
        return f"../目录 a/页面 (1) {ref[:4]}.md{hash_}{frag}" if ref in KNOWN else None
    if url.startswith("asset://"):
        ref = url[len("asset://") :]
        return f"../assets/{ref[:8]}/图 1.png" if ref in KNOWN else None
    return None


def reference(body: str) -> str:
    """The export's parse: an autolink's text follows its new destination (``shown_url``)."""
    out, _ = rewrite(body, lambda u, _i: resolve(u.strip()), lambda _t, _a, _e: None, shown_url=True)
    return out


SNIPPETS = [
    "See [page](openkb://document/{id}) and more.",
    "A [link with fragment](openkb://document/{id}#标题-part) here.",
    "![image](asset://{id})",
    '[titled](openkb://document/{id} "a title")',
    "`[in code](openkb://document/{id})` and [real](openkb://document/{id})",
    "```\n[in fence](openkb://document/{id})\n```",
    "~~~md\n[in tilde fence](openkb://document/{id})\n~~~",
    "$$\n[in math block](openkb://document/{id})\n$$",
    "math $x^2 [m](openkb://document/{id}) y$ then [after](openkb://document/{id})",
    "| a | [cell](openkb://document/{id}) |\n| --- | --- |\n| `x` | y |",
    "![alt [inner](openkb://document/{id}) text](asset://{id})",
    "[outer [inner](openkb://document/{id})](https://example.com)",
    "\\[not a link](openkb://document/{id})",
    "<openkb://document/{id}>",
    "[ref][r]\n\n[r]: openkb://document/{id}",
    "- item [one](openkb://document/{id})\n  - nested `code` [two](openkb://document/{id})",
    "> quote [q](openkb://document/{id}) with `tick` and $m$",
    "``double `tick` code`` [x](openkb://document/{id})",
    "text `open\ncontinued` [x](openkb://document/{id})",
    "**bold [b](openkb://document/{id})** and *em* ~~del~~",
    "plain openkb://document/{id} in text",
    "# Heading [h](openkb://document/{id})",
]


@st.composite
def pages(draw):
    parts = draw(st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=8))
    return normalize("\n\n".join(p.replace("{id}", draw(st.sampled_from(IDS))) for p in parts) + "\n")


@settings(max_examples=300, deadline=None)
@given(body=pages())
def test_fast_path_writes_what_the_parse_writes(body):
    assert rewrite_links(body, resolve) == reference(body)
    fast = fast_rewrite(body, resolve)
    assert fast is None or fast == reference(body)


def test_ordinary_pages_take_the_fast_path():
    body = normalize(
        "# Notes\n\nSee [a](openkb://document/{0}) and `code()` then [b](openkb://document/{1}#x).\n\n"
        "- item $x$ [c](openkb://document/{2})\n\n![pic](asset://{0})\n\n```py\nprint(1)\n```\n".format(*IDS)
    )
    fast = fast_rewrite(body, resolve)
    assert fast is not None and fast == reference(body)
    assert "openkb://" not in fast and "asset://" not in fast


INLINE = [
    "[a](openkb://document/{id})",
    "![i](asset://{id})",
    "[b](openkb://document/{id}#x)",
    "`c`",
    "``d`e``",
    "$m$",
    "[",
    "]",
    "\\[",
    "\\]",
    "[x [y](openkb://document/{id})]",
    "text",
    "中文",
    "**s**",
]


@st.composite
def dense_pages(draw):
    """Many links per line and many lines per paragraph (a list, a long paragraph): what the
    per-line and per-paragraph caches of ``links._Context`` serve."""
    lines = draw(
        st.lists(
            st.lists(st.sampled_from(INLINE), min_size=1, max_size=8).map(" ".join),
            min_size=1,
            max_size=8,
        )
    )
    prefix = draw(st.sampled_from(["", "- ", "1. ", "> "]))
    body = "\n".join(prefix + line for line in lines)
    return normalize(body.replace("{id}", draw(st.sampled_from(IDS))) + "\n")


@settings(max_examples=300, deadline=None)
@given(body=dense_pages())
def test_fast_path_writes_what_the_parse_writes_on_dense_pages(body):
    fast = fast_rewrite(body, resolve)
    assert fast is None or fast == reference(body)


def test_a_page_of_many_links_is_scanned_once_per_paragraph_and_line(monkeypatch):
    """A list of 2,000 links: each reference used to re-read its whole paragraph (the list) and
    line, so a save (which computes the page's export form) grew with the square of its links."""
    from openkb.exporting import links

    calls = {"spans": 0, "lines": 0}
    real_spans, real_of = links._spans, links._Line.of

    def spans(text):
        calls["spans"] += 1
        return real_spans(text)

    def of(line, sp):
        calls["lines"] += 1
        return real_of(line, sp)

    monkeypatch.setattr(links, "_spans", spans)
    monkeypatch.setattr(links._Line, "of", staticmethod(of))
    body = normalize(
        "".join(
            f"- [page {i}](openkb://document/{IDS[i % 3]}) `x` [again](openkb://document/{IDS[0]})\n"
            for i in range(2000)
        )
    )
    refs = links.scan_refs(body)
    assert len(refs) == 4000 and all(plain for _s, _e, plain in refs)
    assert calls == {"spans": 1, "lines": 2000}


class _Scanned(str):
    """A body that counts the characters its ``find``/``rfind`` calls for a line break pass over."""

    def __new__(cls, text):
        out = super().__new__(cls, text)
        out.scanned = 0
        return out

    def find(self, sub, start=0, end=None):
        end = len(self) if end is None else end
        at = super().find(sub, start, end)
        if sub == "\n":
            self.scanned += (at if at >= 0 else end) - start
        return at

    def rfind(self, sub, start=0, end=None):
        end = len(self) if end is None else end
        at = super().rfind(sub, start, end)
        if sub == "\n":
            self.scanned += end - (at if at >= 0 else start)
        return at


def test_a_line_of_many_links_is_not_read_again_for_each_of_them():
    """The line around each reference was found with ``rfind``/``find`` from the reference: on
    one long line of links (an index paragraph) each read the line again, the square of its
    length (32,000 links: 4.3 s at every save). The line breaks are now listed once."""
    from openkb.exporting import links

    line = " ".join(f"[page {i}](openkb://document/{IDS[i % 3]})" for i in range(4_000))
    body = _Scanned(normalize(line + "\n\n" + line + "\n"))
    refs = links.scan_refs(body)
    assert len(refs) == 8_000 and all(plain for _s, _e, plain in refs)
    assert body.scanned <= 2 * len(body)  # each reference re-reading its line: ~8,000 x the line
    assert fast_rewrite(str(body), resolve) == reference(str(body))
