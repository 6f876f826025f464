"""Alembic environment: the target is every SQLModel table in ``openkb.models``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import pool
from sqlmodel import SQLModel

import openkb.models  # noqa: F401  (registers tables)
from openkb.db import normalize_url

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=normalize_url(config.get_main_option("sqlalchemy.url")),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    from sqlalchemy import create_engine

    engine = create_engine(normalize_url(config.get_main_option("sqlalchemy.url")), poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
