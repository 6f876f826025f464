"""How a CLI command gets at the appliance: borrow a live ``openkb up``'s embedded services
(found through the home's run files) or start its own for the duration of the command."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts (``openkb --help``)
    from sqlmodel import Session

    from openkb.config import Settings
    from openkb.context import AppContext


@contextlib.contextmanager
def appliance(
    components: tuple[str, ...] | None = None, settings: Settings | None = None, migrate: bool = True
) -> Iterator[AppContext]:
    """The appliance's services for one command (all of them unless ``components`` names some).

    The imports are here, not at the top: every command module imports this one, and the models
    and services behind it took ~1 s of the CLI's start, paid by ``--help`` and by every command."""
    from openkb.config import get_settings
    from openkb.context import AppContext
    from openkb.jobs import set_queue
    from openkb.runtime.embedded import COMPONENTS, EmbeddedServices

    components = COMPONENTS if components is None else components
    settings = settings or get_settings()
    svc = EmbeddedServices(settings, components)
    endpoints = svc.start()
    try:
        if migrate and "postgresql" in components:
            from openkb.migrate import upgrade_if_behind

            upgrade_if_behind(endpoints.database_url)
        ctx = AppContext.build(settings, endpoints)
        from workers.queue import HueyQueue

        set_queue(HueyQueue())
        try:
            yield ctx
        finally:
            ctx.close()
    finally:
        from openkb.db import dispose_engines

        dispose_engines()
        svc.stop()


@contextlib.contextmanager
def unit_of_work(ctx: AppContext) -> Iterator[Session]:
    from openkb.audit import set_origin
    from openkb.db import session_scope

    with session_scope(ctx.engine) as s:
        set_origin(s, via="cli")  # every audit row the command's services write says so
        yield s
