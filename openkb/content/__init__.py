"""Content services: workspaces, knowledge bases, the document tree, documents, versions, keyed
upserts and the change log (with revert).

Adapters (REST routes, MCP tools, import jobs, CLI) call these with a ``Session`` they own and
an :class:`~openkb.content.actor.Actor` (principal + run id) for writes. Services never commit;
index jobs are enqueued after commit. Every read and write decision is the permission
service's (``openkb.permissions``).
"""

from openkb.content.actor import Actor, parse_run_id

__all__ = ["Actor", "parse_run_id"]
