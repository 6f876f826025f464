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


def from_markdown(markdown: str) -> str:
    return _UNESCAPE.sub(r"\1", markdown).rstrip("\n")
