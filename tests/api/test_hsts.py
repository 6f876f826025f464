"""HSTS (docs/web.md#security): with an https APP_BASE_URL every response tells the browser to
use https only; with an http one (a test, a LAN appliance without TLS) none does."""

from __future__ import annotations

HSTS = "max-age=31536000"


def test_https_base_url_sends_strict_transport_security(http, app_ctx, monkeypatch):
    monkeypatch.setattr(app_ctx.settings, "app_base_url", "https://kb.example.com")
    for path in ("/", "/healthz", "/api/docs", "/api/no-such-route", "/.well-known/oauth-authorization-server"):
        r = http.get(path)
        assert r.headers.get("strict-transport-security") == HSTS, (path, r.status_code, dict(r.headers))


def test_http_base_url_sends_no_strict_transport_security(http, app_ctx, monkeypatch):
    monkeypatch.setattr(app_ctx.settings, "app_base_url", "http://127.0.0.1:8000")
    assert "strict-transport-security" not in http.get("/api/docs").headers
