"""Typer adapter: the ``openkb`` command."""
