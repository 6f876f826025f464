"""``/api/docs``: Swagger UI served by the appliance itself, from an installed package.

FastAPI's built-in page loads Swagger UI's script and stylesheet from a public CDN and its
favicon from fastapi.tiangolo.com, so on an appliance without internet access the page stayed
blank. Here the assets come from the ``swagger-ui-bundle-v2`` package (Swagger UI 5, which reads
the OpenAPI 3.1 document FastAPI writes; the older ``swagger-ui-bundle`` ships Swagger UI 4 and
can't) under ``/api/docs/assets/``, and every URL the page names is same-origin (docs/api.md).

Trap: Swagger UI shows a validator badge that fetches ``validator.swagger.io`` for any document
not served from localhost; ``validatorUrl: null`` turns that off. ReDoc stays disabled
(``redoc_url=None``): it would need its own bundle and fonts from a CDN.
``tests/api/test_docs_offline.py`` fails on any absolute URL of another origin in what the
app serves as HTML.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

DOCS_URL = "/api/docs"
ASSETS_URL = DOCS_URL + "/assets"
OAUTH2_REDIRECT_URL = DOCS_URL + "/oauth2-redirect"


def install(app: FastAPI) -> None:
    """Serve the page and its assets; create_app must pass ``docs_url=None`` (FastAPI's own page)."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        assets = root + ASSETS_URL
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/api/openapi.json"),
            title=f"{app.title} API",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon-32x32.png",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
