"""The resolved appliance: settings plus live handles to every component.

Built once per process by an adapter (server lifespan, CLI command, worker start) from the
endpoints the runtime resolved; services receive what they need from it explicitly.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from openkb.config import Settings
from openkb.db import get_engine
from openkb.mail import Mailer
from openkb.runtime.embedded import Endpoints
from openkb.storage import BlobStore, blob_store


@dataclass
class AppContext:
    settings: Settings
    endpoints: Endpoints
    engine: Engine
    blobs: BlobStore
    mailer: Mailer
    _milvus: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, settings: Settings, endpoints: Endpoints) -> AppContext:
        return cls(
            settings=settings,
            endpoints=endpoints,
            engine=get_engine(endpoints.database_url),
            blobs=blob_store(settings),
            mailer=Mailer(settings),
        )

    @property
    def milvus(self) -> Any:
        """A shared MilvusClient (thread-safe gRPC channel) behind ``ResilientMilvus``: built on
        first use, rebuilt after a connection failure, a released collection reloaded; an
        unreachable Milvus raises ``IndexUnavailable`` (openkb/indexing/client.py)."""
        if self._milvus is None:
            with self._lock:
                if self._milvus is None:
                    from openkb.indexing.client import CALL_TIMEOUT_S, ResilientMilvus
                    from openkb.runtime.embedded import milvus_client

                    uri, token = self.endpoints.milvus_uri, self.endpoints.milvus_token
                    db_name = self.settings.milvus_database if self.settings.milvus_uri else ""
                    self._milvus = ResilientMilvus(
                        lambda: milvus_client(uri, token, db_name=db_name, timeout=CALL_TIMEOUT_S), uri=uri
                    )
        return self._milvus

    def close(self) -> None:
        if self._milvus is not None:
            try:
                self._milvus.close()
            except Exception:  # noqa: BLE001
                pass
            self._milvus = None


def child_env(endpoints: Endpoints) -> dict[str, str]:
    """Env for processes the supervisor starts: they use the supervisor's embedded services."""
    env = {
        "DATABASE_URL": endpoints.database_url,
        "MILVUS_URI": endpoints.milvus_uri,
        "OPENKB_HOME": str(endpoints.home),
        "OPENKB_SUPERVISED": "1",
        # gRPC's fork handlers can reset the poller of a live channel when a library forks a
        # helper process (seen as "epoll_wait error: Bad file descriptor" + abort).
        "GRPC_ENABLE_FORK_SUPPORT": "false",
    }
    env["OPENKB_EMBEDDER_URL"] = endpoints.embedder_url or "off"
    return env
