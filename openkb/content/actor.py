"""Who writes, under which run: the one argument every content write takes.

A *run* groups the writes that belong together (one HTTP request, one import, one nightly sync)
so they can be listed and reverted together. The caller may name it; otherwise each request gets
a fresh one. Run names that are not UUIDs are mapped to a UUID deterministically per tenant
(``nightly-2026-09-29`` is the same run every time it is sent), because ``changes.run_id`` is a
UUID column.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from openkb.errors import Unauthenticated, ValidationError
from openkb.permissions import Principal

RUN_NAMESPACE = uuid.UUID("5b0f4f0e-7d43-4f59-9a8a-1b0c6f3e9d21")
MAX_RUN_NAME = 200


def parse_run_id(tenant_id: uuid.UUID | None, value: str | uuid.UUID | None) -> uuid.UUID | None:
    """A caller-given run id: a UUID as is, any other short name hashed per tenant."""
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        return value
    v = value.strip()
    if not v:
        return None
    if len(v) > MAX_RUN_NAME or "\x00" in v:
        raise ValidationError(f"run id must be a UUID or a name of at most {MAX_RUN_NAME} characters", field="run_id")
    try:
        return uuid.UUID(v)
    except ValueError:
        return uuid.uuid5(RUN_NAMESPACE, f"{tenant_id}:{v}")


@dataclass(frozen=True)
class Actor:
    principal: Principal
    run_id: uuid.UUID = field(default_factory=uuid.uuid4)
    ip: str | None = None
    user_agent: str | None = None
    # document_versions.source_type for versions this actor writes (manual | upload | import | api)
    source: str | None = None
    # the app installation acting for the user (docs/apps.md), recorded on every change it writes
    app_installation_id: uuid.UUID | None = None

    @classmethod
    def of(cls, principal: Principal, run_id: str | uuid.UUID | None = None, **kw: object) -> Actor:
        rid = parse_run_id(principal.tenant_id, run_id) or uuid.uuid4()
        return cls(principal=principal, run_id=rid, **kw)  # type: ignore[arg-type]

    @property
    def user_id(self) -> uuid.UUID:
        """Every stored row names a user (``created_by`` is NOT NULL): writes need one."""
        if self.principal.kind != "user" or self.principal.user_id is None:
            raise Unauthenticated("sign in to change content")
        return self.principal.user_id

    @property
    def tenant_id(self) -> uuid.UUID:
        if self.principal.tenant_id is None:
            raise Unauthenticated("sign in to change content")
        return self.principal.tenant_id

    @property
    def actor_type(self) -> str:
        if self.principal.kind == "system":
            return "system"
        return "api_key" if self.principal.scopes is not None else "user"

    @property
    def version_source(self) -> str:
        if self.source:
            return self.source
        return "api" if self.principal.scopes is not None else "manual"
