"""The strict style policy in a real browser: a fresh nonce per page, no ``'unsafe-inline'``.

Every editor feature that injects styles (CodeMirror code blocks, KaTeX math, table alignment,
the image block, the slash menu and toolbar) is rendered in edit and read mode; the ``contexts``
fixture fails the test on any CSP violation the page reports (tests/web/conftest.py).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, editor, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow

EVERY_STYLED_FEATURE = """# Styled features

Inline math $E = mc^2$ and `inline code`.

$$
\\int_0^1 x^2 \\, dx = \\frac{1}{3}
$$

```python
def greet(name):
    return f"hello {name}"
```

| left | centre | right |
| :--- | :----: | ----: |
| a    |   b    |     c |

- [ ] open task
- [x] done task

> a quote
"""


def test_index_carries_a_fresh_style_nonce_in_page_and_header(http):
    seen = set()
    for _ in range(2):
        r = http.get("/app")
        csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
        m = re.fullmatch(r"'self' 'nonce-([A-Za-z0-9_-]{24})'", csp["style-src"])
        assert m, csp["style-src"]
        assert "unsafe" not in r.headers["content-security-policy"]
        nonce = m.group(1)
        assert f'<meta property="csp-nonce" nonce="{nonce}">' in r.text
        assert "OPENKB_CSP_NONCE" not in r.text
        seen.add(nonce)
    assert len(seen) == 2  # per response, never reused


def test_every_styled_feature_renders_without_a_csp_violation(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Styled", EVERY_STYLED_FEATURE)
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    surface = editor(page)
    expect(surface.locator(".katex").first).to_be_visible()
    expect(surface.locator(".cm-editor").first).to_be_visible()
    # CodeMirror's rules arrived through a nonce'd <style> (a wrong nonce would be a violation the
    # fixture reports); the meta that carried the nonce is gone (web/src/lib/nonce.ts), and no
    # link the loader inserted carries it
    assert page.evaluate("[...document.querySelectorAll('style')].some(s => s.nonce && s.textContent.includes('.cm-'))")
    assert page.evaluate("document.querySelector('meta[property=csp-nonce]')") is None
    assert page.evaluate("[...document.querySelectorAll('link[rel=modulepreload]')].filter(l => l.nonce).length") == 0
    # table alignment (ProseMirror writes it as a style attribute: it must still apply)
    align = surface.evaluate(
        "s => [...s.querySelectorAll('td')].filter(td => td.textContent.trim() === 'c')"
        ".map(td => getComputedStyle(td).textAlign)"
    )
    assert align == ["right"], align
    # the block handle and slash menu (Crepe's floating UI positions itself with styles)
    surface.locator("p").filter(has_text="Inline math").click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("/")
    expect(page.locator(".milkdown-slash-menu")).to_be_visible()
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Read").click()
    expect(surface.locator(".katex").first).to_be_visible()


def test_a_share_page_loads_the_editor_with_no_nonce_on_its_links(contexts, live_server, owner):  # noqa: F811
    """A share page has no editor hints in its HTML: the reader's ``import()`` makes Vite's loader
    insert a ``modulepreload`` per editor module. None may carry the page's nonce (Chromium
    would then compile the 1 MB editor chunk again on every visit), and the code block's
    CodeMirror style still applies (the fixture fails on any violation)."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Shared styles", "# Shared\n\n```python\nprint(1)\n```\n")
        link = c.post(f"/api/objects/document/{doc['id']}/share-links", json={}).json()
    visitor = contexts.page()
    visitor.goto(urlsplit(link["url"]).path)
    reader = visitor.locator(".reader[data-ready='true']")
    expect(reader.locator(".cm-editor").first).to_be_visible()
    inserted = visitor.evaluate("[...document.querySelectorAll('link[rel=modulepreload]')].map(l => [l.href, l.nonce])")
    assert any("/assets/Editor-" in href for href, _ in inserted), inserted
    assert [href for href, nonce in inserted if nonce] == []
    assert visitor.evaluate(
        "[...document.querySelectorAll('style')].some(s => s.nonce && s.textContent.includes('.cm-'))"
    )
