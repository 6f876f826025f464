"""Chinese word segmentation (openkb/retrieval/segment.py): loaded once, quietly, cached in the home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import json, sys
from openkb.retrieval import segment
from openkb.retrieval.highlight import highlight_spans
first = segment.warm()
again = segment.warm()
text = "玩家以水枪、小枪、锤子或是水炸弹泡封敌人"
print(json.dumps({"first": first, "again": again, "words": segment.cut("玩家用什么泡封敌人"),
                  "spans": highlight_spans("玩家用什么泡封敌人？", text)}))
"""


def _run(home: Path) -> tuple[dict, str]:
    import json

    env = {k: v for k, v in os.environ.items() if k != "OPENKB_HOME"} | {"OPENKB_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_the_dictionary_loads_once_without_a_word_on_stderr_and_caches_in_the_home(tmp_path):
    result, stderr = _run(tmp_path)
    # jieba used to print "Building prefix dict from the default dictionary ..." and three more lines
    assert stderr == ""
    assert result["first"] > 0 and result["again"] == 0.0
    assert "玩家" in result["words"] and "敌人" in result["words"]
    text = "玩家以水枪、小枪、锤子或是水炸弹泡封敌人"
    marked = {text[a:b] for a, b in result["spans"]}
    assert {"玩家", "敌人"} <= marked
    # the parsed dictionary is kept in the appliance's home, not in a shared temp folder
    assert (tmp_path / "cache" / "jieba.cache").stat().st_size > 1_000_000
    again, stderr = _run(tmp_path)
    assert stderr == "" and again["words"] == result["words"]


def test_an_unwritable_home_falls_back_to_the_temp_folder(tmp_path):
    home = tmp_path / "home"
    home.write_text("a file where the home should be")  # mkdir of home/cache fails
    result, stderr = _run(home)
    assert stderr == "" and "敌人" in result["words"]
