"""How the appliance serves the web app (server/web): pages, assets, headers, the API's 404s.

Plain HTTP against the live server; the browser behaviour is in test_browser.py.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

from server.web import ASSETS, DIST

ROOT = Path(__file__).resolve().parents[2]

PAGES = [
    "/",
    "/login",
    "/register",
    "/verify-email?token=abc",
    "/reset-password?token=abc",
    "/app",
    "/app/search",
    "/app/workspaces/1b6e0c1e-0000-0000-0000-000000000000",
    "/app/kb/x/docs/y",
    "/invitations/kbinv_abc",
    "/share/kbshare_abc",
]


@pytest.mark.parametrize("path", PAGES)
def test_app_routes_answer_the_index_with_a_strict_policy(http, path):
    r = http.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["cache-control"] == "no-cache"
    csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    nonce = re.fullmatch(r"'self' 'nonce-([A-Za-z0-9_-]+)'", csp["style-src"]).group(1)  # no 'unsafe-inline'
    built = (DIST / "index.html").read_text(encoding="utf-8")
    # the nonce goes on style tags only (server/web/__init__.py index_page)
    built = re.sub(r'(<script\b[^>]*?) nonce="OPENKB_CSP_NONCE"', r"\1", built)
    # the document page's editor tags and read hint (test_the_document_page_runs_the_editor_...)
    page = re.sub(r'<link rel="(?:stylesheet|preload)"[^>]* href="/(?:assets/Editor-|api/)[^>]*>', "", r.text)
    page = re.sub(r'<link rel="modulepreload"[^>]*>', "", page)
    page = re.sub(r'<script type="module" crossorigin src="/assets/Editor-[^"]+"></script>', "", page)
    assert page == built.replace("OPENKB_CSP_NONCE", nonce)
    assert csp["default-src"] == "'none'"
    assert csp["script-src"] == "'self'"  # no inline script, no eval, no foreign origin
    assert csp["connect-src"] == "'self'" and csp["font-src"] == "'self'"
    assert csp["frame-ancestors"] == "'none'"
    assert csp["frame-src"] == "'self'"  # the diagram drawer (/diagram.html), nothing foreign
    assert not any("http" in v or "*" in v for v in csp.values())
    assert r.headers["referrer-policy"] == "no-referrer"  # share tokens live in the URL


def test_the_diagram_page_allows_inline_styles_and_nothing_else_the_app_forbids(http):
    """/diagram.html draws Mermaid diagrams in a hidden frame of the app (web/src/diagram-frame.ts):
    Mermaid lays a diagram out with inline styles, so this page alone allows them; no inline
    script, no connection, no foreign origin, and only the app's pages may frame it."""
    r = http.get("/diagram.html")
    assert r.status_code == 200, r.text
    csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    assert csp["style-src"] == "'self' 'unsafe-inline'"
    assert csp["script-src"] == "'self'" and csp["default-src"] == "'none'"
    assert csp["connect-src"] == "'none'" and csp["img-src"] == "data:"
    assert csp["frame-ancestors"] == "'self'" and r.headers["x-frame-options"] == "SAMEORIGIN"
    assert csp["sandbox"] == "allow-scripts"  # an origin of its own, however it is framed
    assert not any("http" in v or "*" in v for v in csp.values())
    assert "OPENKB_CSP_NONCE" not in r.text and "nonce=" not in r.text
    assert r.text == (DIST / "diagram.html").read_text(encoding="utf-8").replace(' nonce="OPENKB_CSP_NONCE"', "")


@pytest.mark.parametrize(
    "path",
    ["/api/nope", "/api/app", "/nope", "/app-x", "/assets", "/share", "/assets/..%2Findex.html", "/assets/.hidden"],
)
def test_anything_else_keeps_the_json_404(http, path):
    r = http.get(path)
    assert r.status_code == 404
    assert r.json()["error"] == "NOT_FOUND"


_BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.parametrize("path", ["/nope", "/kb/x", "/app-x", "/share", "/docs/a/b"])
def test_a_browser_opening_an_unknown_url_gets_the_app_s_not_found_page(http, path):
    """A typo or an old bookmark, opened in a browser: the app's own page (its router matches
    no route and shows a link home), still answered 404 and under the app's policy."""
    r = http.get(path, headers=_BROWSER)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert '<div id="app"></div>' in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]


@pytest.mark.parametrize("path", ["/api/nope", "/api", "/mcp/x", "/retrieval/x", "/oauth/nope", "/assets/nope.js"])
def test_programs_paths_keep_the_json_404_even_for_a_browser(http, path):
    r = http.get(path, headers=_BROWSER)
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    assert http.post("/nope", headers=_BROWSER).json()["error"] == "NOT_FOUND"  # not a page visit


@pytest.mark.parametrize("page", ["index.html", "diagram.html"])
def test_the_built_index_references_only_hashed_same_origin_files(page):
    html = (DIST / page).read_text(encoding="utf-8")
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs, html
    assert "<script>" not in html  # the CSP forbids inline script
    for ref in refs:
        assert ref.startswith("/assets/"), ref
        assert (ASSETS / ref.removeprefix("/assets/")).is_file(), ref
        assert re.search(r"-[A-Za-z0-9_-]{8}\.(js|css|svg)$", ref), ref  # content-hashed name


def test_the_page_names_its_icon_so_no_browser_asks_for_a_missing_one(http):
    """Without a named icon every browser asks for /favicon.ico, a 404 in every tab's console."""
    icon = re.search(r'<link rel="icon" type="image/svg\+xml" href="(/assets/[^"]+)"', http.get("/app").text)
    assert icon, "no icon link"
    r = http.get(icon.group(1))
    assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
    assert r.content.startswith(b"<svg") and b"<script" not in r.content


def test_assets_are_immutable_and_gzipped_on_request(http):
    js = next(p.name for p in ASSETS.glob("index-*.js"))
    plain = http.get(f"/assets/{js}", headers={"accept-encoding": "identity"})
    assert plain.status_code == 200
    assert plain.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "javascript" in plain.headers["content-type"]
    # the sandboxed diagram page's module scripts are cross-origin loads of these public files
    assert plain.headers["access-control-allow-origin"] == "*"
    assert plain.content == (ASSETS / js).read_bytes()
    import httpx

    with (
        httpx.Client(base_url=str(http.base_url)) as raw,
        raw.stream("GET", f"/assets/{js}", headers={"accept-encoding": "gzip"}) as r,
    ):
        body = b"".join(r.iter_raw())
        assert r.headers["content-encoding"] == "gzip"
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert gzip.decompress(body) == plain.content
    assert len(body) < len(plain.content)


def test_head_answers_as_get_without_a_body(http):
    """Uptime monitors, link checkers and caches send HEAD (server/head.py): the GET's status and
    headers, no body; a route that has no GET keeps its 405."""
    js = next(p.name for p in ASSETS.glob("index-*.js"))
    for path in ("/healthz", "/readyz", "/", "/login", f"/assets/{js}", "/api/openapi.json", "/api/nope"):
        get, head = (
            http.get(path, headers={"accept-encoding": "identity"}),
            http.head(path, headers={"accept-encoding": "identity"}),
        )
        assert head.status_code == get.status_code and head.content == b"", path
        assert head.headers["content-type"] == get.headers["content-type"], path
        if path.startswith(("/assets/", "/api/")):  # fixed bodies (a page's nonce, /readyz's figures vary)
            assert head.headers.get("content-length") == get.headers.get("content-length"), path
    assert http.head(f"/assets/{js}").headers["cache-control"] == "public, max-age=31536000, immutable"
    assert http.head("/api/search").status_code == 405  # POST only, as for GET
    assert http.head("/api/auth/me").status_code == 401  # the same authentication as GET


def test_the_bundle_loads_no_external_url():
    """Fonts, KaTeX, icons: everything the bundle names is in the bundle (no CDN at run time).

    Library code holds plenty of URL strings (licences, docs links, XML namespaces); what may not
    appear is a stylesheet or font URL pointing outside, or an ``@import`` of one."""
    for css in ASSETS.glob("*.css"):
        text = css.read_text(encoding="utf-8")
        for url in re.findall(r"url\(([^)]*)\)", text):
            url = url.strip("'\"")
            assert not re.match(r"(https?:)?//", url), (css.name, url)
        assert "@import" not in text, css.name
    fonts = [p for p in ASSETS.iterdir() if p.suffix in (".woff2", ".woff", ".ttf")]
    assert any(p.name.startswith("KaTeX_") for p in fonts)  # KaTeX's fonts are local files


def _current_openapi() -> dict:
    sys.path.insert(0, str(ROOT / "web" / "scripts"))
    try:
        import openapi as dump  # web/scripts/openapi.py
    finally:
        sys.path.pop(0)
    return json.loads(dump.render(dump.document()))


def _closure(schemas: dict, names: set[str]) -> set[str]:
    """The named schemas and every schema they reference, transitively."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo += re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(schemas[name]))
    return seen


def _shape(node):
    """A schema without its prose (descriptions, titles, examples): wording changes break nothing."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items() if k not in ("description", "title", "examples", "example")}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return node


def test_the_web_app_is_typed_against_the_current_api():
    """web/openapi.json is what the web app's API types are generated from (web/src/api). Every
    schema the app names (``S['...']``, and what those reference) must be what the server
    answers today, and every route the client calls must exist: a renamed field or route fails
    here (and in ``npm run build`` once regenerated) instead of on a user's page. Routes and
    schemas the app doesn't use may change freely. Regenerate with ``python web/scripts/openapi.py``
    and ``cd web && npm run gen:api``."""
    src = "".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "web" / "src").rglob("*.ts*") if p.name != "schema.d.ts"
    )
    used = set(re.findall(r"S\['(\w+)'\]", src))
    assert {"DocumentOut", "SaveOut", "TreeItem", "MeOut"} <= used
    current = _current_openapi()
    committed = json.loads((ROOT / "web" / "openapi.json").read_text(encoding="utf-8"))
    cur_s, com_s = current["components"]["schemas"], committed["components"]["schemas"]
    for name in sorted(_closure(com_s, used)):
        assert name in cur_s, f"schema {name} is gone: regenerate web/openapi.json"
        assert _shape(cur_s[name]) == _shape(com_s[name]), f"schema {name} changed: regenerate web/openapi.json"

    client = (ROOT / "web" / "src" / "api" / "client.ts").read_text(encoding="utf-8")
    calls = re.findall(r"request<[^>]*>\('(GET|POST|PUT|DELETE)', [`']([^`']+)[`']", client)
    assert len(calls) > 30
    routes = [
        (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"), method.lower())
        for path, ops in current["paths"].items()
        for method in ops
    ]
    for method, url in calls:
        path = re.sub(r"\$\{[^}]+\}", "x", url.split("?")[0].split("${id ?")[0])
        assert any(rx.match(path) and m == method.lower() for rx, m in routes), f"{method} {url}: no such route"


def test_the_document_page_runs_the_editor_and_nothing_else_does(http):
    """On /app/kb/<kb>/docs/<doc> the page itself carries the editor: its CSS as a stylesheet
    (with this response's nonce), its static imports as modulepreload and the editor chunk as a
    module script after the entry, so the browser runs it while the app starts (the files the
    entry chunk would ask for once it ran); other pages don't load the editor."""
    r = http.get("/app/kb/x/docs/y")
    nonce = re.search(r"'nonce-([A-Za-z0-9_-]+)'", r.headers["content-security-policy"]).group(1)
    head = r.text.split("</head>")[0]
    css = re.findall(r'<link rel="stylesheet" crossorigin href="/assets/(Editor-[^"]+\.css)" nonce="([^"]+)">', head)
    scripts = re.findall(r'<script type="module" crossorigin src="/assets/([^"]+)"', head)
    imports = re.findall(r'<link rel="modulepreload" crossorigin href="/assets/([^"]+)">', head)  # fetched alongside
    assert css and {n for _, n in css} == {nonce}, r.text
    assert len(scripts) == 2 and scripts[0].startswith("index-") and scripts[1].startswith("Editor-"), scripts
    assert imports and not any(f.startswith("Editor-") for f in imports), imports
    assert all((ASSETS / f).is_file() for f in [*scripts, *imports, *(f for f, _ in css)])
    for path in ("/app", "/app/kb/x", "/login"):
        page = http.get(path).text
        assert "Editor-" not in page and "modulepreload" not in page, path


def test_no_script_tag_carries_the_nonce(http):
    """``script-src 'self'`` names no nonce, and a module script's nonce is passed on to every
    module it imports: with a fresh one per page, Chromium's V8 reused no compiled code of the
    previous visit and compiled the entry and the editor again on every load. Style tags keep it
    (CodeMirror's ``<style>`` needs it)."""
    for path in ("/app", "/login", "/app/kb/x/docs/y"):
        r = http.get(path)
        nonce = re.search(r"'nonce-([A-Za-z0-9_-]+)'", r.headers["content-security-policy"]).group(1)
        scripts = re.findall(r"<script\b[^>]*>", r.text)
        assert scripts and not any("nonce" in tag for tag in scripts), scripts
        assert f'<meta property="csp-nonce" nonce="{nonce}">' in r.text
        assert re.search(rf'<link rel="stylesheet" crossorigin href="/assets/index-[^"]+" nonce="{nonce}">', r.text)


def test_the_document_page_hints_its_first_api_read_by_id_only(http):
    """On /app/kb/<kb>/docs/<doc> with UUIDs the page names the document's read as a fetch
    preload (web/src/main.tsx takes its answer; the knowledge base and the session follow it);
    an id that is not a UUID puts nothing of the URL into the page, and other pages hint no
    reads."""
    kb, doc = "0b6e0c1e-0000-4000-8000-00000000000a", "0b6e0c1e-0000-4000-8000-00000000000b"
    r = http.get(f"/app/kb/{kb}/docs/{doc}")
    hints = re.findall(r'<link rel="preload" as="fetch" crossorigin href="([^"]+)">', r.text)
    assert hints == [f"/api/documents/{doc}"], r.text
    assert r.headers["cache-control"] == "no-cache"
    for path in (f"/app/kb/{kb}/docs/%22%3E%3Cscript%3E", f"/app/kb/{kb}", "/app", "/login"):
        page = http.get(path).text
        assert 'as="fetch"' not in page and "<script>" not in page, path
