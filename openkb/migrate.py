"""Run the Alembic migrations shipped in the ``migrations`` package.

The path is resolved from the installed package, so ``openkb migrate`` works from any cwd.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.exc import OperationalError

from openkb.db import normalize_url
from openkb.errors import ServiceUnavailable


def alembic_config(database_url: str) -> Config:
    import migrations

    here = Path(migrations.__file__).parent
    cfg = Config(str(here / "alembic.ini"))
    cfg.set_main_option("script_location", str(here))
    cfg.set_main_option("sqlalchemy.url", normalize_url(database_url).replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    try:
        command.upgrade(alembic_config(database_url), revision)
    except OperationalError as exc:
        raise ServiceUnavailable(f"PostgreSQL is unreachable at DATABASE_URL: {exc.orig}") from None


def current_revision(database_url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine

    eng = create_engine(normalize_url(database_url))
    try:
        with eng.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        eng.dispose()


@lru_cache(maxsize=1)
def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("postgresql://x@localhost/x")).get_current_head()
