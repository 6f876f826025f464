"""Errors of the content services that more than one of them raises.

They live here, at the bottom of ``openkb.content``'s import graph, so that the modules a revert
drives (``workspaces``, ``knowledge_bases``, ``documents``) can raise them without importing
``revert`` (which imports them): the content modules' imports run one way only
(tests/content/test_import_graph.py).
"""

from __future__ import annotations

from openkb.errors import Conflict, ValidationError


class RevertConflict(Conflict):
    """A revert would silently overwrite a newer write, or cannot remove a non-empty object."""

    code = "REVERT_CONFLICT"


class NotRevertible(ValidationError):
    code = "NOT_REVERTIBLE"
