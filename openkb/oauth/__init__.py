"""OpenKB's OAuth 2.1 authorization server for MCP clients (docs/oauth.md).

``clients`` registers clients (RFC 7591 and Client ID Metadata Documents), ``grants`` runs the
authorization-code flow (consent, codes, PKCE, refresh rotation, revocation), ``tokens``
verifies access tokens for the resource server (``/mcp``).
"""
