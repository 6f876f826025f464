"""OAuth 2.1 authorization server for MCP clients, and the protected-resource metadata of /mcp
(docs/oauth.md).

* ``/.well-known/oauth-protected-resource[/mcp]`` (RFC 9728) and
  ``/.well-known/oauth-authorization-server`` (RFC 8414): ``issuer`` is ``APP_BASE_URL``
  exactly (plain strings: a trailing slash breaks clients' issuer check).
* ``/oauth/register`` (RFC 7591), ``/oauth/authorize`` (sign in + consent pages),
  ``/oauth/token`` (code + PKCE, refresh rotation), ``/oauth/revoke`` (RFC 7009).
* ``/api/me/oauth-grants``: the user's connected applications, revocable.

The OAuth endpoints answer errors in OAuth's wire shape (``{"error": "invalid_grant",
"error_description": ...}``), not OpenKB's. The authorize endpoint shows an error page when the
client or redirect URI is unknown; for a known client it redirects with the error (RFC 6749
§4.1.2.1) only when it trusts the redirect URI (``grants.redirect_trusted``: RFC 9700 §4.11.2,
since anyone may register any URI), else its page offers a link; Deny likewise. Token, registration, revocation and metadata answers carry CORS headers (browser
clients) and ``Cache-Control: no-store``. Forms are parsed by hand (urlencoded only):
duplicate parameters are refused, as RFC 6749 §3.1 requires.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from fastapi import APIRouter, FastAPI, Request, Response, status
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel
from sqlmodel import Session

from openkb import ratelimit
from openkb.accounts import sessions
from openkb.accounts.sessions import resolve_session
from openkb.apps import oauth as app_oauth
from openkb.context import AppContext
from openkb.errors import NotFound, OAuthProtocolError, OpenKBError, RateLimited, Unauthenticated
from openkb.models import McpOAuthClient
from openkb.oauth import clients, grants
from openkb.oauth.tokens import canonical_resource
from openkb.permissions.principal import Principal
from server import oauth_pages
from server.auth import SESSION_COOKIE, UserDep, client_ip, default_tenant_id, user_agent
from server.deps import CtxDep, SessionDep
from server.errors import errors_for

router = APIRouter(tags=["oauth"])

LOGIN_CSRF_COOKIE = "openkb_oauth_csrf"
MAX_FORM_BYTES = 64 * 1024
REGISTER_LIMIT_PER_IP = 30  # registrations per minute per address (DCR is unauthenticated)
AUTHORIZE_PARAMS = (
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "resource",
)
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Max-Age": "600",
}
CORS_PATHS = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource/api/apps/v1",
    "/.well-known/oauth-authorization-server",
    "/oauth/token",
    "/oauth/register",
    "/oauth/revoke",
)


def base_url(ctx: AppContext) -> str:
    return ctx.settings.app_base_url.strip().rstrip("/")


def resource_url(ctx: AppContext) -> str:
    """The canonical URL of the protected resource: ``<APP_BASE_URL>/mcp``."""
    return base_url(ctx) + "/mcp"


def production(ctx: AppContext) -> bool:
    return ctx.settings.openkb_env == "production"


def _json(body: Any, status_code: int = 200) -> JSONResponse:
    return JSONResponse(
        body, status_code=status_code, headers={**CORS_HEADERS, "Cache-Control": "no-store", "Pragma": "no-cache"}
    )


def install(app: FastAPI) -> None:
    """OAuth errors in OAuth's shape on the OAuth endpoints (the unit of work rolls back first)."""

    @app.exception_handler(OAuthProtocolError)
    async def _oauth_error(request: Request, exc: OAuthProtocolError) -> JSONResponse:
        resp = _json(exc.to_oauth(), exc.http_status)
        if exc.http_status == 401:  # RFC 6749 §5.2: invalid_client names the scheme to authenticate with
            resp.headers["WWW-Authenticate"] = 'Basic realm="OpenKB OAuth"'
        return resp


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body as a dict; repeated parameters are refused."""
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise OAuthProtocolError("invalid_request", "send the parameters as application/x-www-form-urlencoded")
    raw = await request.body()
    if len(raw) > MAX_FORM_BYTES:
        raise OAuthProtocolError("invalid_request", "request body is too large")
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise OAuthProtocolError("invalid_request", "the form body is not valid UTF-8 form encoding") from None
    out: dict[str, str] = {}
    for k, v in pairs:
        if k in out:
            raise OAuthProtocolError("invalid_request", f"parameter {k} is repeated")
        if "\x00" in v:
            raise OAuthProtocolError("invalid_request", f"parameter {k} contains a NUL character")
        out[k] = v
    return out


def _client_credentials(form: dict[str, str], request: Request) -> tuple[str | None, str | None]:
    """``(client_id, client_secret)`` from HTTP Basic (RFC 6749 §2.3.1: both form-urlencoded
    inside) or from the form (public clients send only ``client_id``)."""
    h = request.headers.get("authorization", "")
    if h.lower().startswith("basic "):
        try:
            user, _, password = base64.b64decode(h[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            raise OAuthProtocolError("invalid_client", "malformed HTTP Basic credentials", status=401) from None
        return unquote(user) or None, unquote(password) or None
    return form.get("client_id") or None, form.get("client_secret") or None


# --- metadata (RFC 9728, RFC 8414) -----------------------------------------------------------------

ERRORS = errors_for(OAuthProtocolError)


def protected_resource_metadata(ctx: AppContext) -> dict[str, Any]:
    return {
        "resource": resource_url(ctx),
        "authorization_servers": [base_url(ctx)],
        "scopes_supported": list(clients.SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "OpenKB",
        "resource_documentation": base_url(ctx) + "/api/docs",
    }


@router.get("/.well-known/oauth-protected-resource")
@router.get("/.well-known/oauth-protected-resource/mcp")
def oauth_protected_resource(ctx: CtxDep) -> JSONResponse:
    """RFC 9728 metadata of the MCP endpoint (the ``resource_metadata`` of /mcp's 401 challenge)."""
    return _json(protected_resource_metadata(ctx))


@router.get("/.well-known/oauth-protected-resource/api/apps/v1")
def oauth_protected_resource_apps(ctx: CtxDep) -> JSONResponse:
    """RFC 9728 metadata of the apps API: an app installation's client asks for this resource
    with scope ``apps`` (docs/apps.md#oauth)."""
    return _json(
        {
            **protected_resource_metadata(ctx),
            "resource": app_oauth.apps_resource(base_url(ctx)),
            "scopes_supported": [grants.APPS_SCOPE],
            "resource_documentation": base_url(ctx) + "/api/docs",
        }
    )


@router.get("/.well-known/oauth-authorization-server")
def oauth_authorization_server(ctx: CtxDep) -> JSONResponse:
    """RFC 8414 metadata; ``issuer`` equals ``APP_BASE_URL`` (RFC 8414 §3.3)."""
    base = base_url(ctx)
    return _json(
        {
            "issuer": base,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/oauth/token",
            "registration_endpoint": f"{base}/oauth/register",
            "revocation_endpoint": f"{base}/oauth/revoke",
            "scopes_supported": list(clients.SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": list(clients.AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(clients.AUTH_METHODS),
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": True,
            "authorization_response_iss_parameter_supported": True,
        }
    )


def _preflight() -> Response:
    return Response(status_code=status.HTTP_204_NO_CONTENT, headers=CORS_HEADERS)


for _path in CORS_PATHS:
    router.add_api_route(_path, _preflight, methods=["OPTIONS"], include_in_schema=False)


# --- registration (RFC 7591) -----------------------------------------------------------------------


@router.post("/oauth/register", status_code=201, responses=errors_for(ERRORS, RateLimited))
async def oauth_register(request: Request, session: SessionDep) -> JSONResponse:
    """Register a client (JSON body per RFC 7591): public (PKCE) unless it asks for
    ``client_secret_basic``/``client_secret_post``. Any redirect URI real clients use is accepted:
    https, loopback http (any port at authorize time), private schemes (``cursor://``)."""
    ip = client_ip(request)
    if ip:
        ratelimit.enforce(session, f"oauth:register:{ip}", REGISTER_LIMIT_PER_IP, 60)
    raw = await request.body()
    if len(raw) > MAX_FORM_BYTES:
        raise OAuthProtocolError("invalid_client_metadata", "registration body is too large")
    try:
        meta = json.loads(raw or b"null")
    except ValueError:
        raise OAuthProtocolError("invalid_client_metadata", "the body must be JSON") from None
    row, secret = clients.register_client(session, meta, tenant_id=default_tenant_id(session))
    return _json(clients.registration_response(row, secret), 201)


# --- authorize -----------------------------------------------------------------------------------


class _PageError(Exception):
    """The client or redirect URI can't be trusted: show the error, never redirect."""


def _validate(session: Session, ctx: AppContext, params: dict[str, str]) -> tuple[McpOAuthClient, str]:
    """Client and redirect URI first (errors here are pages); the caller then checks the rest
    (errors there are redirects)."""
    try:
        client = clients.resolve_client(
            session, params.get("client_id"), tenant_id=default_tenant_id(session), production=production(ctx)
        )
    except OAuthProtocolError as exc:
        raise _PageError(exc.detail) from None
    redirect_uri = params.get("redirect_uri") or ""
    if not redirect_uri:
        if len(client.redirect_uris) != 1:
            raise _PageError("redirect_uri is required")
        redirect_uri = client.redirect_uris[0]
    if not clients.redirect_uri_allowed(list(client.redirect_uris), redirect_uri):
        raise _PageError(f"redirect_uri {redirect_uri[:200]} is not registered for this client")
    return client, redirect_uri


def _check_rest(ctx: AppContext, client: McpOAuthClient, params: dict[str, str]) -> tuple[list[str], str, str]:
    if params.get("response_type") != "code":
        raise OAuthProtocolError("unsupported_response_type", "response_type must be code")
    challenge = grants.check_code_challenge(params.get("code_challenge"), params.get("code_challenge_method"))
    if client.installation_id is not None:  # an app installation's client: the apps API only (docs/apps.md#oauth)
        resource = grants.check_resource(params.get("resource"), app_oauth.apps_resource(base_url(ctx)))
        return grants.check_scopes_for(client, params.get("scope")) or [], challenge, resource
    resource = grants.check_resource(params.get("resource"), resource_url(ctx))
    scopes = clients.parse_scopes(params.get("scope"))
    outside = sorted(set(scopes) - set(client.allowed_scopes))
    if outside:
        raise OAuthProtocolError("invalid_scope", f"this client may not ask for {' '.join(outside)}")
    return scopes, challenge, resource


def _redirect_url(ctx: AppContext, redirect_uri: str, params: dict[str, str], **extra: str) -> str:
    query = {**extra}
    if params.get("state"):
        query["state"] = params["state"]
    query["iss"] = base_url(ctx)
    sep = "&" if urlsplit(redirect_uri).query else "?"
    return redirect_uri + sep + urlencode(query)


def _redirect(
    ctx: AppContext, redirect_uri: str, params: dict[str, str], status_code: int = 302, **extra: str
) -> Response:
    return RedirectResponse(
        _redirect_url(ctx, redirect_uri, params, **extra),
        status_code=status_code,
        headers={"Cache-Control": "no-store"},
    )


def _send_back(
    session: Session,
    ctx: AppContext,
    client: McpOAuthClient,
    redirect_uri: str,
    params: dict[str, str],
    principal: Principal | None,
    *,
    error: str,
    error_description: str,
    status_code: int = 302,
    page_status: int = 400,
    title: str | None = None,
) -> Response:
    """An error (or a denial) for the client: redirected only when the server trusts the
    redirect URI (``grants.redirect_trusted``), else the server's page with a link to it."""
    if grants.redirect_trusted(session, client, redirect_uri, principal):
        return _redirect(ctx, redirect_uri, params, status_code, error=error, error_description=error_description)
    link = _redirect_url(ctx, redirect_uri, params, error=error, error_description=error_description)
    extra = {"title": title} if title else {}
    return oauth_pages.error_page(error_description, status=page_status, continue_to=link, **extra)


def _signed_in(session: Session, request: Request) -> tuple[Principal, Any] | None:
    cookie = request.cookies.get(SESSION_COOKIE)
    live = resolve_session(session, cookie) if cookie else None
    if live is None:
        return None
    return Principal.user(live.user, live.row.tenant_id), live


def _cookie_secure(ctx: AppContext) -> bool:
    return base_url(ctx).lower().startswith("https://")


def _login(
    params: dict[str, str],
    client: McpOAuthClient,
    redirect_uri: str,
    request: Request,
    ctx: AppContext,
    *,
    error: str | None = None,
    email: str = "",
    status_code: int = 200,
) -> Response:
    token = request.cookies.get(LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(32)
    resp = oauth_pages.login_page(
        params,
        client_name=client.client_name,
        csrf=token,
        redirect_uri=redirect_uri,
        error=error,
        email=email,
        status=status_code,
    )
    resp.set_cookie(
        LOGIN_CSRF_COOKIE, token, path="/oauth", httponly=True, samesite="lax", secure=_cookie_secure(ctx), max_age=3600
    )
    return resp


def _not_the_installation_user(session: Session, client: McpOAuthClient, principal: Principal) -> Response | None:
    """An app installation's client may be authorized by that installation's user only: an
    error page (never a redirect with a code) for anyone else."""
    try:
        grants.check_installation_user(session, client, principal)
    except OAuthProtocolError as exc:
        return oauth_pages.error_page(exc.detail, status=403)
    return None


def _proceed(
    session: Session,
    ctx: AppContext,
    principal: Principal,
    live: Any,
    client: McpOAuthClient,
    redirect_uri: str,
    params: dict[str, str],
    scopes: list[str],
    challenge: str,
    resource: str,
    status_code: int,
) -> Response:
    """Signed in: redirect with a code if consent is remembered, else show the consent page."""
    refused = _not_the_installation_user(session, client, principal)
    if refused is not None:
        return refused
    grant = grants.remembered_grant(session, principal, client, scopes)
    if grant is not None:
        c = grants.issue_code(
            session, grant, redirect_uri=redirect_uri, scopes=scopes, code_challenge=challenge, resource=resource
        )
        return _redirect(ctx, redirect_uri, params, status_code, code=c)
    shown = {k: params[k] for k in AUTHORIZE_PARAMS if params.get(k)}
    shown["redirect_uri"] = redirect_uri
    return oauth_pages.consent_page(
        shown,
        client_name=client.client_name,
        client_id=client.client_id,
        redirect_uri=redirect_uri,
        scopes=scopes,
        user_email=live.user.email,
        csrf=live.row.csrf_token,
    )


def _authorize(
    session: Session, ctx: AppContext, request: Request, params: dict[str, str], form: dict[str, str] | None
) -> Response:
    try:
        client, redirect_uri = _validate(session, ctx, params)
    except _PageError as exc:
        return oauth_pages.error_page(str(exc))
    signed = _signed_in(session, request)
    try:
        scopes, challenge, resource = _check_rest(ctx, client, params)
    except OAuthProtocolError as exc:
        return _send_back(
            session,
            ctx,
            client,
            redirect_uri,
            params,
            signed[0] if signed else None,
            error=exc.oauth_error,
            error_description=exc.detail,
        )
    carried = {k: params[k] for k in AUTHORIZE_PARAMS if params.get(k)}
    action = (form or {}).get("action")
    if form is not None and action == "login":
        sent = form.get("csrf_token", "")
        cookie = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        if not cookie or not secrets.compare_digest(sent.encode(), cookie.encode()):
            return _login(
                carried, client, redirect_uri, request, ctx, error="The form expired; sign in again.", status_code=403
            )
        try:
            r = sessions.login(
                session,
                ctx,
                email=form.get("email", ""),
                password=form.get("password", ""),
                ip=client_ip(request),
                user_agent=user_agent(request),
            )
        except OpenKBError as exc:
            return _login(
                carried,
                client,
                redirect_uri,
                request,
                ctx,
                error=exc.detail,
                email=form.get("email", "")[:300],
                status_code=exc.http_status,
            )
        principal = Principal.user(r.user, r.session.tenant_id)
        live = sessions.ResolvedSession(row=r.session, user=r.user)
        resp = _proceed(session, ctx, principal, live, client, redirect_uri, params, scopes, challenge, resource, 303)
        resp.set_cookie(
            SESSION_COOKIE,
            r.token,
            max_age=sessions.expires_in_seconds(r.session),
            path="/",
            httponly=True,
            samesite="lax",
            secure=_cookie_secure(ctx),
        )
        return resp
    if signed is None:
        return _login(carried, client, redirect_uri, request, ctx)
    principal, live = signed
    if form is not None and action in ("allow", "deny"):
        sent = form.get("csrf_token", "")
        if not secrets.compare_digest(sent.encode(), live.row.csrf_token.encode()):
            return oauth_pages.error_page("The form expired or did not come from this page; start again.", status=403)
        if action == "deny":
            return _send_back(
                session,
                ctx,
                client,
                redirect_uri,
                params,
                principal,
                error="access_denied",
                error_description="the user denied the request",
                status_code=303,
                page_status=200,
                title="You denied the request",
            )
        refused = _not_the_installation_user(session, client, principal)
        if refused is not None:
            return refused
        grant = grants.consent(session, principal, client, scopes, redirect_uri=redirect_uri)
        c = grants.issue_code(
            session, grant, redirect_uri=redirect_uri, scopes=scopes, code_challenge=challenge, resource=resource
        )
        return _redirect(ctx, redirect_uri, params, 303, code=c)
    return _proceed(session, ctx, principal, live, client, redirect_uri, params, scopes, challenge, resource, 302)


@router.get("/oauth/authorize", include_in_schema=False)
def oauth_authorize(request: Request, session: SessionDep, ctx: CtxDep) -> Response:
    """The authorization request: sign-in page, consent page, or a redirect with a code or an error."""
    params: dict[str, str] = {}
    for k, v in request.query_params.multi_items():
        if k in params:
            return oauth_pages.error_page(f"parameter {k} is repeated")
        params[k] = v
    return _authorize(session, ctx, request, params, None)


@router.post("/oauth/authorize", include_in_schema=False)
async def oauth_authorize_post(request: Request, session: SessionDep, ctx: CtxDep) -> Response:
    """The sign-in and consent forms post here (CSRF-checked), carrying the request's parameters."""
    try:
        form = await _form(request)
    except OAuthProtocolError as exc:
        return oauth_pages.error_page(exc.detail)
    params = {k: form[k] for k in AUTHORIZE_PARAMS if k in form}
    return _authorize(session, ctx, request, params, form)


# --- token and revocation ---------------------------------------------------------------------


@router.post("/oauth/token", responses=ERRORS)
async def oauth_token(request: Request, session: SessionDep, ctx: CtxDep) -> JSONResponse:
    """``authorization_code`` (with ``code_verifier``) and ``refresh_token`` (rotated) grants."""
    form = await _form(request)
    grant_type = form.get("grant_type")
    if not grant_type:
        raise OAuthProtocolError("invalid_request", "grant_type is required")
    if grant_type not in ("authorization_code", "refresh_token"):
        raise OAuthProtocolError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
    client_id = clients.authenticate_client(session, *_client_credentials(form, request)).client_id
    if grant_type == "authorization_code":
        tokens = grants.exchange_code(
            session,
            ctx.settings,
            code=form.get("code"),
            client_id=client_id,
            redirect_uri=form.get("redirect_uri"),
            code_verifier=form.get("code_verifier"),
            resource=form.get("resource"),
        )
    else:
        tokens = grants.refresh(
            session,
            ctx.settings,
            refresh_token=form.get("refresh_token"),
            client_id=client_id,
            scope=form.get("scope"),
            resource=form.get("resource"),
        )
    return _json(tokens.response())


@router.post("/oauth/revoke", responses=ERRORS)
async def oauth_revoke(request: Request, session: SessionDep) -> JSONResponse:
    """RFC 7009: 200 whether or not the token was known. A refresh token revokes its grant."""
    form = await _form(request)
    client = clients.authenticate_client(session, *_client_credentials(form, request))
    grants.revoke_token(session, token=form.get("token"), client_id=client.client_id)
    return _json({})


# --- the user's connected applications ---------------------------------------------------------


class GrantOut(BaseModel):
    id: uuid.UUID
    client_id: str
    client_name: str
    registration: str
    scopes: list[str]
    created_at: datetime
    last_used_at: datetime | None = None


class GrantList(BaseModel):
    items: list[GrantOut]


@router.get("/api/me/oauth-grants", response_model=GrantList, responses=errors_for(Unauthenticated))
def list_oauth_grants(principal: UserDep, session: SessionDep) -> GrantList:
    """The applications the caller authorized (active grants), newest first."""
    return GrantList(
        items=[
            GrantOut(
                id=g.id,
                client_id=c.client_id,
                client_name=c.client_name,
                registration=c.registration,
                scopes=list(g.scopes),
                created_at=g.created_at,
                last_used_at=g.last_used_at,
            )
            for g, c in grants.list_grants(session, principal)
        ]
    )


@router.delete(
    "/api/me/oauth-grants/{grant_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=errors_for(Unauthenticated, NotFound, 422),
)
def revoke_oauth_grant(grant_id: uuid.UUID, principal: UserDep, session: SessionDep) -> Response:
    """Revoke an authorization: its tokens fail on their next use. Another user's grant is 404."""
    grants.revoke_grant(session, principal, grant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


__all__ = ["canonical_resource", "install", "protected_resource_metadata", "resource_url", "router"]
