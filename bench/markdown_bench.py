"""Timing for the Markdown dialect path that every save and import goes through.

The document is built deterministically (seeded) so that figures from two runs or two
machines are comparable; it mixes Chinese and English because CJK text is what makes table
padding and escaping differ from naive implementations.

Run: ``python bench/markdown_bench.py``; the last line is a JSON summary.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openkb.markdown import ensure_valid, normalize, validate, validate_and_normalize  # noqa: E402
from openkb.markdown.parser import parse  # noqa: E402

ZH = "知识库文档编辑器支持标题列表表格代码公式链接图片搜索权限协作版本历史自动保存导入导出"
EN = (
    "the quick brown fox jumps over lazy dog markdown editor search index version history "
    "permission workspace folder export import table code math link image"
).split()
UUIDS = [f"123e4567-e89b-12d3-a456-4266141740{i:02d}" for i in range(40)]


def _zh(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ZH) for _ in range(n))


def _en(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(EN) for _ in range(n))


def _sentence(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(3, 7)):
        kind = rng.random()
        if kind < 0.35:
            parts.append(_zh(rng, rng.randint(4, 16)) + "，")
        elif kind < 0.6:
            parts.append(_en(rng, rng.randint(2, 8)))
        elif kind < 0.68:
            parts.append("**" + _zh(rng, 4) + "**")
        elif kind < 0.74:
            parts.append("*" + _en(rng, 2) + "*")
        elif kind < 0.8:
            parts.append("`" + rng.choice(EN) + "()`")
        elif kind < 0.86:
            u = rng.choice(UUIDS)
            parts.append(f"[{_zh(rng, 4)}](openkb://document/{u})")
        elif kind < 0.9:
            parts.append(f"[{rng.choice(EN)}](https://example.com/{rng.choice(EN)})")
        elif kind < 0.94:
            parts.append(f"$x_{rng.randint(1, 9)}^2 + y$")
        else:
            parts.append("~~" + _en(rng, 2) + "~~")
    return " ".join(parts) + "。"


def _block(rng: random.Random, i: int) -> str:
    kind = i % 10
    if kind == 0:
        return "#" * rng.randint(1, 3) + " " + _zh(rng, 6) + " " + _en(rng, 2)
    if kind in (1, 2, 5, 8):
        return _sentence(rng) + "\n" + _sentence(rng)
    if kind == 3:
        return "\n".join("* " + _sentence(rng) for _ in range(rng.randint(2, 5)))
    if kind == 4:
        rows = ["| 名称 | Name | 数量 |", "| --- | :-: | --: |"]
        for _ in range(rng.randint(2, 6)):
            rows.append(f"| {_zh(rng, rng.randint(1, 6))} | {_en(rng, 2)} | {rng.randint(1, 999)} |")
        return "\n".join(rows)
    if kind == 6:
        body = "\n".join(f"def f{j}(x):\n    return x * {j}" for j in range(rng.randint(1, 4)))
        return "```python\n" + body + "\n```"
    if kind == 7:
        return "\n".join(
            f"{j + 1}. " + ("[x] " if rng.random() < 0.3 else "") + _sentence(rng) for j in range(rng.randint(2, 4))
        )
    return f"$$\n\\sum_{{i=1}}^{{{rng.randint(2, 9)}}} x_i\n$$\n\n> {_sentence(rng)}"


def build_document(target_bytes: int, seed: int = 42) -> str:
    rng = random.Random(seed)
    blocks: list[str] = []
    size = 0
    i = 0
    while size < target_bytes:
        b = _block(rng, i)
        blocks.append(b)
        size += len(b.encode()) + 2
        i += 1
    u = UUIDS[0]
    blocks.append(f"![{_zh(rng, 2)}](asset://{u}) 图片")
    return "\n\n".join(blocks) + "\n"


def _time_interleaved(fns: dict, arg: str, repeat: int) -> dict[str, list[float]]:
    """Each round runs every function once, so all of them see the same machine load."""
    for fn in fns.values():
        fn(arg)  # warm caches (parser construction, regexes)
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(arg)
            out[name].append((time.perf_counter() - t0) * 1000.0)
    return out


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[k]


def main() -> None:
    summary: dict[str, float] = {}
    for label, size, repeat in (("10k", 10_000, 60), ("100k", 100_000, 25)):
        doc = build_document(size)
        canonical = normalize(doc)
        ensure_valid(canonical)

        def both(md: str) -> str:
            ensure_valid(md)
            return normalize(md)

        results = _time_interleaved(
            {
                "parse": parse,
                "validate": validate,
                "normalize": normalize,
                "validate+normalize": both,
                "validate_and_normalize": validate_and_normalize,
            },
            doc,
            repeat,
        )
        print(f"{label}: {len(doc.encode())} bytes, {len(doc)} chars, {repeat} runs")
        for name, vals in results.items():
            print(f"  {name:<24} p50 {statistics.median(vals):7.2f} ms   p95 {_p(vals, 0.95):7.2f} ms")
        # what a save runs (prepare_markdown -> validate_and_normalize) against a bare parse
        summary[f"parse{label}_p95_ms"] = round(_p(results["parse"], 0.95), 2)
        summary[f"save_step{label}_p95_ms"] = round(_p(results["validate_and_normalize"], 0.95), 2)
        summary[f"save_step_over_parse{label}_p50"] = round(
            statistics.median(results["validate_and_normalize"]) / statistics.median(results["parse"]), 3
        )
        summary[f"save_step_over_parse{label}_p95"] = round(
            _p(results["validate_and_normalize"], 0.95) / _p(results["parse"], 0.95), 3
        )
        if label == "100k":
            summary["markdown100k_p95_ms"] = round(_p(results["validate+normalize"], 0.95), 2)
            summary["normalize_over_parse_ratio"] = round(
                statistics.median(results["normalize"]) / statistics.median(results["parse"]), 3
            )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
