"""How OpenKB starts a module of its own in a child Python (no imports beyond the standard
library: the import workers use it too, and each of them pays for what it imports at start)."""

from __future__ import annotations

import sys

__all__ = ["module_command"]


def module_command(module: str, *args: str) -> list[str]:
    """The command that runs one of OpenKB's modules in a child Python: ``python -P -m module``.

    ``-P`` because ``-m`` otherwise puts the working directory first on ``sys.path``: started in
    a folder that holds a ``server/``, ``cli/`` or ``openkb/`` of its own (a checkout of another
    project, a scratch folder), the child imported that instead of the installed OpenKB and the
    appliance crash-looped at start."""
    return [sys.executable, "-P", "-m", module, *args]
