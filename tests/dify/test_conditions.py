"""metadata_condition semantics: every operator Dify sends, in both spellings, plus properties."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openkb.dify import conditions as c
from openkb.dify.conditions import ConditionError, DocFields, evaluate, parse_condition

DOC = DocFields(
    metadata={
        "lang": "zh",
        "author": "张三",
        "level": 3,
        "score": "4.5",
        "team": {"name": "ml"},
        "published": "2024-03-01",
        "langs": ["zh", "en"],
        "blank": "",
        "flag": True,
    },
    tags=["mcp", "dify"],
    builtins={
        "title": "接入说明",
        "created_at": datetime(2024, 1, 10, tzinfo=UTC),
        "updated_at": datetime(2024, 6, 1, tzinfo=UTC),
        "document_id": "d1",
    },
)


def one(name, op, value=None, doc=DOC) -> bool:
    g = parse_condition(
        {"logical_operator": "and", "conditions": [{"name": name, "comparison_operator": op, "value": value}]}
    )
    return evaluate(g, doc)


@pytest.mark.parametrize(
    "name,op,value,expected",
    [
        ("lang", "contains", "z", True),
        ("author", "contains", "张", True),
        ("lang", "contains", "en", False),
        ("tags", "contains", "mc", True),
        ("tags", "contains", "rag", False),
        ("lang", "not contains", "en", True),
        ("tags", "not contains", "mcp", False),
        ("missing", "not contains", "x", True),
        ("author", "start with", "张", True),
        ("author", "start with", "三", False),
        ("author", "end with", "三", True),
        ("tags", "end with", "fy", True),
        ("lang", "is", "zh", True),
        ("lang", "is", "ZH", False),
        ("level", "is", "3", True),
        ("tags", "is", "dify", True),
        ("lang", "is not", "zh", False),
        ("lang", "is not", "en", True),
        ("missing", "is not", "en", True),
        ("lang", "in", ["en", "zh"], True),
        ("lang", "in", "en, zh", True),
        ("lang", "in", ["en"], False),
        ("tags", "in", ["x", "mcp"], True),
        ("lang", "not in", ["en"], True),
        ("tags", "not in", ["mcp"], False),
        ("missing", "empty", None, True),
        ("blank", "empty", None, True),
        ("lang", "empty", None, False),
        ("tags", "not empty", None, True),
        ("missing", "not empty", None, False),
        ("level", "=", 3, True),
        ("level", "=", "3.0", True),
        ("score", "=", 4.5, True),
        ("level", "=", 4, False),
        ("level", "≠", 4, True),
        ("level", "!=", 3, False),
        ("level", ">", 2, True),
        ("level", ">", 3, False),
        ("score", ">", "4", True),
        ("level", "<", 4, True),
        ("level", "<", 3, False),
        ("level", "≥", 3, True),
        ("level", ">=", 3.5, False),
        ("level", "≤", 3, True),
        ("level", "<=", 2, False),
        ("lang", ">", 1, False),
        ("missing", ">", 1, False),
        ("published", "before", "2024-04-01", True),
        ("published", "after", "2024-04-01", False),
        ("published", "after", 1700000000, True),
        ("published", "before", 1735689600000, True),
        ("upload_date", "after", "2024-01-01T00:00:00Z", True),
        ("last_update_date", "before", "2024-05-01", False),
        ("created_at", "before", "2024-01-10T00:00:01+00:00", True),
        ("published", "before", "not a date", False),
        ("title", "contains", "接入", True),
        ("document_name", "is", "接入说明", True),
        ("team.name", "is", "ml", True),
        ("team.missing", "empty", None, True),
        ("flag", "is", "true", True),
        ("lang", "is", None, False),
        ("missing", "is", None, True),
        ("lang", "is not", None, True),
        ("lang", "contains", ["x", "h"], True),
        ("lang", "not contains", ["x", "h"], False),
        ("langs", "contains", "en", True),
        ("langs", "is", "en", True),
        ("document_id", "is", "d1", True),
    ],
)
def test_each_operator(name, op, value, expected):
    assert one(name, op, value) is expected


@pytest.mark.parametrize(
    "raw,canonical",
    [
        ("≠", "≠"),
        ("!=", "≠"),
        ("≥", "≥"),
        (">=", "≥"),
        ("≤", "≤"),
        ("<=", "≤"),
        ("==", "="),
        ("=", "="),
        ("Not Contains", "not contains"),
        ("not_contains", "not contains"),
        ("starts with", "start with"),
        ("ends with", "end with"),
        ("not  in", "not in"),
        ("IS NOT", "is not"),
        ("before", "before"),
    ],
)
def test_operator_spellings(raw, canonical):
    assert c.canonical_operator(raw) == canonical


def test_logical_operators():
    conds = [
        {"name": "lang", "comparison_operator": "is", "value": "en"},
        {"name": "tags", "comparison_operator": "contains", "value": "mcp"},
    ]
    assert evaluate(parse_condition({"logical_operator": "or", "conditions": conds}), DOC)
    assert not evaluate(parse_condition({"logical_operator": "and", "conditions": conds}), DOC)
    assert not evaluate(parse_condition({"logical_operator": None, "conditions": conds}), DOC)  # null = and
    assert evaluate(parse_condition({"logical_operator": "OR", "conditions": conds}), DOC)


@pytest.mark.parametrize(
    "empty", [None, {}, {"logical_operator": "and", "conditions": []}, {"logical_operator": None, "conditions": None}]
)
def test_no_filter(empty):
    assert parse_condition(empty) is None
    assert evaluate(parse_condition(empty), DOC)


@pytest.mark.parametrize(
    "bad",
    [
        [],
        "x",
        {"logical_operator": "xor", "conditions": []},
        {"conditions": [{"name": "a", "comparison_operator": "like", "value": "x"}]},
        {"conditions": [{"name": "", "comparison_operator": "is", "value": "x"}]},
        {"conditions": [{"comparison_operator": "is", "value": "x"}]},
        {"conditions": [{"name": "a", "comparison_operator": "contains", "value": None}]},
        {"conditions": [{"name": "a", "comparison_operator": "in"}]},
        {"conditions": [{"name": "a", "comparison_operator": "is", "value": {"x": 1}}]},
        {"conditions": "a"},
        {"conditions": [1]},
        {"conditions": [{"name": "a", "comparison_operator": 3, "value": 1}]},
    ],
)
def test_invalid_is_refused_not_dropped(bad):
    with pytest.raises(ConditionError):
        parse_condition(bad)


def test_name_list_means_any():
    g = parse_condition({"conditions": [{"name": ["nope", "lang"], "comparison_operator": "is", "value": "zh"}]})
    assert evaluate(g, DOC)


def test_all_of_combines_key_and_request():
    key = parse_condition({"conditions": [{"name": "lang", "comparison_operator": "is", "value": "zh"}]})
    req = parse_condition({"conditions": [{"name": "tags", "comparison_operator": "contains", "value": "rag"}]})
    assert c.all_of(None, None) is None
    assert c.all_of(key, None) is key
    assert not evaluate(c.all_of(key, req), DOC)
    assert evaluate(c.all_of(key, None), DOC)


# --- properties ----------------------------------------------------------------------------------


def text(max_size: int) -> st.SearchStrategy[str]:
    """Any text a condition or a stored document can hold: no NUL (refused on both sides, as
    PostgreSQL cannot store it; hypothesis' text never makes lone surrogates)."""
    return st.text(st.characters(exclude_characters="\x00"), max_size=max_size)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    text(6),
    st.sampled_from(["2024-01-01", "2023-12-31T10:00:00Z", "3", "4.5", "zh"]),
)
field_values = st.one_of(scalars, st.lists(st.one_of(text(4), st.integers(0, 5)), max_size=3))
names = st.sampled_from(["a", "b", "tags", "title"])
docs = st.builds(
    lambda m, t, title: DocFields(metadata=m, tags=t, builtins={"title": title}),
    st.dictionaries(st.sampled_from(["a", "b"]), field_values, max_size=2),
    st.lists(text(4), max_size=3),
    text(5),
)
valued_ops = sorted(c.OPERATORS - c.NO_VALUE)


@st.composite
def condition_dicts(draw):
    op = draw(st.sampled_from(sorted(c.OPERATORS)))
    if op in c.NO_VALUE:
        value = None
    elif op in ("in", "not in"):
        value = draw(st.lists(st.one_of(text(4), st.integers(0, 5)), min_size=1, max_size=3))
    else:
        value = draw(
            st.one_of(
                text(4),
                st.integers(-5, 5),
                st.floats(-10, 10, allow_nan=False),
                st.sampled_from(["2024-01-01", "3"]),
            )
        )
    return {"name": draw(names), "comparison_operator": op, "value": value}


@st.composite
def groups(draw, depth=0):
    items = draw(
        st.lists(
            condition_dicts() if depth >= 2 else st.one_of(condition_dicts(), groups(depth=depth + 1)),
            min_size=1,
            max_size=3,
        )
    )
    return {"logical_operator": draw(st.sampled_from(["and", "or", None])), "conditions": items}


@settings(max_examples=300, deadline=None)
@given(condition_dicts(), docs)
def test_negation_is_exact_complement(cd, doc):
    neg = {"contains": "not contains", "is": "is not", "in": "not in", "not empty": "empty", "=": "≠"}
    inv = {v: k for k, v in neg.items()}
    op = c.canonical_operator(cd["comparison_operator"])
    other = neg.get(op) or inv.get(op)
    if other is None:
        return
    a = evaluate(parse_condition({"conditions": [cd]}), doc)
    b = evaluate(parse_condition({"conditions": [{**cd, "comparison_operator": other}]}), doc)
    assert a != b


@settings(max_examples=300, deadline=None)
@given(groups(), docs)
def test_roundtrip_and_total(g, doc):
    parsed = parse_condition(g)
    assert parsed is not None
    again = parse_condition(c.to_dict(parsed))
    assert again == parsed
    assert evaluate(parsed, doc) in (True, False)  # never raises, always a bool


@settings(max_examples=200, deadline=None)
@given(groups(), docs)
def test_and_or_laws(g, doc):
    parsed = parse_condition(g)
    results = [evaluate(i, doc) for i in parsed.items]
    assert evaluate(parsed, doc) == (any(results) if parsed.logic == "or" else all(results))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([(">", "≤"), ("<", "≥")]), st.integers(-5, 5), st.integers(-5, 5))
def test_numeric_order_partitions(ops, x, y):
    doc = DocFields(metadata={"n": x})
    hi, lo = ops
    assert one("n", hi, y, doc) != one("n", lo, y, doc)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2_000_000_000), st.integers(0, 2_000_000_000))
def test_before_after_are_strict_and_disjoint(t1, t2):
    doc = DocFields(metadata={"t": t1})
    b, a = one("t", "before", t2, doc), one("t", "after", t2, doc)
    assert not (b and a)
    assert (b or a) == (t1 != t2)


@settings(max_examples=200, deadline=None)
@given(text(8), text(3))
def test_ascii_and_unicode_forms_agree(value, probe):
    doc = DocFields(metadata={"x": value})
    for uni, ascii_ in (("≠", "!="), ("≥", ">="), ("≤", "<=")):
        assert one("x", uni, probe, doc) == one("x", ascii_, probe, doc)


def test_pushdown_tags_cases():
    p = lambda g: c.pushdown_tags(parse_condition(g))  # noqa: E731
    tag_is = {"name": "tags", "comparison_operator": "is", "value": "mcp"}
    other = {"name": "lang", "comparison_operator": "is", "value": "zh"}
    assert p({"conditions": [tag_is]}) == (("mcp",), True)
    assert p({"logical_operator": "and", "conditions": [tag_is, other]}) == (("mcp",), False)
    assert p({"logical_operator": "or", "conditions": [tag_is, other]}) is None
    assert p({"conditions": [{"name": "tags", "comparison_operator": "in", "value": ["a", "b"]}]}) == (("a", "b"), True)
    assert p({"conditions": [{"name": "tags", "comparison_operator": "contains", "value": "mc"}]}) is None
    assert p({"conditions": [{"name": "tags", "comparison_operator": "is", "value": "3"}]}) is None
    assert p({"conditions": [{"name": "tags", "comparison_operator": "not in", "value": ["a"]}]}) is None
    assert c.pushdown_tags(None) is None


def test_pushdown_tags_only_what_the_search_filter_takes():
    """More distinct tags than the search's filter accepts (50) are not pushed down (the search
    would refuse them); the condition is still evaluated exactly on the results."""
    from openkb.retrieval.filters import MAX_TAGS, parse_filters

    many = [f"t{i}" for i in range(MAX_TAGS + 1)]
    big = {"name": "tags", "comparison_operator": "in", "value": many}
    small = {"name": "tags", "comparison_operator": "is", "value": "mcp"}
    assert c.pushdown_tags(parse_condition({"conditions": [big]})) is None
    assert c.pushdown_tags(parse_condition({"conditions": [big, small]})) == (("mcp",), False)
    at_limit = c.pushdown_tags(parse_condition({"conditions": [{**big, "value": many[:MAX_TAGS]}]}))
    assert at_limit is not None and parse_filters({"tags": list(at_limit[0])}).tags == tuple(many[:MAX_TAGS])
    assert evaluate(parse_condition({"conditions": [{**big, "value": [*many, "mcp"]}]}), DocFields({}, ["mcp"]))


@pytest.mark.parametrize("bad", ["a\x00b", "\ud83d", "\udc00x"])
def test_a_name_or_string_value_postgres_cannot_take_is_refused(bad):
    for cond in (
        {"conditions": [{"name": "tags", "comparison_operator": "is", "value": bad}]},
        {"conditions": [{"name": "lang", "comparison_operator": "in", "value": ["zh", bad]}]},
        {"conditions": [{"name": bad, "comparison_operator": "empty"}]},
    ):
        with pytest.raises(ConditionError):
            parse_condition(cond)


tag_docs = st.builds(
    lambda m, t: DocFields(metadata=m, tags=t),
    st.dictionaries(st.sampled_from(["a", "tags"]), field_values, max_size=2),
    st.lists(st.sampled_from(["x", "y", "3", "3.0", "z"]), max_size=3),
)


@st.composite
def tag_groups(draw, depth=0):
    def leaf():
        return st.one_of(
            condition_dicts(),
            st.builds(
                lambda op, v: {"name": "tags", "comparison_operator": op, "value": v},
                st.sampled_from(["is", "in", "contains", "not in", "="]),
                st.one_of(
                    st.sampled_from(["x", "y", "3"]),
                    st.lists(st.sampled_from(["x", "y", "z", "3"]), min_size=1, max_size=2),
                ),
            ),
        )

    items = draw(
        st.lists(leaf() if depth >= 2 else st.one_of(leaf(), tag_groups(depth=depth + 1)), min_size=1, max_size=3)
    )
    return {"logical_operator": draw(st.sampled_from(["and", "or", None])), "conditions": items}


@settings(max_examples=500, deadline=None)
@given(tag_groups(), tag_docs)
def test_pushdown_tags_never_drops_a_match(g, doc):
    parsed = parse_condition(g)
    pushed = c.pushdown_tags(parsed)
    if pushed is None:
        return
    tags, exact = pushed
    overlap = bool(set(tags) & set(doc.tags))
    if evaluate(parsed, doc):
        assert overlap  # the push-down is a superset: it never hides a matching document
    if exact:
        assert evaluate(parsed, doc) == overlap
