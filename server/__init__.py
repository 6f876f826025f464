"""FastAPI adapter: REST routers, MCP, Dify ``/retrieval`` and the web UI assets."""
