"""Index-only text comes back as written even where the editor links it (docs/apps.md#api).

The dialect links URL and e-mail literals in text however they are escaped, as the editor does
(docs/markdown.md#normalization), so the stored version of escaped plain text holds autolinks;
``from_markdown`` gives their text back. No database: the same two calls the upsert and
``documents.get`` make around the save's ``validate_and_normalize``.
"""

from __future__ import annotations

import pytest

from openkb.apps.plaintext import from_markdown, to_markdown
from openkb.markdown import validate_and_normalize


@pytest.mark.parametrize(
    "text",
    [
        "visit https://x.org/a_b or www.y.org, mail a@b.org.",
        "see (www.x.org/a(b)) and https://x.org/a\\_b!",
        "[x](y) <https://z.org> \\\\ a\\b",
        "www.x.org/a_b*c* and first_last@example.com",
        "http://x.org/?q=1&r=2; mailto:a@b.org",
        "plain <div> $5 and $6, 中文 www.例子.org",
    ],
)
def test_text_with_links_round_trips(text: str) -> None:
    stored = validate_and_normalize(to_markdown(text))
    assert "<" in stored or "](" in stored or "\\$" in stored  # the editor did link (or escape) something
    assert from_markdown(stored) == text
