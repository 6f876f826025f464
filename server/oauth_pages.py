"""The OAuth authorize pages (sign in, consent, error): server-rendered HTML, no script, no
external URL (docs/oauth.md#the-authorize-page).

Every value is HTML-escaped; the only style is inline with a per-response nonce, and the
Content-Security-Policy (``csp``) allows nothing else. Trap: ``form-action`` also governs the
redirect that follows a form POST, so the consent page must allow the client's redirect
origin (or its private scheme, ``cursor:``), or the browser blocks the final hop.
"""

from __future__ import annotations

import html
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

from fastapi.responses import HTMLResponse

SCOPE_WORDS = {
    "kb:read": "See the workspaces, knowledge bases and document lists you can see",
    "kb:search": "Search the documents you can read",
    "doc:read": "Read the documents you can read",
    "doc:write": "Create and change documents where you may edit",
    "facts:read": "Read the facts about you and the people you know, and look up your contacts",
}

_STYLE = """
body{font-family:system-ui,sans-serif;background:#f6f7f9;color:#1f2328;margin:0}
main{max-width:28rem;margin:8vh auto;background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:2rem}
h1{font-size:1.25rem;margin-top:0}label{display:block;margin:.75rem 0 .25rem}
input[type=email],input[type=password]{width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem}
button{padding:.5rem 1rem;font-size:1rem;margin-top:1rem;margin-right:.5rem;cursor:pointer}
.err{color:#b42318;background:#fef3f2;padding:.5rem;border-radius:4px}.muted{color:#57606a;font-size:.9rem}
ul{padding-left:1.2rem}code{word-break:break-all}
"""


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def redirect_source(redirect_uri: str) -> str:
    """The CSP source that lets the consent form's redirect reach ``redirect_uri``."""
    parts = urlsplit(redirect_uri)
    if parts.scheme in ("http", "https") and parts.netloc:
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}:"


def csp(nonce: str, *, redirect_to: str | None = None) -> str:
    action = "'self'" + (f" {redirect_source(redirect_to)}" if redirect_to else "")
    return (
        f"default-src 'none'; style-src 'nonce-{nonce}'; img-src 'none'; form-action {action}; "
        "frame-ancestors 'none'; base-uri 'none'"
    )


def _page(title: str, body: str, *, status: int = 200, redirect_to: str | None = None) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16)
    doc = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="referrer" content="no-referrer"><title>{e(title)} - OpenKB</title>'
        f'<style nonce="{nonce}">{_STYLE}</style></head><body><main>{body}</main></body></html>'
    )
    return HTMLResponse(
        doc,
        status_code=status,
        headers={
            "Content-Security-Policy": csp(nonce, redirect_to=redirect_to),
            "X-Frame-Options": "DENY",
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
        },
    )


def _hidden(params: Mapping[str, str]) -> str:
    return "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in params.items())


def login_page(
    params: Mapping[str, str],
    *,
    client_name: str,
    csrf: str,
    redirect_uri: str,
    error: str | None = None,
    email: str = "",
    status: int = 200,
) -> HTMLResponse:
    """The sign-in form. Its CSP allows the redirect too: with consent remembered, signing in
    answers with the redirect to the client straight away."""
    err = f'<p class="err" role="alert">{e(error)}</p>' if error else ""
    body = (
        f'<h1>Sign in to OpenKB</h1><p class="muted">{e(client_name)} wants to connect to your '
        f"knowledge base. Sign in first.</p>{err}"
        f'<form method="post" action="/oauth/authorize">{_hidden(params)}'
        f'<input type="hidden" name="action" value="login"><input type="hidden" name="csrf_token" '
        f'value="{e(csrf)}"><label for="email">Email</label><input id="email" type="email" name="email" '
        f'value="{e(email)}" autocomplete="username" required><label for="password">Password</label>'
        f'<input id="password" type="password" name="password" autocomplete="current-password" required>'
        f'<button type="submit">Sign in</button></form>'
    )
    return _page("Sign in", body, status=status, redirect_to=redirect_uri)


def consent_page(
    params: Mapping[str, str],
    *,
    client_name: str,
    client_id: str,
    redirect_uri: str,
    scopes: list[str],
    user_email: str,
    csrf: str,
) -> HTMLResponse:
    parts = urlsplit(redirect_uri)
    host = parts.netloc or f"{parts.scheme}:"
    items = "".join(f"<li><code>{e(s)}</code>: {e(SCOPE_WORDS.get(s, s))}</li>" for s in scopes)
    body = (
        f"<h1>Authorize {e(client_name)}</h1>"
        f"<p><strong>{e(client_name)}</strong> wants to act as <strong>{e(user_email)}</strong> in OpenKB. "
        f"It will only see what you can see.</p><p>It asks to:</p><ul>{items}</ul>"
        f'<p class="muted">After you answer you are sent to <code>{e(host)}</code>.<br>'
        f"Client: <code>{e(client_id)}</code></p>"
        f'<form method="post" action="/oauth/authorize">{_hidden(params)}'
        f'<input type="hidden" name="csrf_token" value="{e(csrf)}">'
        f'<button type="submit" name="action" value="allow">Allow</button>'
        f'<button type="submit" name="action" value="deny">Deny</button></form>'
        f'<p class="muted">You can revoke this at any time (Settings, Connected applications).</p>'
    )
    return _page("Authorize", body, redirect_to=redirect_uri)


def error_page(
    message: str,
    *,
    status: int = 400,
    continue_to: str | None = None,
    title: str = "This authorization request cannot be completed",
) -> HTMLResponse:
    """The server's own page for a request that is not redirected. ``continue_to``: the
    client's redirect URI with the error, offered as a link only (RFC 9700 §4.11.2): the server
    does not trust that URI enough to send the browser there by itself (``grants.redirect_trusted``),
    so the user sees where it leads and decides."""
    if continue_to:
        parts = urlsplit(continue_to)
        host = parts.netloc or f"{parts.scheme}:"
        after = (
            f'<p class="muted">The application asked to be told at <code>{e(host)}</code>. Go there only if you '
            f'started this connection yourself:</p><p><a href="{e(continue_to)}" rel="noreferrer noopener">'
            f"Continue to {e(host)}</a></p>"
        )
    else:
        after = '<p class="muted">Return to the application and try connecting again.</p>'
    body = f'<h1>{e(title)}</h1><p class="err">{e(message)}</p>{after}'
    return _page("Authorization error", body, status=status)
