"""Dify's ``metadata_condition``: parse once, evaluate against a document's metadata and tags.

Pure functions (no I/O), so the semantics below are property-tested in isolation and the
endpoint, the key's ``allowed_metadata_filters`` and any future caller agree by construction.

Shape (what Dify sends; ``null`` or ``{"conditions": []}`` means "no filter")::

    {"logical_operator": "and" | "or" | null,
     "conditions": [{"name": "lang", "comparison_operator": "is", "value": "zh"}, ...]}

A condition whose item itself has ``conditions`` is a nested group (Dify never sends one; the
key filter and the request condition are combined that way).

Field names resolve, in order: ``tags`` -> ``documents.tags``; an exact key of the document's
metadata; a dotted path into nested metadata (``owner.team``); then the built-ins
``title``/``document_name``, ``created_at``/``upload_date``, ``updated_at``/``last_update_date``
and ``document_id``. Anything else is missing.

Semantics (DECISIONS, named because each one is a trap):

* **Negations are exact complements.** ``not contains``, ``is not``, ``≠`` and ``not in`` are
  ``not`` of their positive twin, so a document *without* the field matches ``tags not contains
  "internal"``. (SQL's three-valued logic, which Dify uses for its own datasets, would drop it.)
* **Lists match element-wise, "any".** A positive operator holds on a list field when it holds
  for some element (``tags contains "mc"`` matches ``["mcp"]``). A list *value* for a scalar
  operator means "any of these values"; ``in``/``not in`` take a list or a comma-separated string.
* **Strings are case-sensitive**; numbers and booleans compare by their text form for string
  operators (``true``/``false``, ``3`` not ``3.0``).
* ``is``/``=`` compare numerically when both sides are numbers (``"3" = 3.0``), else as text;
  ``is None`` is ``empty``. ``>``, ``<``, ``≥``, ``≤`` need numbers on both sides, or dates on
  both sides; anything else is false (and its ``not`` is not offered, so nothing leaks).
* ``before``/``after`` take dates: ISO 8601 strings (a bare date is UTC midnight, a naive time is
  UTC), ``datetime``/``date`` objects, or Unix timestamps (seconds; values above 1e11 are
  milliseconds, which is what JavaScript sends). Unparseable -> false.
* ``empty`` holds for a missing field, ``null``, ``""``, ``[]`` and ``{}``.
* Operators accept the Unicode forms Dify sends (``≠ ≥ ≤``) and the ASCII ones (``!= >= <= ==``),
  any case, with ``_`` or extra spaces (``not_contains``), plus ``starts with``/``ends with``.

Anything not understood raises ``ConditionError`` (an OpenKB ``ValidationError``): a filter we
cannot read is refused, never silently dropped, because dropping it widens the result set.
A name or string value with a NUL or a lone surrogate is refused the same way (PostgreSQL can
take neither, and a pushed-down value or a stored key filter reaches it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any, Literal

from openkb.content.limits import check_text
from openkb.errors import ConditionError, ValidationError
from openkb.retrieval.filters import MAX_TAGS as MAX_PUSHED_TAGS

MAX_CONDITIONS = 100
MAX_DEPTH = 4
MAX_VALUES = 1000
MAX_TEXT = 1000

POSITIVE = {"contains", "start with", "end with", "is", "in", "not empty", "=", ">", "<", "≥", "≤", "before", "after"}
NEGATION = {"not contains": "contains", "is not": "is", "not in": "in", "empty": "not empty", "≠": "="}
OPERATORS = frozenset(POSITIVE | set(NEGATION))
NO_VALUE = frozenset({"empty", "not empty"})

_ALIASES = {
    "!=": "≠",
    "<>": "≠",
    ">=": "≥",
    "=>": "≥",
    "<=": "≤",
    "=<": "≤",
    "==": "=",
    "starts with": "start with",
    "ends with": "end with",
    "not contain": "not contains",
    "is empty": "empty",
    "is not empty": "not empty",
    "notin": "not in",
}

BUILTIN_ALIASES = {
    "title": "title",
    "document_name": "title",
    "created_at": "created_at",
    "upload_date": "created_at",
    "updated_at": "updated_at",
    "last_update_date": "updated_at",
    "document_id": "document_id",
}


Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Condition:
    name: tuple[str, ...]  # one or more field names (Dify's docs show a list); any matches
    op: str  # canonical operator
    value: tuple[Scalar, ...] | Scalar = None  # a tuple means "any of"


@dataclass(frozen=True)
class Group:
    logic: Literal["and", "or"]
    items: tuple[Condition | Group, ...] = field(default=())


Node = Condition | Group


@dataclass(frozen=True)
class DocFields:
    """What a condition can see of one document (loaded from PostgreSQL, the truth)."""

    metadata: Mapping[str, Any]
    tags: Sequence[str] = ()
    builtins: Mapping[str, Any] = field(default_factory=dict)


# --- parsing -------------------------------------------------------------------------------------


def canonical_operator(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ConditionError(f"comparison_operator must be a string, got {type(raw).__name__}")
    op = re.sub(r"[\s_]+", " ", raw.strip().lower())
    op = _ALIASES.get(op, op)
    if op not in OPERATORS:
        raise ConditionError(f"unknown comparison_operator {raw!r}; expected one of {', '.join(sorted(OPERATORS))}")
    return op


def _storable(s: str, where: str) -> str:
    """Refuse what PostgreSQL cannot take (a NUL, a lone surrogate): a value is pushed down into
    the search's SQL and a key's filter is stored as jsonb, where either is a driver error (a 500,
    which Dify retries three times), so it is a bad request here (``limits.check_text``)."""
    try:
        return check_text(s, where)
    except ValidationError as exc:
        raise ConditionError(exc.detail) from None


def _scalar(v: Any, where: str) -> Scalar:
    if v is None or isinstance(v, (bool, int, str)):
        if isinstance(v, str):
            if len(v) > MAX_TEXT:
                raise ConditionError(f"{where}: value longer than {MAX_TEXT} characters")
            _storable(v, f"{where}: value")
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ConditionError(f"{where}: value must be a finite number")
        return v
    raise ConditionError(f"{where}: value must be a string, number, boolean or null, got {type(v).__name__}")


def _value(op: str, v: Any, where: str) -> tuple[Scalar, ...] | Scalar:
    if op in NO_VALUE:
        return None
    if op in ("in", "not in") and isinstance(v, str):
        v = [p.strip() for p in v.split(",") if p.strip()]
    if isinstance(v, (list, tuple)):
        if len(v) > MAX_VALUES:
            raise ConditionError(f"{where}: more than {MAX_VALUES} values")
        return tuple(_scalar(x, where) for x in v)
    if op in ("in", "not in"):
        if v is None:
            raise ConditionError(f"{where}: '{op}' needs a list of values")
        return (_scalar(v, where),)
    s = _scalar(v, where)
    if s is None and op not in ("is", "is not", "=", "≠"):
        raise ConditionError(f"{where}: '{op}' needs a value")
    return s


def _names(raw: Any, where: str) -> tuple[str, ...]:
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, (list, tuple)) or not names:
        raise ConditionError(f"{where}: name must be a non-empty string")
    out = []
    for n in names:
        if not isinstance(n, str) or not n.strip() or len(n) > 200:
            raise ConditionError(f"{where}: name must be a non-empty string of at most 200 characters")
        out.append(_storable(n.strip(), f"{where}: name"))
    return tuple(out)


def _parse(obj: Any, depth: int, counter: list[int]) -> Group:
    if not isinstance(obj, Mapping):
        raise ConditionError("metadata_condition must be an object")
    logic = obj.get("logical_operator")
    logic = "and" if logic is None else logic
    if not isinstance(logic, str) or logic.strip().lower() not in ("and", "or"):
        raise ConditionError(f"logical_operator must be 'and' or 'or', got {logic!r}")
    raw_items = obj.get("conditions")
    if raw_items is None:
        raw_items = []
    if not isinstance(raw_items, list):
        raise ConditionError("conditions must be a list")
    items: list[Node] = []
    for i, it in enumerate(raw_items):
        counter[0] += 1
        if counter[0] > MAX_CONDITIONS:
            raise ConditionError(f"at most {MAX_CONDITIONS} conditions")
        where = f"conditions[{i}]"
        if not isinstance(it, Mapping):
            raise ConditionError(f"{where} must be an object")
        if "conditions" in it and "comparison_operator" not in it:
            if depth >= MAX_DEPTH:
                raise ConditionError(f"conditions nested deeper than {MAX_DEPTH}")
            items.append(_parse(it, depth + 1, counter))
            continue
        op = canonical_operator(it.get("comparison_operator"))
        items.append(Condition(name=_names(it.get("name"), where), op=op, value=_value(op, it.get("value"), where)))
    return Group(logic=logic.strip().lower(), items=tuple(items))  # type: ignore[arg-type]


def parse_condition(obj: Any) -> Group | None:
    """A ``metadata_condition`` (or a stored key filter) -> ``Group``; ``None`` when it filters nothing."""
    if obj is None:
        return None
    if isinstance(obj, Mapping) and not obj:
        return None
    g = _parse(obj, 0, [0])
    return g if g.items else None


def all_of(*groups: Group | None) -> Group | None:
    present = tuple(g for g in groups if g is not None)
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return Group(logic="and", items=present)


def to_dict(node: Node) -> dict[str, Any]:
    """The JSON form ``parse_condition`` reads back to an equal tree (stored on keys)."""
    if isinstance(node, Group):
        return {"logical_operator": node.logic, "conditions": [to_dict(i) for i in node.items]}
    value = list(node.value) if isinstance(node.value, tuple) else node.value
    out: dict[str, Any] = {
        "name": node.name[0] if len(node.name) == 1 else list(node.name),
        "comparison_operator": node.op,
    }
    if node.op not in NO_VALUE:
        out["value"] = value
    return out


def condition_names(node: Node | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, Condition):
        return set(node.name)
    return set().union(*(condition_names(i) for i in node.items)) if node.items else set()


# --- values --------------------------------------------------------------------------------------

_MISSING = object()
_NUM_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def lookup(doc: DocFields, name: str) -> Any:
    if name == "tags":
        return list(doc.tags)
    if name in doc.metadata:
        return doc.metadata[name]
    if "." in name:
        cur: Any = doc.metadata
        for part in name.split("."):
            if isinstance(cur, Mapping) and part in cur:
                cur = cur[part]
            else:
                cur = _MISSING
                break
        if cur is not _MISSING:
            return cur
    builtin = BUILTIN_ALIASES.get(name)
    if builtin is not None and builtin in doc.builtins:
        return doc.builtins[builtin]
    return _MISSING


def _is_empty(v: Any) -> bool:
    return v is _MISSING or v is None or v == "" or (isinstance(v, (list, tuple, dict)) and len(v) == 0)


def _text(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        return str(int(v)) if v.is_integer() and abs(v) < 1e16 else repr(v)
    if isinstance(v, str):
        return v
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, str) and _NUM_RE.match(v.strip()):
        f = float(v.strip())
        return f if math.isfinite(f) else None
    return None


def to_datetime(v: Any) -> datetime | None:
    """ISO string / date / datetime / Unix seconds (or milliseconds above 1e11) -> aware UTC."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, datetime):
        return v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    if isinstance(v, date):
        return datetime.combine(v, time(0), tzinfo=UTC)
    n = _number(v) if not isinstance(v, str) or _NUM_RE.match(v.strip()) else None
    if n is not None:
        if abs(n) > 1e11:
            n /= 1000.0
        try:
            return datetime.fromtimestamp(n, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(v, str):
        s = v.strip()
        if s.endswith(("Z", "z")):
            s = s[:-1] + "+00:00"
        try:
            d = datetime.fromisoformat(s)
        except ValueError:
            return None
        if len(s) == 10 and "T" not in s and " " not in s:
            d = datetime.combine(d.date(), time(0))
        return d if d.tzinfo is not None else d.replace(tzinfo=UTC)
    return None


def _eq(a: Any, b: Scalar) -> bool:
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return na == nb
    ta, tb = _text(a), _text(b)
    return ta is not None and tb is not None and ta == tb


def _order(a: Any, b: Scalar, op: str) -> bool:
    na, nb = _number(a), _number(b)
    if na is None or nb is None:
        da, db = to_datetime(a) if isinstance(a, (str, date)) else None, to_datetime(b) if isinstance(b, str) else None
        if da is None or db is None:
            return False
        na, nb = da.timestamp(), db.timestamp()
    if op == ">":
        return na > nb
    if op == "<":
        return na < nb
    if op == "≥":
        return na >= nb
    return na <= nb


def _scalar_holds(op: str, field_value: Any, value: Scalar) -> bool:
    """A positive operator on one (non-list) field value and one condition value."""
    if op in ("is", "="):
        if value is None:
            return _is_empty(field_value)
        return _eq(field_value, value)
    if op in ("contains", "start with", "end with"):
        ft, vt = _text(field_value), _text(value)
        if ft is None or vt is None:
            return False
        if op == "contains":
            return vt in ft
        return ft.startswith(vt) if op == "start with" else ft.endswith(vt)
    if op in (">", "<", "≥", "≤"):
        return _order(field_value, value, op)
    if op in ("before", "after"):
        fd, vd = to_datetime(field_value), to_datetime(value)
        if fd is None or vd is None:
            return False
        return fd < vd if op == "before" else fd > vd
    raise AssertionError(op)  # pragma: no cover - parse_condition only lets known ops through


def _positive(op: str, field_value: Any, value: tuple[Scalar, ...] | Scalar) -> bool:
    if op == "not empty":
        return not _is_empty(field_value)
    if op in ("is", "=") and value is None:
        return _is_empty(field_value)
    if field_value is _MISSING or field_value is None:
        return False
    values: Iterable[Scalar] = value if isinstance(value, tuple) else (value,)
    if op == "in":
        op = "is"
    elements = field_value if isinstance(field_value, (list, tuple)) else (field_value,)
    return any(_scalar_holds(op, e, v) for v in values for e in elements if e is not None)


def _holds(c: Condition, doc: DocFields) -> bool:
    base = NEGATION.get(c.op)
    op = base or c.op
    hit = any(_positive(op, lookup(doc, n), c.value) for n in c.name)
    return not hit if base else hit


def evaluate(node: Node | None, doc: DocFields) -> bool:
    """Does ``doc`` satisfy ``node``? ``None`` (no filter) and an empty group are true."""
    if node is None:
        return True
    if isinstance(node, Condition):
        return _holds(node, doc)
    if not node.items:
        return True
    if node.logic == "and":
        return all(evaluate(i, doc) for i in node.items)
    return any(evaluate(i, doc) for i in node.items)


# --- push-down ---------------------------------------------------------------------------------


def pushdown_tags(node: Node | None) -> tuple[tuple[str, ...], bool] | None:
    """Tags a document *must* share (any of them) to satisfy ``node``, for the retrieval
    service's ``filters={"tags": [...]}`` (exact, any-of overlap with ``documents.tags``).

    Sound by construction: only a ``tags is|in`` condition that is AND-ed at the top (or through
    nested ANDs) with plain, non-numeric string values qualifies (a numeric-looking value would
    also match ``"3.0"`` under ``is``, which an exact overlap would miss). A condition with more
    distinct values than the retrieval filters take (``MAX_PUSHED_TAGS``, 50; a condition may
    list 1000) is not pushed: the search would refuse it, and the Python evaluation is exact
    without it. Returns ``(tags, exact)``; ``exact`` is true when that condition is the whole
    filter, so no post-filtering is needed. ``None`` when nothing can be pushed.
    """
    if node is None:
        return None
    if isinstance(node, Condition):
        if node.name != ("tags",) or node.op not in ("is", "in"):
            return None
        values = node.value if isinstance(node.value, tuple) else (node.value,)
        if not values or not all(isinstance(v, str) and v and _number(v) is None for v in values):
            return None
        tags = tuple(dict.fromkeys(values))
        if len(tags) > MAX_PUSHED_TAGS:
            return None
        return tags, True  # type: ignore[return-value]
    if node.logic != "and" and len(node.items) != 1:
        return None
    best: tuple[tuple[str, ...], bool] | None = None
    for item in node.items:
        got = pushdown_tags(item)
        if got is not None and (best is None or len(got[0]) < len(best[0])):
            best = got
    if best is None:
        return None
    return best[0], best[1] and len(node.items) == 1
