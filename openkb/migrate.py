"""Run the Alembic migrations shipped in the ``migrations`` package.

The path is resolved from the installed package, so ``openkb migrate`` works from any cwd.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.exc import OperationalError, ProgrammingError

from openkb.db import get_engine, normalize_url
from openkb.errors import ServiceUnavailable

if TYPE_CHECKING:
    from alembic.config import Config

#: the newest migration under migrations/versions (tests/test_migrate_head.py keeps it in step):
#: a database already there needs no Alembic at all (``upgrade_if_behind``)
HEAD = "0016"


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    import migrations

    here = Path(migrations.__file__).parent
    cfg = Config(str(here / "alembic.ini"))
    cfg.set_main_option("script_location", str(here))
    cfg.set_main_option("sqlalchemy.url", normalize_url(database_url).replace("%", "%%"))
    return cfg


def _unreachable(exc: OperationalError) -> ServiceUnavailable:
    """The driver's first line only: its hint on the next lines ("Is the server running...")
    would break the one line the CLI prints."""
    first = str(exc.orig or exc).strip().splitlines()[0]
    return ServiceUnavailable(f"PostgreSQL is unreachable at DATABASE_URL: {first}")


def upgrade(database_url: str, revision: str = "head") -> None:
    from alembic import command

    try:
        command.upgrade(alembic_config(database_url), revision)
    except OperationalError as exc:
        raise _unreachable(exc) from None


def upgrade_if_behind(database_url: str) -> bool:
    """``upgrade`` unless the database is at ``HEAD`` already; True when it ran the migrations.

    Why: every CLI command makes sure of the schema before it runs (cli/context.py), and loading
    Alembic and its scripts to find nothing to do took ~0.5 s of each command; one query on
    ``alembic_version`` answers the usual case. Anything else (a new or older database, a
    revision this build does not know) goes through Alembic as before, which says what is wrong."""
    from sqlalchemy import text

    try:  # the process's own pool (its timeouts and hang guard): the command's next unit reuses it
        with get_engine(database_url).connect() as conn:
            current = [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))]
    except ProgrammingError:  # no alembic_version yet: a new database
        current = []
    except OperationalError as exc:
        raise _unreachable(exc) from None
    if current == [HEAD]:
        return False
    upgrade(database_url)
    return True


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
