"""Search filters refuse what they cannot read, with VALIDATION_ERROR and the field's name, on
every path that hands them raw JSON (MCP's kb_search, apps), not only behind REST's models."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from openkb.errors import ValidationError
from openkb.retrieval.filters import parse_filters


@pytest.mark.parametrize("value", [1e20, -1e20, float("nan"), float("inf"), 10**30, True, [], "", "9999-99-99"])
def test_a_time_bound_that_is_no_time_is_a_validation_error(value):
    with pytest.raises(ValidationError) as err:
        parse_filters({"time_range": {"from": value}})
    assert err.value.extra.get("field") == "filters.time_range.from"


def test_time_bounds_as_iso_text_or_unix_seconds():
    f = parse_filters({"time_range": {"from": "2026-01-02T03:04:05Z", "to": 1_800_000_000}})
    assert f.updated_from == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert f.updated_to == datetime.fromtimestamp(1_800_000_000, UTC)


@pytest.mark.parametrize(
    "filters,field",
    [
        ({"tags": ["ok", "a\x00b"]}, "filters.tags"),
        ({"tags": "\ud83d"}, "filters.tags"),
        ({"metadata": {"k": "a\x00"}}, "filters.metadata"),
        ({"metadata": {"k\x00": 1}}, "filters.metadata"),
        ({"metadata": {"a": {"b": [1, "\udc00"]}}}, "filters.metadata"),
    ],
)
def test_text_postgres_cannot_take_is_a_validation_error(filters, field):
    with pytest.raises(ValidationError) as err:
        parse_filters(filters)
    assert err.value.extra.get("field") == field
