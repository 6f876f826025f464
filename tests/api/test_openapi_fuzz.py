"""Schemathesis over ``/api/openapi.json``: no generated request may produce a 5xx, and every
status an operation answers must be documented in its OpenAPI entry.

Authenticated with a read+write PAT of a member in its own tenant (no ``admin`` scope, so the
fuzzer cannot suspend users or change registration settings for the rest of the suite). Path
parameters named like the objects of a small seeded world (workspace, knowledge base, folder,
page, version) are sometimes replaced by those real ids, so generated bodies reach the services
instead of stopping at a 404. Bounded by ``OPENKB_FUZZ_EXAMPLES`` (default 12 per operation) to
stay around a minute.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error, status_code_conformance

from tests.content.http_world import HttpWorld

MAX_EXAMPLES = int(os.environ.get("OPENKB_FUZZ_EXAMPLES", "12"))


class FuzzWorld:
    def __init__(self, live_server: str, committed: Any) -> None:
        self.w = HttpWorld(live_server, committed)
        w = self.w
        folder = w.doc("Fuzz folder", type="folder")
        page = w.doc("Fuzz page", parent_id=folder["id"], markdown="# fuzz\n")
        self.token = w.c["owner"].headers["authorization"].split(" ", 1)[1]
        self.ids: dict[str, list[str]] = {
            "workspace_id": [w.ws["id"]],
            "kb_id": [w.kb["id"]],
            "doc_id": [page["id"], folder["id"]],
            "version_id": [page["current_version_id"]],
            "object_id": [w.kb["id"], page["id"], w.ws["id"]],
            "user_id": [str(w.users["member"])],
        }


@pytest.fixture(scope="module")
def fuzz_world(live_server, committed_module):
    fw = FuzzWorld(live_server, committed_module)
    yield fw
    fw.w.close()


@pytest.fixture(scope="module")
def committed_module(engine):
    from sqlmodel import Session

    def make() -> Session:
        return Session(engine, expire_on_commit=False)

    return make


def _load_schema(live_server: str, ids: dict[str, list[str]]) -> Any:
    schema = schemathesis.openapi.from_url(f"{live_server}/api/openapi.json")

    @schema.hook
    def map_path_parameters(ctx, path_parameters):  # noqa: ANN001, ANN202
        if not path_parameters:
            return path_parameters
        out = dict(path_parameters)
        for name, value in path_parameters.items():
            choices = ids.get(name)
            if choices and isinstance(value, str):
                try:
                    n = uuid.UUID(value).int
                except ValueError:
                    continue
                if n % 3:  # two thirds of the time a real object
                    out[name] = choices[n % len(choices)]
        return out

    return schema


def test_no_server_errors(live_server, fuzz_world):
    """Every operation, ``MAX_EXAMPLES`` generated cases each (no shrinking: failures are
    collected per operation and reported together)."""
    # schemathesis' pytest integration (from_fixture) does not run on pytest 9; drive it directly.
    schema = _load_schema(live_server, fuzz_world.ids)
    headers = {"Authorization": f"Bearer {fuzz_world.token}"}
    failures: list[str] = []
    calls = 0
    for result in schema.get_all_operations():
        op = result.ok()
        seen: set[str] = set()

        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        # run() is called once, right below, inside this iteration: op and seen are the current ones.
        @given(case=op.as_strategy())
        def run(case: Any) -> None:
            nonlocal calls
            calls += 1
            try:
                case.call_and_validate(
                    headers=headers, checks=[not_a_server_error, status_code_conformance], timeout=30
                )
            except Exception as exc:  # noqa: BLE001 - collect, keep fuzzing the other operations
                msg = f"{op.label}: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"  # noqa: B023
                if msg not in seen:  # noqa: B023
                    seen.add(msg)  # noqa: B023
                    failures.append(msg + f"\n    {case.method} {case.formatted_path} body={str(case.body)[:200]}")

        run()
    assert calls > 0
    assert not failures, f"{len(failures)} failing operations:\n" + "\n".join(failures)
