"""Alembic migrations (the only way the schema is built, tests included)."""
