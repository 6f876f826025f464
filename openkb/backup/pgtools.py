"""Finding ``pg_dump``/``pg_restore`` that can talk to the server.

A dump needs a client whose major version is at least the server's (an older ``pg_dump``
refuses a newer server). pgserver's wheel ships PostgreSQL 16 binaries, which serve both the
embedded database and an external PostgreSQL 15/16; ``OPENKB_PG_BIN`` (a directory) or the
``PATH`` (e.g. Debian's ``postgresql-client-17``) cover a newer external server.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from openkb.errors import ConfigError


def _candidates(name: str) -> list[str]:
    out: list[str] = []
    env_dir = os.environ.get("OPENKB_PG_BIN")
    if env_dir:
        out.append(str(Path(env_dir) / name))
    # Found, not imported: importing pgserver runs platformdirs, which warns on stderr wherever
    # XDG_RUNTIME_DIR is unset (cron, sudo, containers), and a backup's output must stay its own.
    spec = importlib.util.find_spec("pgserver")
    if spec is not None and spec.submodule_search_locations:
        out.append(str(Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / name))
    found = shutil.which(name)
    if found:
        out.append(found)
    return [c for c in out if os.access(c, os.X_OK)]


def major_of(exe: str) -> int:
    text = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"(\d+)(?:\.\d+)?", text)
    return int(m.group(1)) if m else 0


def pg_tool(name: str, server_major: int) -> tuple[str, str]:
    """(path, version line) of the first ``name`` whose major version >= the server's."""
    seen: list[str] = []
    for exe in _candidates(name):
        major = major_of(exe)
        seen.append(f"{exe} ({major})")
        if major >= server_major:
            version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.strip()
            return exe, version
    raise ConfigError(
        f"no {name} of PostgreSQL {server_major} or newer found (tried: {', '.join(seen) or 'none'}); "
        f"install postgresql-client-{server_major} or set OPENKB_PG_BIN to its bin directory"
    )


def libpq_url(url: str) -> str:
    """SQLAlchemy's ``postgresql+psycopg://`` is not a libpq URI."""
    return re.sub(r"^postgresql\+\w+://", "postgresql://", url)
