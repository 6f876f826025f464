"""A tiny boolean expression over scalar chunk fields, rendered to a Milvus filter string.

The same tree is evaluated in Python by the tests, so the string that runs in Milvus and the
property the oracle proves (the scope never misses a readable document) come from one object.
Only ``==`` and ``in`` on VARCHAR fields are used: both are served by an INVERTED index on
Milvus Lite and server alike, unlike ``ARRAY_CONTAINS_ANY`` (unindexed on Lite: ~45 us/row).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Logical field names; pass ``fields=`` to ``to_milvus`` if the collection names them otherwise.
TENANT = "tenant_id"
WORKSPACE = "workspace_id"
SCOPE_KB = "scope_kb"
SCOPE_DOC = "scope_doc"
VISIBILITY = "visibility_eff"
STATUS = "doc_status"
DOCUMENT = "document_id"


class Expr:
    def evaluate(self, row: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def to_milvus(self, fields: Mapping[str, str] | None = None) -> str:
        raise NotImplementedError


def _lit(v: str) -> str:
    return json.dumps(str(v))


def _f(name: str, fields: Mapping[str, str] | None) -> str:
    return (fields or {}).get(name, name)


@dataclass(frozen=True)
class _Const(Expr):
    value: bool

    def evaluate(self, row: Mapping[str, Any]) -> bool:
        return self.value

    def to_milvus(self, fields: Mapping[str, str] | None = None) -> str:
        # Milvus has no boolean literal that every version accepts; an impossible comparison
        # on the primary-key-like document id is false everywhere and cheap.
        return "" if self.value else f'{_f(DOCUMENT, fields)} == ""'


TRUE: Expr = _Const(True)
FALSE: Expr = _Const(False)


@dataclass(frozen=True)
class Eq(Expr):
    field: str
    value: str

    def evaluate(self, row: Mapping[str, Any]) -> bool:
        return str(row.get(self.field, "")) == self.value

    def to_milvus(self, fields: Mapping[str, str] | None = None) -> str:
        return f"{_f(self.field, fields)} == {_lit(self.value)}"


@dataclass(frozen=True)
class In(Expr):
    field: str
    values: tuple[str, ...]

    def evaluate(self, row: Mapping[str, Any]) -> bool:
        return str(row.get(self.field, "")) in self.values

    def to_milvus(self, fields: Mapping[str, str] | None = None) -> str:
        return f"{_f(self.field, fields)} in [{', '.join(_lit(v) for v in self.values)}]"


@dataclass(frozen=True)
class _Many(Expr):
    parts: tuple[Expr, ...]
    op: str

    def evaluate(self, row: Mapping[str, Any]) -> bool:
        fn = all if self.op == "and" else any
        return fn(p.evaluate(row) for p in self.parts)

    def to_milvus(self, fields: Mapping[str, str] | None = None) -> str:
        return "(" + f" {self.op} ".join(p.to_milvus(fields) for p in self.parts) + ")"


# Longest id list spelled out in a filter (~200 KB of expression at 5,000 uuids). Beyond it the
# clause becomes TRUE, which is sound: this algebra has no negation, so every clause is
# monotone and widening one only adds candidates, which the final PostgreSQL check removes. The
# tenant equality is never a list, so widening never crosses a tenant.
MAX_LIST = 5000


def one_of(field: str, values: Iterable[str]) -> Expr:
    vals = tuple(sorted({str(v) for v in values}))
    if not vals:
        return FALSE
    if len(vals) > MAX_LIST:
        return TRUE
    return Eq(field, vals[0]) if len(vals) == 1 else In(field, vals)


def _combine(parts: tuple[Expr, ...], op: str, absorbing: Expr, neutral: Expr) -> Expr:
    """``and``/``or`` with constant folding: the absorbing constant wins, neutral ones vanish."""
    kept = []
    for p in parts:
        if p is absorbing:
            return absorbing
        if p is not neutral:
            kept.append(p)
    if not kept:
        return neutral
    return kept[0] if len(kept) == 1 else _Many(tuple(kept), op)


def all_of(*parts: Expr) -> Expr:
    return _combine(parts, "and", FALSE, TRUE)


def any_of(*parts: Expr) -> Expr:
    return _combine(parts, "or", TRUE, FALSE)
