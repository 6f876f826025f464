"""Who is calling ``/mcp``: a bearer token resolved to a user-bound principal (docs/mcp.md#tokens).

Two credentials reach the MCP endpoint, both bound to one real user in one tenant (never an
instance-wide key, docs/accounts.md#personal-access-tokens):

* ``kbpat_...`` personal access tokens, through the same ``resolve_pat`` + ``principal_for``
  as REST (``server/auth.py``), so a token sees through MCP exactly what it sees over REST;
* OAuth access tokens minted by OpenKB's authorization server (``openkb.oauth``), refused
  unless they were minted for this resource (RFC 8707).

Both are re-read from PostgreSQL on every HTTP request: revoking the token or grant, or
suspending the user, stops the next call. Trap: never cache a positive answer in process
memory; another API replica may have just revoked it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from sqlmodel import Session

from openkb.accounts.tokens import looks_like_pat, principal_for, resolve_pat
from openkb.errors import InsufficientScope, Unauthenticated
from openkb.oauth.tokens import verify_access_token
from openkb.permissions.principal import Principal

# What a client may ask for (the challenge's ``scope``); ``doc:write`` is never granted by default.
READ_SCOPES = ("kb:read", "kb:search", "doc:read")
# The scope each tool needs (docs/mcp.md#tools). A tool whose scope the token lacks is not
# listed, and calling it answers 403 ``insufficient_scope`` (so a client can step up).
TOOL_SCOPES = {
    "kb_search": "kb:search",
    "kb_get_document": "doc:read",
    "kb_get_document_markdown": "doc:read",
    "kb_get_toc": "doc:read",
    "kb_get_document_changes": "doc:read",
    "kb_list_workspaces": "kb:read",
    "kb_list_knowledge_bases": "kb:read",
    "kb_list_documents": "kb:read",
    "kb_list_shared_documents": "kb:read",
    "kb_upsert_document": "doc:write",
    # the user's facts and entities (docs/facts.md#mcp): never a default scope
    "kb_facts_lookup": "facts:read",
    "kb_entities_resolve": "facts:read",
}
# Resource URI prefixes and the scope reading them needs.
RESOURCE_SCOPES = (("kb://document/", "doc:read"), ("kb://knowledge-base/", "kb:read"), ("kb://workspace/", "kb:read"))


@dataclass(frozen=True)
class McpCaller:
    """The principal of one MCP request and the client it came through (for the audit log)."""

    principal: Principal
    credential: Literal["pat", "oauth"]
    credential_id: uuid.UUID  # the PAT row, or the OAuth grant
    client_id: str  # OAuth client_id; ``pat:<token id>`` for a personal token
    client_name: str = ""

    @property
    def scopes(self) -> frozenset[str]:
        return self.principal.scopes or frozenset()

    def may(self, scope: str) -> bool:
        return scope in self.scopes

    def require(self, scope: str) -> None:
        if not self.may(scope):
            raise InsufficientScope(f"token lacks scope {scope}", required=[scope], missing=[scope])


def verify_bearer(session: Session, token: str, *, resource: str) -> McpCaller:
    """The caller behind ``token`` or ``Unauthenticated`` (unknown, expired, revoked, disabled
    user, OAuth token minted for another resource). One indexed statement either way."""
    if looks_like_pat(token):
        resolved = resolve_pat(session, token)
        if resolved is None:
            raise Unauthenticated("the access token is invalid, expired or revoked")
        return McpCaller(principal_for(resolved), "pat", resolved.row.id, f"pat:{resolved.row.id}", resolved.row.name)
    grant = verify_access_token(session, token, resource=resource)
    return McpCaller(grant.principal(), "oauth", grant.grant_id, grant.client_id, grant.client_name)


def scope_for_resource(uri: str) -> str | None:
    for prefix, scope in RESOURCE_SCOPES:
        if uri.startswith(prefix):
            return scope
    return None


def has_any_mcp_scope(scopes: frozenset[str]) -> bool:
    return bool(scopes & set(TOOL_SCOPES.values()))
