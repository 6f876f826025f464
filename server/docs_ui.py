"""``/api/docs``: Swagger UI served by the appliance itself, from an installed package.

FastAPI's built-in page loads Swagger UI's script and stylesheet from a public CDN and its
favicon from fastapi.tiangolo.com, so on an appliance without internet access the page stayed
blank. Here the assets come from the ``swagger-ui-bundle-v2`` package (Swagger UI 5, which reads
the OpenAPI 3.1 document FastAPI writes; the older ``swagger-ui-bundle`` ships Swagger UI 4 and
can't) under ``/api/docs/assets/``, and every URL the page names is same-origin (docs/api.md).

Only the files the two pages use are served (:data:`ASSETS`), never the package's folder: it
also holds Swagger's own ``index.html`` and ``swagger-initializer.js``, which load the petstore
document from petstore.swagger.io (the appliance loads nothing from the internet), plus source
maps and templates nobody needs. Both pages carry the web app's security headers and a CSP of
their own (:data:`CSP`, docs/web.md#security): no inline script, so the start-up code FastAPI
writes inline is a same-origin file here (:data:`START_JS`), reading the page's URLs from
``data-`` attributes; ``style-src`` allows inline styles because Swagger UI's React components
set ``style`` attributes on what they render.

Trap: Swagger UI shows a validator badge that fetches ``validator.swagger.io`` for any document
not served from localhost; ``validatorUrl: null`` turns that off. ReDoc stays disabled
(``redoc_url=None``): it would need its own bundle and fonts from a CDN.
``tests/api/test_docs_offline.py`` fails on any absolute URL of another origin in what the
app serves as HTML, and on any file of the package served beyond :data:`ASSETS`.
"""

from __future__ import annotations

import html
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from swagger_ui_bundle import swagger_ui_path

from openkb.errors import NotFound
from server.web import SECURITY_HEADERS

DOCS_URL = "/api/docs"
ASSETS_URL = DOCS_URL + "/assets"
OAUTH2_REDIRECT_URL = DOCS_URL + "/oauth2-redirect"
START_SCRIPT = "openkb-swagger-start.js"
# name -> media type: the files of the package the two pages load, and nothing else
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
    "favicon-16x16.png": "image/png",
    "oauth2-redirect.js": "text/javascript",  # the OAuth2 redirect page's script
}
CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    )
)
PAGE_HEADERS = {**SECURITY_HEADERS, "Content-Security-Policy": CSP, "Cache-Control": "no-cache"}
ASSET_HEADERS = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=3600"}
# What FastAPI's page runs inline, as a file (CSP script-src 'self'); the URLs come from the page.
START_JS = """"use strict";
(function () {
  var el = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: el.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    oauth2RedirectUrl: window.location.origin + el.dataset.oauth2RedirectUrl,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
})();
"""


def _e(value: str) -> str:
    return html.escape(value, quote=True)


def docs_page(title: str, openapi_url: str, assets: str, oauth2_redirect_url: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">'
        f"<title>{_e(title)}</title>"
        f'<link rel="stylesheet" href="{_e(assets)}/swagger-ui.css">'
        f'<link rel="icon" type="image/png" href="{_e(assets)}/favicon-32x32.png">'
        f'</head><body><div id="swagger-ui" data-openapi-url="{_e(openapi_url)}" '
        f'data-oauth2-redirect-url="{_e(oauth2_redirect_url)}"></div>'
        f'<script src="{_e(assets)}/swagger-ui-bundle.js"></script>'
        f'<script src="{_e(assets)}/{START_SCRIPT}"></script></body></html>'
    )


def install(app: FastAPI) -> None:
    """Serve the pages and their assets; create_app must pass ``docs_url=None`` (FastAPI's own page)."""
    folder = Path(swagger_ui_path)

    @app.get(ASSETS_URL + "/{name}", include_in_schema=False)
    def swagger_ui_asset(name: str) -> Response:
        """One file of :data:`ASSETS` (or the start-up script); anything else is NOT_FOUND."""
        if name == START_SCRIPT:
            return Response(START_JS, media_type="text/javascript", headers=ASSET_HEADERS)
        media = ASSETS.get(name)
        if media is None or not (folder / name).is_file():
            raise NotFound("no such file of the API docs page")
        return FileResponse(folder / name, media_type=media, headers=ASSET_HEADERS)

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        body = docs_page(
            f"{app.title} API",
            root + (app.openapi_url or "/api/openapi.json"),
            root + ASSETS_URL,
            root + OAUTH2_REDIRECT_URL,
        )
        return HTMLResponse(body, headers=PAGE_HEADERS)

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect(request: Request) -> HTMLResponse:
        """Swagger UI's OAuth2 redirect page, its script a file of the package (no inline script)."""
        assets = request.scope.get("root_path", "").rstrip("/") + ASSETS_URL
        body = (
            '<!doctype html><html lang="en-US"><head><meta charset="utf-8">'
            "<title>Swagger UI: OAuth2 Redirect</title></head><body>"
            f'<script src="{_e(assets)}/oauth2-redirect.js"></script></body></html>'
        )
        return HTMLResponse(body, headers=PAGE_HEADERS)
