"""The MCP tools and resources as domain services (docs/mcp.md).

``caller`` turns a bearer token into a user-bound principal, ``tools`` and ``resources`` are the
services (``(session, caller, args) -> dict``), ``pages`` the opaque cursors, ``audit`` the one
row per call. The SDK wiring (transport, JSON schemas, 401/403 challenges) lives in
``server/mcp``; nothing here imports the SDK.
"""
