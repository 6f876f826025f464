"""Typed client parts for facts and entities (docs/facts.md#python-client), attached to
``openkb.apps.client.KnowledgeClient`` as ``kb.profile``, ``kb.facts`` and ``kb.entities``:

    kb.facts.put(predicate_hint="pref.food.rated", value="番茄牛腩", source_ref="record/123")
    kb.entities.resolve({"email": "zhangsan@acme.nl"})  # -> {ref, kind, displayName, created} | None

Only ``call(method, body)`` of the client is used (no import of it: the client imports this).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypedDict


class _Caller(Protocol):
    def call(self, method: str, body: dict[str, Any]) -> dict[str, Any]: ...


class PutResult(TypedDict):
    status: Literal["applied", "duplicate", "conflict"]
    ref: str
    predicate: str


class FactItem(TypedDict):
    ref: str
    predicate: str
    value: Any
    object: str | None
    validFrom: str


class EntityResult(TypedDict, total=False):
    ref: str
    kind: str
    displayName: str
    created: bool
    identifiers: list[dict[str, str]]


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Profile:
    def __init__(self, c: _Caller) -> None:
        self._c = c

    def get(self, prefix: str | None = None) -> list[dict[str, Any]]:
        return self._c.call("profile.get", _drop_none({"prefix": prefix}))["items"]  # type: ignore[no-any-return]


class Facts:
    def __init__(self, c: _Caller) -> None:
        self._c = c

    def lookup(self, subject: str = "self", prefix: str | None = None) -> list[FactItem]:
        body = _drop_none({"subject": subject, "prefix": prefix})
        return self._c.call("facts.lookup", body)["items"]  # type: ignore[no-any-return]

    def put(
        self,
        *,
        predicate_hint: str,
        value: Any = None,
        subject: str = "self",
        description: str | None = None,
        object: str | None = None,  # noqa: A002 - the API's name
        source_ref: str | None = None,
        run_id: str | None = None,
        origin: str | None = None,
        source: str | None = None,
        confidence: float | None = None,
    ) -> PutResult:
        body = _drop_none(
            {
                "subject": subject, "predicateHint": predicate_hint, "description": description, "value": value,
                "object": object, "sourceRef": source_ref, "runId": run_id, "origin": origin, "source": source,
                "confidence": confidence,
            }
        )  # fmt: skip
        return self._c.call("facts.put", body)  # type: ignore[return-value]

    def retract(self, ref: str, *, run_id: str | None = None) -> dict[str, str]:
        return self._c.call("facts.retract", _drop_none({"ref": ref, "runId": run_id}))


class Entities:
    def __init__(self, c: _Caller) -> None:
        self._c = c

    def resolve(
        self, by: dict[str, str], *, kind: str = "person", create: bool = False, display_name: str | None = None
    ) -> EntityResult | None:
        body = _drop_none({"by": by, "kind": kind, "create": create, "displayName": display_name})
        return self._c.call("entities.resolve", body)["entity"]  # type: ignore[no-any-return]

    def get(self, ref: str) -> EntityResult:
        return self._c.call("entities.get", {"ref": ref})  # type: ignore[return-value]

    def list(self, kind: str = "person", *, query: str | None = None, limit: int = 200) -> list[EntityResult]:
        body = _drop_none({"kind": kind, "query": query, "limit": limit})
        return self._c.call("entities.list", body)["items"]  # type: ignore[no-any-return]

    def add_identifier(self, ref: str, kind: str, value: str) -> dict[str, str]:
        return self._c.call("entities.addIdentifier", {"ref": ref, "kind": kind, "value": value})
