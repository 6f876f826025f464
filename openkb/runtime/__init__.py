"""Where the appliance keeps its state and how processes find the embedded services."""

import importlib
from types import ModuleType


def optional_module(name: str) -> ModuleType | None:
    """Import ``name`` if that module exists; re-raise import errors from *inside* it."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            return None
        raise
