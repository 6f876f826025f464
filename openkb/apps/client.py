"""A small typed Python client of the app-facing API (docs/apps.md#python-client).

    from openkb.apps.client import KnowledgeClient
    kb = KnowledgeClient("https://kb.example.org", "kbapp_...")
    kb.documents.upsert(collection="diary", key="2026-09-29", title="2026-09-29", body="# Today")

Method names follow the API (``collections.list`` -> ``kb.collections.list()``). Errors come back
as ``AppApiError`` with the stable ``code`` (``KNOWLEDGE_PERMISSION_MISSING``,
``APP_QUOTA_EXCEEDED``, ``NOT_FOUND`` ...) and the server's ``detail``.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

import httpx

from openkb.facts.client import Entities, Facts, Profile

PREFIX = "/api/apps/v1/knowledge/"


class AppApiError(Exception):
    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.body = status, code, detail, body


class Collection(TypedDict):
    ref: str
    name: str
    builtin: Literal["diary", "keep"] | None
    kind: str
    canWrite: bool
    parent: str | None


class UpsertResult(TypedDict):
    status: Literal["created", "updated", "unchanged"]
    ref: str
    runId: str


class TimeRange(TypedDict, total=False):
    # "from" is a keyword: build it as {"from": ..., "to": ...}
    to: int | str


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class _Part:
    def __init__(self, client: KnowledgeClient) -> None:
        self._c = client


class _Collections(_Part):
    def list(self) -> list[Collection]:
        return self._c.call("collections.list", {})["items"]  # type: ignore[no-any-return]

    def create(self, name: str, *, parent: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        return self._c.call("collections.create", _drop_none({"name": name, "parent": parent, "runId": run_id}))


class _Documents(_Part):
    def upsert(
        self,
        *,
        title: str,
        collection: str | None = None,
        key: str | None = None,
        ref: str | None = None,
        body: str | None = None,
        text: str | None = None,
        source_uri: str | None = None,
        meta: dict[str, Any] | None = None,
        origin: str | None = None,
        source: str | None = None,
        run_id: str | None = None,
    ) -> UpsertResult:
        payload = {
            "collection": collection, "key": key, "ref": ref, "title": title, "body": body, "text": text,
            "sourceUri": source_uri, "meta": meta, "origin": origin, "source": source, "runId": run_id,
        }  # fmt: skip
        return self._c.call("documents.upsert", _drop_none(payload))  # type: ignore[return-value]

    def get(self, ref: str, *, range: tuple[int, int] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"ref": ref}
        if range is not None:
            body["range"] = {"from": range[0], "to": range[1]}
        return self._c.call("documents.get", body)

    def get_by_key(self, collection: str, key: str) -> dict[str, Any] | None:
        return self._c.call("documents.getByKey", {"collection": collection, "key": key})["document"]  # type: ignore[no-any-return]

    def list(
        self, collection: str, *, time_range: dict[str, Any] | None = None, limit: int = 200
    ) -> list[dict[str, Any]]:
        body = _drop_none({"collection": collection, "timeRange": time_range, "limit": limit})
        return self._c.call("documents.list", body)["items"]  # type: ignore[no-any-return]

    def delete(self, ref: str, *, run_id: str | None = None) -> dict[str, Any]:
        return self._c.call("documents.delete", _drop_none({"ref": ref, "runId": run_id}))


class _Changes(_Part):
    def list(
        self, *, since: str | int | None = None, status: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        body = _drop_none({"since": since, "status": status, "limit": limit})
        return self._c.call("changes.list", body)["items"]  # type: ignore[no-any-return]

    def revert(self, ref: str | None = None, *, run_id: str | None = None) -> dict[str, Any]:
        return self._c.call("changes.revert", _drop_none({"ref": ref, "runId": run_id}))


class KnowledgeClient:
    """``ctx.knowledge`` for Python: one installation's credential against one OpenKB."""

    def __init__(
        self, base_url: str, credential: str, *, timeout: float = 30.0, http: httpx.Client | None = None
    ) -> None:
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._headers = {"Authorization": f"Bearer {credential}"}
        self.collections = _Collections(self)
        self.documents = _Documents(self)
        self.changes = _Changes(self)
        self.profile, self.facts, self.entities = Profile(self), Facts(self), Entities(self)  # docs/facts.md

    def call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self._http.post(PREFIX + method, json=body, headers=self._headers)
        if r.status_code >= 400:
            try:
                data = r.json()
            except ValueError:
                data = {}
            raise AppApiError(r.status_code, str(data.get("error", r.status_code)), str(data.get("detail", "")), data)
        return r.json()  # type: ignore[no-any-return]

    def search(
        self,
        query: str = "",
        *,
        collections: list[str] | None = None,
        time_range: dict[str, Any] | None = None,
        limit: int = 10,
        entities: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        body = _drop_none(
            {"query": query, "collections": collections, "timeRange": time_range, "limit": limit, "entities": entities}
        )
        return self.call("search", body)["items"]  # type: ignore[no-any-return]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> KnowledgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
