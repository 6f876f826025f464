"""The appliance loads no external URL: /api/docs (Swagger UI) and every HTML page it serves
name only same-origin URLs, and those URLs answer (issue 10 §9: /api/docs was blank offline)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from fastapi.routing import APIRoute

from tests.api.helpers import app_routes

# an absolute http(s) URL inside a quoted string of inline script
_SCRIPT_URL = re.compile(r"""["'`](https?:)?//[^"'`\s]+""")


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [v for k, v in attrs if k in ("src", "href", "action", "poster", "srcset") and v]
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def _foreign(url: str, origin: str) -> bool:
    parts = urlsplit(urljoin(origin + "/", url))
    return parts.scheme in ("http", "https") and f"{parts.scheme}://{parts.netloc}" != origin


def _html_pages(app, http) -> dict[str, str]:
    """Every parameterless GET route of the app that answers HTML (the docs pages among them)."""
    pages = {}
    for route in app_routes(app):
        if isinstance(route, APIRoute) and "GET" in route.methods and "{" not in route.path:
            r = http.get(route.path)
            if r.headers.get("content-type", "").startswith("text/html"):
                pages[route.path] = r.text
    return pages


def test_docs_page_and_its_assets_are_served_locally(app, http, live_server):
    r = http.get("/api/docs")
    assert r.status_code == 200 and "swagger-ui" in r.text
    page = _Page()
    page.feed(r.text)
    assert any(ref.endswith("swagger-ui-bundle.js") for ref in page.refs)
    assert any(ref.endswith("swagger-ui.css") for ref in page.refs)
    for ref in page.refs:
        assert not _foreign(ref, live_server), ref
        asset = http.get(urljoin(live_server + "/api/docs", ref))
        assert asset.status_code == 200, ref
    # the start-up script is a same-origin file (CSP script-src 'self'); the page names the document
    assert 'data-openapi-url="/api/openapi.json"' in r.text
    start = [ref for ref in page.refs if ref.endswith(".js") and not ref.endswith("swagger-ui-bundle.js")]
    script = "".join(page.scripts) + "".join(http.get(urljoin(live_server + "/api/docs", ref)).text for ref in start)
    assert "validatorUrl: null" in script  # else Swagger UI fetches validator.swagger.io
    assert not _SCRIPT_URL.search(script), script  # and it names no URL of its own
    css = http.get(next(urljoin(live_server + "/api/docs", x) for x in page.refs if x.endswith(".css")))
    assert not [u for u in re.findall(r"url\(([^)]*)\)", css.text) if _foreign(u.strip("'\""), live_server)]


def test_no_html_page_names_a_foreign_url(app, http, live_server):
    pages = _html_pages(app, http)
    assert "/api/docs" in pages and "/api/docs/oauth2-redirect" in pages
    for path, html in pages.items():
        page = _Page()
        page.feed(html)
        foreign = [ref for ref in page.refs if _foreign(ref, live_server)]
        foreign += [
            m.group(0).strip("\"'`")
            for s in page.scripts
            for m in _SCRIPT_URL.finditer(s)
            if _foreign(m.group(0).strip("\"'`"), live_server)
        ]
        assert not foreign, f"{path} loads {foreign}"


def test_redoc_stays_off(http):
    assert http.get("/redoc").status_code == 404
    assert http.get("/api/redoc").status_code == 404


def test_docs_pages_carry_the_security_headers(http):
    """/api/docs and its OAuth2 redirect page: not framable, not sniffed, a CSP that allows
    scripts from the appliance only (docs/web.md#security)."""
    for path in ("/api/docs", "/api/docs/oauth2-redirect"):
        r = http.get(path)
        assert r.status_code == 200, path
        assert r.headers["x-frame-options"] == "DENY", path
        assert r.headers["x-content-type-options"] == "nosniff", path
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp, (path, csp)
        assert "script-src 'self'" in csp and "unsafe-eval" not in csp, (path, csp)
        page = _Page()
        page.feed(r.text)
        assert not [s for s in page.scripts if s.strip()], f"{path} has inline script (CSP script-src 'self')"


def test_only_the_assets_the_docs_page_uses_are_served(http):
    """Not the whole Swagger UI folder: its own index.html and swagger-initializer.js load the
    petstore document from the internet."""
    for name in ("index.html", "swagger-initializer.js", "swagger-ui.js.map", "index.j2", "oauth2-redirect.html"):
        assert http.get(f"/api/docs/assets/{name}").status_code == 404, name
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        r = http.get(f"/api/docs/assets/{name}")
        assert r.status_code == 200, name
        assert r.headers["x-content-type-options"] == "nosniff", name
