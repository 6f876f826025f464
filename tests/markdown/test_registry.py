"""The one feature registry (openkb/markdown/features.json) drives both sides.

docs/markdown.md#feature-registry: the Python dialect and the editor build read the same file,
so a feature is switched in one edit.
"""

from __future__ import annotations

import json
from pathlib import Path

from openkb.markdown import registry
from openkb.markdown.normalize import normalize

ROOT = Path(__file__).resolve().parents[2]
JSON = ROOT / "openkb/markdown/features.json"


def test_editor_build_imports_the_same_file() -> None:
    src = (ROOT / "web/src/editor/features.ts").read_text()
    assert "from '../../../openkb/markdown/features.json'" in src
    assert (ROOT / "web/src/editor/features.ts").parent.joinpath(
        "../../../openkb/markdown/features.json"
    ).resolve() == JSON
    # the shipped editor (and the parity script) are built through the registry, not by hand
    crepe = (ROOT / "web/src/editor/crepe.ts").read_text()
    assert "FEATURES.crepe_features" in crepe and "new Crepe(" in crepe
    assert "createCrepe" in (ROOT / "web/src/editor/Editor.ts").read_text()
    assert "/src/editor/crepe.ts" in (ROOT / "web/scripts/parity.mjs").read_text()


def test_python_registry_is_the_json() -> None:
    data = json.loads(JSON.read_text())
    assert [f.key for f in registry.EDITOR_FEATURES] == [f["key"] for f in data["features"]]
    assert dict(registry.CREPE_FEATURES) == {k: v for k, v in data["crepe_features"].items() if not k.startswith("$")}
    assert registry.SERIALIZER["bullet"] == data["serializer"]["bullet"]


def test_a_feature_needing_a_crepe_feature_follows_it(monkeypatch) -> None:
    for f in registry.EDITOR_FEATURES:
        for r in f.requires:
            assert r in registry.CREPE_FEATURES
    math = registry.feature("math_block")
    assert math.requires == ("latex",) and math.enabled == registry.CREPE_FEATURES["latex"]
    off = dict(registry.CREPE_FEATURES, latex=False)
    spec = next(d for d in registry.REGISTRY["features"] if d["key"] == "math_block")
    assert registry._feature(spec).enabled is True  # with the shipped switches
    # the same entry with Crepe's latex switched off is disabled
    monkeypatch.setattr(registry, "CREPE_FEATURES", off)
    assert registry._feature(spec).enabled is False


def test_serializer_options_reach_the_normalizer() -> None:
    bullet, other = registry.bullet_markers()
    assert normalize("* a\n\n+ b") == f"{bullet} a\n\n{other} b\n\n"
    assert normalize("a\n\n***\n\nb") == f"a\n\n{registry.thematic_break()}\n\nb\n"


def test_menus_have_both_languages() -> None:
    data = json.loads(JSON.read_text())
    entries = [v for k, v in data["toolbar"].items() if not k.startswith("$")]
    for group in (v for k, v in data["slash_menu"].items() if not k.startswith("$")):
        entries.append(group)
        entries += list(group["items"].values())
    for e in entries:
        assert set(e["label"]) == {"en", "zh-CN"}, e
