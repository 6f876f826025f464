"""The optional MinerU PDF converter (openkb/importing/mineru.py, docs/importing.md#mineru).

MinerU's models cannot be present on a CI machine (they come from HuggingFace or ModelScope,
and the appliance never downloads at run time), so a real MinerU run is not tested here. What
is tested: the detection against MinerU's own configuration rules, the ``OPENKB_PDF_CONVERTER``
switch, and the invocation contract. For the contract a small executable named ``mineru`` is put
on ``PATH``: it stands in for MinerU's CLI and writes exactly the layout MinerU's source writes
for ``mineru -p <dir>/input.pdf -o <out> -b pipeline -m auto`` (read from opendatalab/MinerU:
``mineru/cli/common.py`` ``prepare_env`` and ``_process_output`` — ``<out>/<stem>/<method>/
<stem>.md`` with the images in ``images/`` beside it, linked as ``![](images/<file>)`` by
``mineru/backend/pipeline/pipeline_middle_json_mkcontent.py``; ``mineru/cli/output_paths.py``;
the model source and config file rules of ``mineru/utils/config_reader.py`` and
``mineru/utils/models_download_utils.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import sys
import time
from pathlib import Path

import pytest

from openkb.config import reset_settings_cache
from openkb.errors import ConverterUnavailable
from openkb.importing import mineru
from openkb.importing.prepare import prepare_bytes
from openkb.importing.sniff import sniff
from tests.importing import files

# Stands in for MinerU's CLI (see the module docstring): parses the flags OpenKB passes, logs
# its argv and environment, and writes MinerU's output layout; STANDIN_MODE picks a failure.
STANDIN = r"""#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
opt = {{args[i]: args[i + 1] for i in range(0, len(args) - 1, 2)}}
with open(os.environ["STANDIN_LOG"], "w") as f:
    json.dump({{"argv": args, "env": {{k: os.environ.get(k) for k in
        ("MINERU_MODEL_SOURCE", "MINERU_TOOLS_CONFIG_JSON", "HF_HUB_OFFLINE")}},
        "cwd": os.getcwd()}}, f)
mode = os.environ.get("STANDIN_MODE", "ok")
if mode == "fail":
    sys.stderr.write("Traceback ...\nRuntimeError: layout model failed\n")
    sys.exit(3)
if mode == "hang":  # like mineru, which starts a local mineru-api child, then never answers
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.environ["STANDIN_LOG"] + ".child", "w") as f:
        f.write(str(child.pid))
    time.sleep(120)
stem = os.path.splitext(os.path.basename(opt["-p"]))[0]
md_dir = os.path.join(opt["-o"], stem, opt["-m"])  # pipeline backend: <out>/<stem>/<method>
os.makedirs(os.path.join(md_dir, "images"), exist_ok=True)
if mode == "nomd":
    sys.exit(0)
with open(os.path.join(md_dir, "images", "3f2a9c.jpg"), "wb") as f:
    f.write(b"\xff\xd8\xff\xe0 fake jpeg")
with open(os.path.join(md_dir, stem + ".md"), "w", encoding="utf-8") as f:
    f.write("# Quarterly numbers\n\nLaid out by MinerU.\n\n![](images/3f2a9c.jpg)\n\n"
            "<table><tr><td>Region</td><td>Sales</td></tr><tr><td>North</td><td>100</td></tr></table>\n")
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A clean MinerU-less environment; helpers install the stand-in and local models."""
    for var in ("OPENKB_PDF_CONVERTER", "OPENKB_MINERU_BIN", "OPENKB_MINERU_TIMEOUT_SECONDS", "MINERU_MODEL_SOURCE"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("MINERU_TOOLS_CONFIG_JSON", str(tmp_path / "mineru.json"))
    monkeypatch.setenv("STANDIN_LOG", str(tmp_path / "standin.json"))
    reset_settings_cache()
    yield _Env(tmp_path, monkeypatch)
    reset_settings_cache()


class _Env:
    def __init__(self, root: Path, mp: pytest.MonkeyPatch) -> None:
        self.root, self.mp = root, mp

    def install(self) -> Path:
        bindir = self.root / "bin"
        bindir.mkdir(exist_ok=True)
        exe = bindir / "mineru"
        exe.write_text(STANDIN.format(python=sys.executable))
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        self.mp.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
        return exe

    def local_models(self) -> Path:
        models = self.root / "models" / "pipeline"
        models.mkdir(parents=True, exist_ok=True)
        (self.root / "mineru.json").write_text(json.dumps({"models-dir": {"pipeline": str(models), "vlm": ""}}))
        self.mp.setenv("MINERU_MODEL_SOURCE", "local")
        return models

    def set(self, name: str, value: str) -> None:
        self.mp.setenv(name, value)
        reset_settings_cache()

    def log(self) -> dict:
        return json.loads((self.root / "standin.json").read_text())


PDF = sniff(b"%PDF-1.7\n", "x.pdf")


def test_absent_mineru_means_the_builtin_converter(env):
    status = mineru.detect()
    assert not status.usable and "no `mineru` executable on PATH" in status.reason
    assert mineru.choose(PDF).name == "pdfplumber"
    assert prepare_bytes("numbers.pdf", files.pdf_with_table()).converter == "pdfplumber"


def test_installed_but_not_set_up_for_local_models_means_builtin_with_the_reason(env):
    env.install()
    status = mineru.detect()  # MINERU_MODEL_SOURCE unset: MinerU would download on first use
    assert not status.usable and "MINERU_MODEL_SOURCE is unset, not `local`" in status.reason
    assert mineru.choose(PDF).name == "pdfplumber"

    env.mp.setenv("MINERU_MODEL_SOURCE", "local")  # but no config file naming the models
    assert "mineru.json does not exist" in mineru.detect().reason
    (env.root / "mineru.json").write_text(json.dumps({"models-dir": {"pipeline": str(env.root / "gone")}}))
    status = mineru.detect()
    assert not status.usable and "does not exist" in status.reason and "gone" in status.reason
    assert mineru.choose(PDF).name == "pdfplumber"

    env.local_models()
    status = mineru.detect()
    assert status.usable, status.reason
    assert mineru.choose(PDF).name == "mineru"
    assert mineru.choose(sniff(b"# hi\n", "a.md")).name == "markdown"  # only PDFs go to MinerU


def test_builtin_switch_and_explicit_bin(env):
    exe = env.install()
    env.local_models()
    env.set("OPENKB_PDF_CONVERTER", "builtin")
    assert mineru.choose(PDF).name == "pdfplumber"
    env.set("OPENKB_PDF_CONVERTER", "auto")
    env.set("OPENKB_MINERU_BIN", str(env.root / "nowhere" / "mineru"))
    assert "OPENKB_MINERU_BIN=" in mineru.detect().reason
    env.set("OPENKB_MINERU_BIN", str(exe))
    assert mineru.detect().executable == str(exe)


def test_mineru_asked_for_but_absent_is_refused_with_a_code(env):
    env.set("OPENKB_PDF_CONVERTER", "mineru")
    with pytest.raises(ConverterUnavailable) as exc:
        mineru.choose(PDF)
    assert exc.value.code == "CONVERTER_UNAVAILABLE" and "no `mineru` executable" in exc.value.detail
    p = prepare_bytes("numbers.pdf", files.pdf_with_table())  # the file fails, with the reason
    assert p.code == "CONVERTER_UNAVAILABLE" and p.markdown is None
    assert prepare_bytes("a.md", b"# still imported\n").markdown  # other files are not affected


def test_a_run_gives_markdown_and_assets_through_the_import_mode(env, monkeypatch):
    env.install()
    env.local_models()
    monkeypatch.setenv("MINERU_MODEL_SOURCE", "LOCAL")  # MinerU lower-cases it; the child gets `local`
    p = prepare_bytes("reports/numbers.pdf", files.pdf_with_table())
    assert p.error is None and p.converter == "mineru"
    assert "Quarterly numbers" in p.markdown and "Laid out by MinerU." in p.markdown
    assert "North" in p.markdown and "<table>" not in p.markdown  # repaired to the dialect
    assert p.assets == [("3f2a9c.jpg", b"\xff\xd8\xff\xe0 fake jpeg", "image/jpeg")]
    assert "images/" not in p.markdown and p.confidence == 0.9
    assert p.source is not None  # the original PDF is kept, as for every converter

    log = env.log()
    assert log["env"] == {
        "MINERU_MODEL_SOURCE": "local",
        "MINERU_TOOLS_CONFIG_JSON": str(env.root / "mineru.json"),
        "HF_HUB_OFFLINE": "1",
    }
    argv = log["argv"]
    assert (
        argv[0] == "-p"
        and argv[1].endswith("/input.pdf")
        and argv[2:] == ["-o", argv[3], "-b", "pipeline", "-m", "auto"]
    )
    assert not Path(log["cwd"]).exists()  # the temporary folder is gone


@pytest.mark.parametrize(
    ("mode", "needle"),
    [("fail", "exit status 3: RuntimeError: layout model failed"), ("nomd", "no Markdown written")],
)
def test_a_failed_run_falls_back_to_the_builtin_converter_with_a_warning(env, mode, needle):
    env.install()
    env.local_models()
    env.mp.setenv("STANDIN_MODE", mode)
    p = prepare_bytes("numbers.pdf", files.pdf_with_table())
    assert p.error is None and re.search(r"\| North +\| 100 +\|", p.markdown)  # pdfplumber's GFM table
    assert p.warnings[0] == f"MinerU failed ({needle}); converted with the built-in PDF converter"


def test_a_run_past_its_time_is_stopped_with_its_children_and_falls_back(env):
    env.install()
    env.local_models()
    env.mp.setenv("STANDIN_MODE", "hang")
    env.set("OPENKB_MINERU_TIMEOUT_SECONDS", "4")
    conv = mineru.choose(PDF)
    out = conv.convert(files.pdf_with_table(), "numbers.pdf")
    assert out.warnings[0] == "MinerU failed (no result within 4 s; stopped); converted with the built-in PDF converter"
    assert "| North | 100 |" in out.markdown
    child = int(Path(str(env.root / "standin.json") + ".child").read_text())
    try:
        assert _ends(child), "the child MinerU started (its local mineru-api) outlived the time-out"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)  # the test's own process, if the assertion failed


def test_the_builtin_refusal_still_fails_the_file(env):
    env.install()
    env.local_models()
    env.mp.setenv("STANDIN_MODE", "fail")
    p = prepare_bytes("secret.pdf", files.encrypted_pdf())
    assert p.code == "CONVERSION_FAILED" and p.error == "password-protected PDF"


def _ends(pid: int) -> bool:
    """SIGKILL is delivered asynchronously: wait (bounded) until the process is gone or a zombie."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False
