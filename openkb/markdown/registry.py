"""What the locked editor (Milkdown Crepe 7.22.1 as OpenKB configures it) can hold.

The table lives in ``features.json`` next to this module, the ONE registry that the editor
build reads too (``web/src/editor/features.ts``): which Crepe features and OpenKB plugins are
on, the serializer options, toolbar and slash-menu entries, and the Markdown features below
(docs/markdown.md#feature-registry). Changing a feature is one edit there. Server-side every
consumer asks this module instead of hard-coding syntax: ``validate`` rejects a token whose
feature is disabled or unknown, ``normalize`` is the serializer of the enabled ones (and
follows ``serializer``: bullet and thematic-break markers), and ``extract`` only indexes
features with ``supports_search_extraction``.

A feature that ``requires`` a Crepe feature (``latex``, ``table``...) is enabled only when that
Crepe feature is on: switching ``crepe_features.latex`` off disables math everywhere at once.

Crepe UI features that carry no Markdown syntax (Cursor, Toolbar, Placeholder, BlockEdit /
slash menu, LinkTooltip) are not Markdown features: they cannot make a document valid or
invalid.

Trap: the JSON is package data (pyproject ``[tool.setuptools.package-data]``); it is read once
at import, so tests that want another configuration build an ``EditorFeature`` themselves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType
from typing import Any

__all__ = [
    "CREPE_FEATURES",
    "EDITOR_FEATURES",
    "OPENKB_PLUGINS",
    "REGISTRY",
    "SERIALIZER",
    "TOKEN_FEATURES",
    "EditorFeature",
    "bullet_markers",
    "enabled_features",
    "feature",
    "is_enabled",
    "thematic_break",
]


@dataclass(frozen=True, slots=True)
class EditorFeature:
    key: str
    label: str
    milkdown_plugin: str
    enabled: bool
    markdown_syntax: tuple[str, ...]
    supports_parse: bool = True
    supports_render: bool = True
    supports_serialize: bool = True
    supports_search_extraction: bool = True
    requires: tuple[str, ...] = ()  # Crepe features it needs (crepe_features keys)


def _load() -> dict[str, Any]:
    raw = files(__package__).joinpath("features.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(raw)
    return data


def _without_comments(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if not k.startswith("$")}


REGISTRY: dict[str, Any] = _load()
CREPE_FEATURES: MappingProxyType[str, bool] = MappingProxyType(
    {k: bool(v) for k, v in _without_comments(REGISTRY["crepe_features"]).items()}
)
SERIALIZER: MappingProxyType[str, Any] = MappingProxyType(_without_comments(REGISTRY.get("serializer", {})))
OPENKB_PLUGINS: MappingProxyType[str, bool] = MappingProxyType(
    {k: bool(v) for k, v in _without_comments(REGISTRY.get("openkb_plugins", {})).items()}
)


def _feature(d: dict[str, Any]) -> EditorFeature:
    requires = tuple(d.get("requires", ()))
    unknown = [r for r in requires if r not in CREPE_FEATURES]
    if unknown:
        raise ValueError(f"features.json: {d['key']!r} requires unknown Crepe feature(s) {unknown}")
    return EditorFeature(
        key=d["key"],
        label=d["label"],
        milkdown_plugin=d["milkdown_plugin"],
        enabled=bool(d["enabled"]) and all(CREPE_FEATURES[r] for r in requires),
        markdown_syntax=tuple(d["markdown_syntax"]),
        supports_parse=d.get("supports_parse", True),
        supports_render=d.get("supports_render", True),
        supports_serialize=d.get("supports_serialize", True),
        supports_search_extraction=d.get("supports_search_extraction", True),
        requires=requires,
    )


EDITOR_FEATURES: tuple[EditorFeature, ...] = tuple(_feature(d) for d in REGISTRY["features"])

_BY_KEY = {f.key: f for f in EDITOR_FEATURES}

# markdown-it token type -> feature key. A token type missing here is a construct outside the
# registry, which validate() reports as feature "unknown".
TOKEN_FEATURES: dict[str, str] = _without_comments(REGISTRY["tokens"])
_missing = sorted(set(TOKEN_FEATURES.values()) - set(_BY_KEY))
if _missing:  # a typo in the JSON must fail at import, not read as "unknown construct"
    raise ValueError(f"features.json: tokens name unknown features {_missing}")


def feature(key: str) -> EditorFeature:
    """Raises KeyError for an unknown key: a typo must not read as 'disabled'."""
    return _BY_KEY[key]


def enabled_features() -> tuple[EditorFeature, ...]:
    return tuple(f for f in EDITOR_FEATURES if f.enabled)


def is_enabled(key: str) -> bool:
    f = _BY_KEY.get(key)
    return bool(f and f.enabled)


def bullet_markers() -> tuple[str, str]:
    """(bullet, bulletOther) as mdast-util-to-markdown picks them from the serializer options.

    bulletOther is what an adjacent list switches to; it defaults to ``-`` for ``*`` and to
    ``*`` otherwise (mdast-util-to-markdown ``checkBulletOther``).
    """
    bullet = str(SERIALIZER.get("bullet", "*"))
    other = str(SERIALIZER.get("bulletOther", "-" if bullet == "*" else "*"))
    return bullet, other


def thematic_break() -> str:
    """The thematic break as written: ``rule`` repeated ``ruleRepetition`` times."""
    rule = str(SERIALIZER.get("rule", "*"))
    n = int(SERIALIZER.get("ruleRepetition", 3))
    sep = " " if SERIALIZER.get("ruleSpaces") else ""
    return sep.join([rule] * n)
