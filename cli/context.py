"""How a CLI command gets at the appliance: borrow a live ``openkb up``'s embedded services
(found through the home's run files) or start its own for the duration of the command."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlmodel import Session

from openkb.config import Settings, get_settings
from openkb.context import AppContext
from openkb.db import session_scope
from openkb.jobs import set_queue
from openkb.runtime.embedded import COMPONENTS, EmbeddedServices


@contextlib.contextmanager
def appliance(
    components: tuple[str, ...] = COMPONENTS, settings: Settings | None = None, migrate: bool = True
) -> Iterator[AppContext]:
    settings = settings or get_settings()
    svc = EmbeddedServices(settings, components)
    endpoints = svc.start()
    try:
        if migrate and "postgresql" in components:
            from openkb.migrate import upgrade

            upgrade(endpoints.database_url)
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

    with session_scope(ctx.engine) as s:
        set_origin(s, via="cli")  # every audit row the command's services write says so
        yield s
