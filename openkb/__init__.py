"""OpenKB domain package.

Everything that decides something lives here: models, the permission service, Markdown
dialect, indexing and retrieval, storage. The adapters (``cli``, ``server``, ``workers``)
parse input, call these services and render the result; this package never imports them,
nor FastAPI, Typer or huey.
"""

__version__ = "0.1.0"
