"""Re-record ``tests/markdown/milkdown_corpus.json`` from real Milkdown (not run by pytest).

    cd tests/markdown/milkdown_oracle && npm install && python record.py cases.txt

``cases.txt`` holds inputs separated by lines of ``====``. Each case is fed to Crepe 7.22.1
running headless under jsdom (``oracle.mjs``) and its ``getMarkdown()`` is stored next to the
input. Cases our normalizer does not match yet go to ``divergent`` with both outputs, so the
gap is visible instead of hidden.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from openkb.markdown import normalize  # noqa: E402


def main() -> None:
    cases = Path(sys.argv[1]).read_text().split("\n====\n")
    proc = subprocess.Popen(
        ["node", str(HERE / "oracle.mjs")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=HERE,
    )
    assert proc.stdin and proc.stdout
    matched, divergent = [], []
    for md in cases:
        proc.stdin.write(json.dumps(md) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        if "ok" not in reply:
            continue
        expected = reply["ok"]
        got = normalize(md)
        (matched if got == expected else divergent).append(
            {"input": md, "milkdown": expected, **({} if got == expected else {"ours": got})}
        )
    proc.stdin.close()
    out = {"milkdown": "@milkdown/crepe 7.22.1 (jsdom)", "cases": matched, "divergent": divergent}
    (HERE.parent / "milkdown_corpus.json").write_text(json.dumps(out, ensure_ascii=False, indent=1))
    print(f"{len(matched)} matched, {len(divergent)} divergent")


if __name__ == "__main__":
    main()
