"""Index-only text (``documents.upsert`` with ``text`` + ``sourceUri``, docs/apps.md#api) kept
as Markdown that shows exactly that text.

Imported content is plain text, not Markdown: ``<div>`` in a scraped page must be indexed as
the characters ``<div>``, not refused by the dialect (raw HTML) nor turned into a list, a link
or a formula. ``to_markdown`` backslash-escapes every ASCII punctuation character (CommonMark
lets any of them be escaped, so no construct can start) and drops the blanks around each line
(four in front open a code block, two at the end make a hard break); ``from_markdown`` undoes
the escapes of the stored, normalized version. Trap: blanks around lines and runs of blank
lines are not kept — the text is for search, its original is at ``sourceUri``.
"""

from __future__ import annotations

import re
import string

_PUNCT = re.escape(string.punctuation)
_ESCAPE = re.compile(f"([{_PUNCT}])")
_UNESCAPE = re.compile(f"\\\\([{_PUNCT}])")


def to_markdown(text: str) -> str:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(_ESCAPE.sub(r"\\\1", line.strip(" \t")) for line in lines)


# The editor links URL and e-mail literals in text even when every character of them is escaped
# (it links the decoded text; the dialect does the same, docs/markdown.md#normalization), so the
# stored version holds `<https://x.org>`, `<a@b.org>` and `[www.x.org](http://www.x.org)`. No
# other `[` in it is unescaped: an escape is read first, then those links give back their text
# (an autolink's as written, a label unescaped); only a `<...>` shaped like a URL or an address
# is taken for a link.
_TOKEN = re.compile(
    f"\\\\([{_PUNCT}])|<((?:https?://|[^<>\\s@]+@)[^<>\\s]*)>|\\[((?:\\\\.|[^\\]\\\\])*)\\]\\(http://(?:[^()\\s]|\\([^()\\s]*\\))*\\)"
)


def _token_text(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        return m.group(1)
    if m.group(2) is not None:
        return m.group(2)
    return _UNESCAPE.sub(r"\1", m.group(3))


def from_markdown(markdown: str) -> str:
    return _TOKEN.sub(_token_text, markdown).rstrip("\n")
