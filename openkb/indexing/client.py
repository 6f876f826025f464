"""A Milvus client that survives Milvus restarts (docs/operations.md#outages).

``AppContext.milvus`` hands out one ``ResilientMilvus`` per process instead of a bare
``MilvusClient``. It forwards every call and adds three things the API and workers need to
outlive a restart of Milvus without being restarted themselves:

* **connection failures become ``IndexUnavailable``** (503 with ``Retry-After`` on the API, a
  transient failure in the worker) instead of a raw ``MilvusException``, and the underlying
  client is dropped so the next call builds a fresh one (at most one attempt per
  ``RECONNECT_INTERVAL_S``, so an outage costs a cheap refusal per request, not a connect);
* **a collection Milvus forgot to load** (every collection is ``released`` after a Milvus Lite
  restart) is loaded and the call retried once, so search comes back by itself;
* **quiet outages**: its own notes are INFO, once a minute (``openkb.logthrottle``); the
  adapters report the refusal itself (the API's 503 line, the worker's retry line, the CLI's
  one line on stderr), so a CLI command run while Milvus is down prints one line, not three;
* **bounded waits**: the client's per-call timeout (``CALL_TIMEOUT_S``) bounds every call; a
  client cannot even be built while Milvus is down, and that costs one refused connect.

Trap: the proxy changes which exception a caller sees for a dead Milvus. Code written as
``except MilvusException`` keeps handling what Milvus itself refused (a bad expression, a dense
route whose embedder is down: ``hybrid_search`` still degrades to BM25 on those), while an
unreachable Milvus passes through as ``IndexUnavailable``, which is the point: no caller may
turn "Milvus is down" into a 500 or into a permanent index failure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pymilvus.exceptions import MilvusException

from openkb.errors import IndexUnavailable
from openkb.logthrottle import throttled

log = logging.getLogger("openkb.indexing.client")

RECONNECT_INTERVAL_S = 1.0
CALL_TIMEOUT_S = 30.0
RETRY_AFTER_S = 5
# Pauses before each attempt to load a released collection. Milvus Lite refused a load now and
# then with "Not an Arrow file" right after the collection's flush (one fresh-clone CI run in
# many, under load; the same load a moment later succeeds), so a refused load is tried again
# twice before the caller gets 503: under a second in all, on a path taken only after a restart.
RELOAD_PAUSES_S = (0.0, 0.3, 0.7)

# What a MilvusException says when pymilvus could not talk to Milvus at all (as opposed to Milvus
# refusing the request). Trap: keep these narrow. A dense search whose *embedder* is down fails
# inside Milvus with words like "connection refused"; that is Milvus answering, and must degrade
# to BM25 (``hybrid_search``), not count as Milvus being down.
_CONNECTION_PREFIXES = ("fail connecting to server", "cannot invoke rpc on closed channel")
_CONNECTION_IN_RETRY = ("unavailable", "deadline_exceeded", "cancelled")
# A search that runs out of time may be waiting on the embedding service Milvus calls for the
# query vector, not on Milvus: it stays a MilvusException, so ``hybrid_search`` degrades to BM25
# (and raises IndexUnavailable itself if BM25 fails too).
SEARCH_CALLS = frozenset({"search", "hybrid_search"})
_NOT_LOADED_MARKS = ("state 'released'", "not loaded", "call load()")


def is_data_error(exc: BaseException) -> bool:
    """pymilvus refused a row before sending it (a value the schema cannot hold: an integer
    outside 64 bits in JSON, a wrong type): the same row fails every time, so it is permanent."""
    from pymilvus.exceptions import DataNotMatchException, DataTypeNotMatchException, ParamError

    return isinstance(exc, DataNotMatchException | DataTypeNotMatchException | ParamError)


def is_connection_error(exc: BaseException, *, deadline: bool = True) -> bool:
    """Could not reach Milvus (down, restarting, network): transient by nature. ``deadline=False``
    leaves a call that ran out of time to its caller (see ``SEARCH_CALLS``)."""
    import grpc

    transport = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED]
    if deadline:
        transport.append(grpc.StatusCode.DEADLINE_EXCEEDED)
    if isinstance(exc, grpc.RpcError):
        return callable(getattr(exc, "code", None)) and exc.code() in transport
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, MilvusException):
        if exc.code in transport:  # pymilvus wraps a gRPC failure with its status code
            return True
        text = str(exc.message or "").lower()
        if text.startswith(_CONNECTION_PREFIXES):
            return True
        marks = _CONNECTION_IN_RETRY if deadline else tuple(m for m in _CONNECTION_IN_RETRY if m != "deadline_exceeded")
        return "retry timeout" in text and any(m in text for m in marks)
    return False


def is_not_loaded(exc: BaseException) -> bool:
    """Milvus answered that the collection is not loaded (every collection after a Lite restart)."""
    if not isinstance(exc, MilvusException):
        return False
    text = str(getattr(exc, "message", "") or exc).lower()
    return any(m in text for m in _NOT_LOADED_MARKS)


class DropHandledNotLoaded(logging.Filter):
    """pymilvus logs a failed RPC at ERROR before raising it; a collection that is not loaded is
    handled here (``ResilientMilvus._reload`` loads it and says so once, as a warning), so its
    ERROR line only alarmed: ``openkb index verify`` on a freshly restored home printed one.
    Registered by openkb/indexing/milvus.py ahead of its throttle, so a dropped line does not
    use up the minute of the next real error.

    Also dropped: the ERROR line of a reload that ``_reload`` is about to try again (Milvus Lite
    refuses a load now and then right after a flush, "Not an Arrow file", and takes the same
    load a moment later); only the last attempt's failure keeps its line."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage().lower()
        except Exception:  # noqa: BLE001 - a bad format string: keep the record
            return True
        if getattr(_retried_load, "active", False) and "[load_collection]" in text:
            return False
        return not any(m in text for m in _NOT_LOADED_MARKS)


# Set by ``ResilientMilvus._reload`` around a load it will try again if refused: pymilvus logs
# the refusal in the calling thread before raising it, so a thread-local tells the filter.
_retried_load = threading.local()


class ResilientMilvus:
    """Proxy over a lazily built ``MilvusClient`` (see the module docstring).

    ``factory`` builds a connected client (``openkb.runtime.embedded.milvus_client``) and may
    raise while Milvus is down. Thread-safe: the API calls it from many threads at once."""

    def __init__(self, factory: Callable[[], Any], *, uri: str = "") -> None:
        self._factory = factory
        self._uri = uri
        self._client: Any = None
        self._lock = threading.Lock()
        self._next_connect = 0.0
        self._last_error = ""
        self.reconnects = 0  # clients built after the first one (for doctor and tests)
        self._built = 0
        self._reloaded: set[str] = set()  # collections loaded again since the last take_reloaded()

    # -- the underlying client ------------------------------------------------------------
    def _get(self) -> Any:
        client = self._client
        if client is not None:
            return client
        with self._lock:
            if self._client is not None:
                return self._client
            now = time.monotonic()
            if now < self._next_connect:
                raise self._unavailable(self._last_error or "reconnecting")
            self._next_connect = now + RECONNECT_INTERVAL_S
            try:
                self._client = self._factory()
            except Exception as exc:  # noqa: BLE001 - any failure to build = unreachable
                self._last_error = str(getattr(exc, "message", "") or exc)[:300]
                throttled(log, "milvus-connect", logging.INFO, "Milvus at %s unreachable: %s", self._uri, exc)
                raise self._unavailable(self._last_error) from None
            if self._built:
                self.reconnects += 1
                log.info("reconnected to Milvus at %s", self._uri)
            self._built += 1
            return self._client

    def _drop(self, client: Any, reason: str) -> None:
        with self._lock:
            if self._client is client:
                self._client = None
                self._last_error = reason
        try:
            client.close()
        except Exception:  # noqa: BLE001 - the channel is already broken
            pass

    def _unavailable(self, reason: str) -> IndexUnavailable:
        return IndexUnavailable(
            f"the search index (Milvus) is unavailable, try again shortly: {reason}"[:500], retry_after=RETRY_AFTER_S
        )

    @property
    def raw(self) -> Any:
        """The current ``MilvusClient`` (built if needed); for code that needs the real object."""
        return self._get()

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass

    # -- forwarding -----------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._get(), name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, args, kwargs)

        call.__name__ = name
        return call

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        client = self._get()
        try:
            return getattr(client, name)(*args, **kwargs)
        except Exception as exc:
            if is_not_loaded(exc) and name not in ("load_collection", "release_collection"):
                collection = args[0] if args and isinstance(args[0], str) else kwargs.get("collection_name")
                if collection:
                    self._reload(client, collection)
                    try:
                        return getattr(client, name)(*args, **kwargs)
                    except Exception as again:  # noqa: BLE001
                        if is_connection_error(again):
                            self._drop(client, str(again)[:300])
                            raise self._unavailable(_short(again)) from None
                        raise
            if is_connection_error(exc, deadline=name not in SEARCH_CALLS):
                self._drop(client, _short(exc))
                throttled(log, "milvus-call", logging.INFO, "Milvus call %s failed: %s", name, _short(exc))
                raise self._unavailable(_short(exc)) from None
            if name in SEARCH_CALLS and _is_deadline(exc):
                # pymilvus lets a timed-out search out as a bare gRPC error: give it the type the
                # degradation in ``hybrid_search`` handles (a hung embedder was a 500)
                raise MilvusException(message=f"search ran out of time: {_short(exc)}") from None
            raise

    def _reload(self, client: Any, collection: str) -> None:
        """Load a collection Milvus has released (after its restart). A second thread that hits
        the same state loads it too; Milvus treats a load of a loaded collection as a no-op."""
        throttled(
            log,
            f"reload|{collection}",
            logging.WARNING,
            "collection %s was not loaded (Milvus restarted?); loading it",
            collection,
        )
        failed: Exception | None = None
        for attempt, pause in enumerate(RELOAD_PAUSES_S, 1):
            time.sleep(pause)
            _retried_load.active = attempt < len(RELOAD_PAUSES_S)  # its refusal is no error yet
            try:
                client.load_collection(collection)
                break
            except Exception as exc:  # noqa: BLE001
                if is_connection_error(exc):
                    self._drop(client, _short(exc))
                    raise self._unavailable(f"loading {collection}: {_short(exc)}") from None
                failed = exc
            finally:
                _retried_load.active = False
        else:
            raise self._unavailable(f"loading {collection}: {_short(failed)}") from None
        with self._lock:
            self._reloaded.add(collection)

    def take_reloaded(self) -> set[str]:
        """Collections this client had to load again since the last call (the retrieval
        service warms them in the background: openkb.retrieval.service)."""
        with self._lock:
            out, self._reloaded = self._reloaded, set()
        return out


def _is_deadline(exc: BaseException) -> bool:
    import grpc

    return isinstance(exc, grpc.RpcError) and getattr(exc, "code", lambda: None)() == grpc.StatusCode.DEADLINE_EXCEEDED


def _short(exc: BaseException) -> str:
    return str(getattr(exc, "message", "") or exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
