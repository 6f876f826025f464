"""The web app: ``index.html`` for the app's pages, its hashed assets, one strict CSP (docs/web.md).

The bundle is built from ``web/`` by Vite into ``server/web/dist`` and committed, so the
appliance serves it without Node. Only the routes the single-page app owns answer
``index.html`` (``/``, ``/app/*``, the public pages that mails and API answers link to); any
other unknown path, ``/api/*`` above all, keeps the JSON ``NOT_FOUND`` of server/errors.py.

Caching: files under ``/assets/`` carry a content hash in their name, so they are ``immutable``
for a year; ``index.html`` is ``no-cache`` so a new release is picked up on the next visit.
Assets are gzip-compressed once per process when the client accepts it (the bundle is ~4 MB
raw, ~1 MB compressed; the app has no general compression middleware).

Trap: the CSP must allow exactly what Crepe needs — no inline script, no foreign origin, and no
inline style either: ``style-src`` carries a fresh nonce per ``index.html`` response instead of
``'unsafe-inline'`` (an injected ``<style>`` can read a page with attribute selectors). Vite's
``html.cspNonce`` writes the placeholder :data:`NONCE_PLACEHOLDER` into the built page (a
``<meta property="csp-nonce">`` and the tags it emits); :func:`index_page` replaces it, and the
app hands the nonce to whatever injects ``<style>`` (CodeMirror's ``EditorView.cspNonce``,
web/src/editor/crepe.ts). Style *attributes* are not covered by a nonce: the app only sets styles
through the CSSOM (``el.style.x = ...``), which the CSP allows, never ``style="..."`` markup or
``setAttribute("style", ...)``. tests/web fails on any CSP violation a page reports. The share
page puts a secret in the URL, hence ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

import functools
import gzip
import mimetypes
import re
import secrets
import threading
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from openkb.errors import NotFound

DIST = Path(__file__).resolve().parent / "dist"
ASSETS = DIST / "assets"

_CSP_DIRECTIVES = (
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'nonce-{nonce}'",
    "img-src 'self' blob: data:",
    "font-src 'self'",
    "connect-src 'self'",
    "frame-src 'self'",  # /diagram.html only: the app frames nothing else (DIAGRAM_CSP)
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
)
CSP_TEMPLATE = "; ".join(_CSP_DIRECTIVES)
# /diagram.html, the page that draws Mermaid diagrams in a hidden frame of the app
# (web/src/diagram-frame.ts), sandboxed to an origin of its own. Mermaid measures a diagram by
# drawing it with a <style> element and style attributes, so this page alone allows inline
# styles. It allows nothing else the app's CSP forbids, and less: scripts from this origin only,
# no connection, no image but data:, and only the app's own pages may frame it.
DIAGRAM_CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src data:",
        "font-src 'self'",
        "connect-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'self'",
        "object-src 'none'",
        # an origin of its own even if framed without the app's sandbox attribute
        "sandbox allow-scripts",
    )
)
# web/vite.config.ts html.cspNonce: the placeholder the build writes wherever the nonce goes.
NONCE_PLACEHOLDER = b"OPENKB_CSP_NONCE"

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
IMMUTABLE = "public, max-age=31536000, immutable"

# The single-page app's own routes (web/src/routes.ts); everything else is not ours.
PAGES = (
    "/",
    "/login",
    "/register",
    "/verify-email",
    "/reset-password",
    "/app",
    "/app/{rest:path}",
    "/admin",
    "/admin/{tab}",
    "/admin/milvus/rebuild-jobs",  # the index tab at its rebuilds (the product's route list)
    "/invitations/{token}",
    "/share/{token}",
    "/share/{token}/docs/{doc_id}",
)

router = APIRouter(include_in_schema=False)


def _index() -> bytes:
    try:
        return (DIST / "index.html").read_bytes()
    except FileNotFoundError as exc:  # a source checkout without a build: say so, don't 500
        raise NotFound("the web app is not built (cd web && npm ci && npm run build)") from exc


def csp(nonce: str) -> str:
    """The page's Content-Security-Policy with this response's style nonce."""
    return CSP_TEMPLATE.format(nonce=nonce)


# The document page: /app/kb/<kb>/docs/<doc> (web/src/lib/router.ts).
_DOCUMENT_PAGE = re.compile(r"^/app/kb/[^/]+/docs/[^/]+/?$")
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# its ids, when they are ids (only these ever reach the page's markup: nothing to escape)
_DOCUMENT_IDS = re.compile(rf"^/app/kb/(?P<kb>{_UUID})/docs/(?P<doc>{_UUID})/?$", re.IGNORECASE)
# Vite's dynamic-import dependency lists in the entry chunk (``__vite__mapDeps``), one per lazy chunk
_MAP_DEPS = re.compile(rb"m\.f=\[([^\]]*)\]")


@functools.lru_cache(maxsize=4)
def editor_hints(index_html: bytes) -> bytes:
    """The editor chunk, its static imports and its CSS, as the entry chunk's own
    ``__vite__mapDeps`` names them, for the document page: the CSS as a stylesheet, the static
    imports as ``modulepreload`` and the editor chunk itself as a module script that runs right
    after the entry (it imports the entry, so never before it). The browser fetches and compiles
    them while it parses the page and evaluates the editor at once, as a page that imports it
    statically would (bench/web.py's bare page), instead of once the entry script has run and
    asked for it: a dynamic ``import()`` waits behind the page's other tasks, one task per
    module of its graph, and Vite's loader waits for a ``load`` event of the CSS it inserts
    unless a stylesheet link for it is already there (bench/web.py: editor ready). Empty when
    the build has no such list.

    Traps: the editor chunk must have no side effect beyond defining its exports (Editor.ts
    mounts nothing by itself), since it runs on every document page load. No script or module
    tag here carries the nonce (see :func:`index_page`)."""
    entry = re.search(rb'src="/assets/(index-[A-Za-z0-9_-]+\.js)"', index_html)
    if entry is None or not (ASSETS / entry.group(1).decode()).is_file():
        return b""
    nonce = b' nonce="' + NONCE_PLACEHOLDER + b'"'
    for deps in _MAP_DEPS.findall((ASSETS / entry.group(1).decode()).read_bytes()):
        files = re.findall(rb'"assets/([A-Za-z0-9_.-]+)"', deps)
        if any(f.startswith(b"Editor-") and f.endswith(b".js") for f in files):
            css = [f for f in files if f.endswith(b".css")]
            editor = [f for f in files if f.endswith(b".js") and f.startswith(b"Editor-")]
            imports = [f for f in files if f.endswith(b".js") and not f.startswith(b"Editor-")]
            tags = [b'<link rel="stylesheet" crossorigin href="/assets/' + f + b'"' + nonce + b">" for f in css]
            # fetched with the editor, not once it has arrived (a first visit's waterfall)
            tags += [b'<link rel="modulepreload" crossorigin href="/assets/' + f + b'">' for f in imports]
            tags += [b'<script type="module" crossorigin src="/assets/' + f + b'"></script>' for f in editor]
            return b"".join(tags)
    return b""


def data_hints(path: str) -> bytes:
    """``<link rel="preload" as="fetch">`` for the API read the document page starts with, the
    document itself: the browser sends it while it parses the page, in parallel with the editor
    chunk, and the app's own ``fetch`` of the same URL takes the answer (web/src/api/client.ts
    sends that GET exactly as a preload does: same URL, mode and credentials). The hint names
    only the id in the URL, checked to be a UUID, so the page stays the same for everyone
    (nothing personal in the HTML, which may be cached ``no-cache``).

    Only the document: the knowledge base and the session reads follow once it has answered
    (web/src/pages/Document.tsx ``prefetchDocumentPage``). Hinted together, the three reads
    answered about together, as late as all three, and the editor waited for them.

    Trap: a hint the app does not consume costs a request and a console warning; keep this in
    step with what web/src/pages/Document.tsx reads first."""
    m = _DOCUMENT_IDS.match(path)
    if m is None:
        return b""
    return f'<link rel="preload" as="fetch" crossorigin href="/api/documents/{m["doc"]}">'.encode()


# Vite writes the nonce placeholder on every tag it emits, the entry <script> too
_SCRIPT_NONCE = re.compile(rb'(<script\b[^>]*?) nonce="' + NONCE_PLACEHOLDER + rb'"')


def index_page(request: Request) -> HTMLResponse:
    """``index.html`` with a fresh style nonce in both the page and its CSP header (and, on the
    document page, the editor's preload hints).

    ``no-cache`` makes the browser ask again each visit, so a nonce is never reused from a cache.

    Trap: the nonce goes on the style tags only, never on a ``<script>`` (``script-src`` is
    ``'self'`` and names no nonce, so it would add nothing). Chromium keeps a module's nonce
    with it, and its modules are passed on to every module it imports; V8 then reuses none of
    its compiled code from the previous visit, since the nonce differs each time, and compiled
    the editor chunk and the entry again on every page load (bench/web.py: editor ready)."""
    nonce = secrets.token_urlsafe(18)  # 144 bits, base64url: valid in a CSP nonce source
    body = _SCRIPT_NONCE.sub(rb"\1", _index())
    if _DOCUMENT_PAGE.match(request.url.path):
        body = body.replace(b"</head>", data_hints(request.url.path) + editor_hints(body) + b"</head>", 1)
    body = body.replace(NONCE_PLACEHOLDER, nonce.encode("ascii"))
    headers = {**SECURITY_HEADERS, "Content-Security-Policy": csp(nonce), "Cache-Control": "no-cache"}
    return HTMLResponse(body, headers=headers)


for _path in PAGES:
    router.add_api_route(_path, index_page, methods=["GET"], response_class=HTMLResponse)


@router.get("/diagram.html", response_class=HTMLResponse)
def diagram_page() -> HTMLResponse:
    """The diagram drawer's page (:data:`DIAGRAM_CSP`), framed by the app's pages only."""
    try:
        body = (DIST / "diagram.html").read_bytes()
    except FileNotFoundError as exc:
        raise NotFound("the web app is not built (cd web && npm ci && npm run build)") from exc
    body = body.replace(b' nonce="' + NONCE_PLACEHOLDER + b'"', b"")
    headers = {
        **SECURITY_HEADERS,
        "X-Frame-Options": "SAMEORIGIN",
        "Content-Security-Policy": DIAGRAM_CSP,
        "Cache-Control": "no-cache",
    }
    return HTMLResponse(body, headers=headers)


_gz_cache: dict[str, bytes] = {}
_gz_lock = threading.Lock()
_COMPRESSIBLE = (".js", ".css", ".svg", ".json", ".ttf", ".txt", ".html")


@router.get("/assets/{name}")
def asset(name: str, request: Request) -> Response:
    """A built file by its exact name: no sub-paths, nothing outside dist/assets."""
    path = ASSETS / name
    if "/" in name or "\\" in name or name.startswith(".") or not path.is_file():
        raise NotFound("no such asset")
    headers = {
        "Cache-Control": IMMUTABLE,
        "X-Content-Type-Options": "nosniff",
        "Vary": "Accept-Encoding",
        # the sandboxed diagram page (DIAGRAM_CSP) has an opaque origin, so its module scripts are
        # cross-origin loads; these files are the public, hashed bundle and carry no credentials
        "Access-Control-Allow-Origin": "*",
    }
    if name.endswith(_COMPRESSIBLE) and "gzip" in request.headers.get("accept-encoding", ""):
        body = _gz_cache.get(name)
        if body is None:
            # mtime=0: the same bytes on every start (caches and benches compare them)
            body = gzip.compress(path.read_bytes(), compresslevel=6, mtime=0)
            with _gz_lock:
                _gz_cache[name] = body
        media = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(body, media_type=media, headers={**headers, "Content-Encoding": "gzip"})
    return FileResponse(path, headers=headers)
