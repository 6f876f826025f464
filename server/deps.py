"""Request-scoped dependencies: the app context and one unit of work per request.

The session commits when the route function returns — before the response is sent
(``scope="function"``) — so a client never reads a response for a write that isn't visible yet,
and after-commit hooks (job enqueue) fire exactly once per successful request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session

from openkb.audit import set_origin
from openkb.context import AppContext
from openkb.db import session_scope


def get_ctx(request: Request) -> AppContext:
    return request.app.state.ctx  # type: ignore[no-any-return]


CtxDep = Annotated[AppContext, Depends(get_ctx)]


def get_session(request: Request) -> Iterator[Session]:
    ctx: AppContext = request.app.state.ctx
    with session_scope(ctx.engine) as session:
        session.info["request"] = request
        ua = request.headers.get("user-agent")
        # Every audit row of this request carries the caller's address (openkb.audit).
        set_origin(session, ip=request.client.host if request.client else None, user_agent=ua[:500] if ua else None)
        yield session


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
