"""MinerU as the PDF converter, when it is installed with local models (docs/importing.md#mineru).

MinerU (``pip install mineru``, not a dependency of OpenKB) lays out PDFs with models that it
otherwise fetches from HuggingFace or ModelScope on first use. The appliance never downloads at
run time, so MinerU is used only when both hold:

* its ``mineru`` executable exists (``OPENKB_MINERU_BIN``, else ``mineru`` on ``PATH``);
* it is set up for local models: ``MINERU_MODEL_SOURCE=local`` and its config file
  (``MINERU_TOOLS_CONFIG_JSON``, else ``~/mineru.json``) names a ``models-dir.pipeline`` folder
  that exists. These are MinerU's own variables and file (its ``mineru/utils/config_reader.py``
  and ``mineru/utils/models_download_utils.py``): with the source ``local`` MinerU reads the
  folder from ``models-dir`` and never calls a download.

``OPENKB_PDF_CONVERTER`` chooses: ``auto`` (MinerU when usable, else the built-in pdfplumber
converter), ``builtin``, or ``mineru`` (a PDF fails with ``CONVERTER_UNAVAILABLE`` and the
reason when MinerU is not usable: asked for, never silently replaced).

A run is ``mineru -p <tmp>/input.pdf -o <tmp>/out -b pipeline -m auto`` in a private temporary
folder, in its own process group, with ``MINERU_MODEL_SOURCE=local`` forced in the child's
environment (whatever the parent's says, so a later change of environment cannot turn a run into
a download) and a bounded time (``OPENKB_MINERU_TIMEOUT_SECONDS``). MinerU writes
``<out>/<stem>/<method>/<stem>.md`` and the images it cut out to ``images/`` beside it, linked as
``![](images/<file>)`` (``mineru/cli/common.py`` ``prepare_env``/``_process_output``,
``mineru/cli/output_paths.py``). The images become assets like every converter's; the Markdown
goes through the dialect's import mode in ``prepare`` like every converter's (its HTML tables
are converted or kept as marked blocks there, with warnings).

The trap: a failed MinerU run must not lose the file. Any failure (exit status, time-out, no
Markdown written, an unreadable output) falls back to the built-in converter with a warning
naming the cause; only the built-in converter's own refusal (a password-protected PDF) fails
the file.
"""

from __future__ import annotations

import json
import mimetypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from openkb.errors import ConverterUnavailable
from openkb.importing import converters
from openkb.importing.converters import MAX_PDF_IMAGES, Converted, ConvertedAsset, Converter, PdfConverter
from openkb.importing.sniff import Sniffed

if TYPE_CHECKING:
    from openkb.config import Settings

__all__ = ["MinerUConverter", "MinerUStatus", "choose", "detect", "pdf_converter"]

BIN_ENV = "OPENKB_MINERU_BIN"
MODEL_SOURCE_ENV = "MINERU_MODEL_SOURCE"  # MinerU's own variable
CONFIG_ENV = "MINERU_TOOLS_CONFIG_JSON"  # MinerU's own variable; default ~/mineru.json
BACKEND = "pipeline"  # needs only models-dir.pipeline (the default hybrid backend needs the VLM too)
METHOD = "auto"
STEM = "input"  # the file MinerU is given is <tmp>/input.pdf, so its output names are known
_IMAGE_REF = re.compile(r"\]\(images/([^)\s]+)\)")


@dataclass(frozen=True)
class MinerUStatus:
    """Whether MinerU can run here without downloading, and if not, why (``openkb`` reports it)."""

    usable: bool
    reason: str
    executable: str | None = None
    config: Path | None = None


def _settings() -> Settings:
    """The configuration, imported when a PDF is converted, not when this module is: it is on the
    import path of every ``--jobs`` worker (``importing.prepare``), and pydantic-settings is
    most of a worker's start (a third of a second), paid again by each worker of each import."""
    from openkb.config import get_settings

    return get_settings()


def _config_path() -> Path:
    """MinerU's config file, found the way its ``config_reader.read_config`` finds it."""
    name = os.environ.get(CONFIG_ENV, "mineru.json")
    return Path(name) if os.path.isabs(name) else Path(os.path.expanduser("~")) / name


def detect() -> MinerUStatus:
    """Read the environment every time (cheap: a PATH lookup, a stat, one small JSON file), so a
    MinerU installed or configured later is picked up without a restart."""
    configured = _settings().openkb_mineru_bin
    if configured:
        exe = shutil.which(configured) if os.sep not in configured else configured
        if not exe or not os.path.isfile(exe) or not os.access(exe, os.X_OK):
            return MinerUStatus(False, f"{BIN_ENV}={configured} is not an executable file")
    else:
        exe = shutil.which("mineru")
        if not exe:
            return MinerUStatus(False, f"no `mineru` executable on PATH (install MinerU or set {BIN_ENV})")
    source = os.environ.get(MODEL_SOURCE_ENV, "").strip().lower()
    if source != "local":
        return MinerUStatus(
            False,
            f"{MODEL_SOURCE_ENV} is {source or 'unset'}, not `local`: MinerU would download its models "
            "from HuggingFace or ModelScope at run time",
            exe,
        )
    cfg = _config_path()
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return MinerUStatus(False, f"MinerU's config file {cfg} does not exist (it names the local models)", exe)
    except (OSError, ValueError) as exc:
        return MinerUStatus(False, f"MinerU's config file {cfg} is unreadable: {type(exc).__name__}", exe, cfg)
    models = data.get("models-dir") if isinstance(data, dict) else None
    root = models.get(BACKEND) if isinstance(models, dict) else None
    if not isinstance(root, str) or not root.strip():
        return MinerUStatus(False, f"{cfg} names no models-dir.{BACKEND} folder", exe, cfg)
    path = Path(os.path.expanduser(root.strip()))
    if not path.is_dir():
        return MinerUStatus(False, f"models-dir.{BACKEND} of {cfg} ({path}) does not exist", exe, cfg)
    return MinerUStatus(True, f"MinerU at {exe} with local models in {path}", exe, cfg)


class MinerUConverter:
    """PDF -> Markdown by a MinerU run; falls back to ``fallback`` (the built-in converter)."""

    name = "mineru"

    def __init__(self, status: MinerUStatus, fallback: Converter | None = None, timeout: float | None = None) -> None:
        self.status = status
        self.fallback = fallback or PdfConverter()
        self.timeout = timeout if timeout is not None else _settings().openkb_mineru_timeout_seconds

    def supports(self, sniffed: Sniffed) -> bool:
        return sniffed.kind == "pdf"

    def convert(self, data: bytes, name: str) -> Converted:
        try:
            return self._run(data)
        except _Failed as exc:
            out = self.fallback.convert(data, name)
            out.warnings.insert(0, f"MinerU failed ({exc}); converted with the built-in PDF converter")
            return out

    def _run(self, data: bytes) -> Converted:
        assert self.status.executable and self.status.config
        with tempfile.TemporaryDirectory(prefix="openkb-mineru-") as tmp:
            src, out = Path(tmp) / f"{STEM}.pdf", Path(tmp) / "out"
            src.write_bytes(data)
            env = dict(os.environ)
            env[MODEL_SOURCE_ENV] = "local"  # forced: never a download, whatever changed since detect()
            env[CONFIG_ENV] = str(self.status.config)  # the file detect() checked, whatever HOME is
            env["HF_HUB_OFFLINE"] = "1"
            cmd = [self.status.executable, "-p", str(src), "-o", str(out), "-b", BACKEND, "-m", METHOD]
            try:
                proc = subprocess.Popen(
                    cmd,
                    cwd=tmp,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    start_new_session=True,  # its own group: a time-out ends the mineru-api it starts too
                )
            except OSError as exc:
                raise _Failed(f"cannot start {self.status.executable}: {exc.strerror or exc}") from None
            try:
                _, err = proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise _Failed(f"no result within {self.timeout:g} s; stopped") from None
            if proc.returncode != 0:
                tail = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                raise _Failed(f"exit status {proc.returncode}: {tail[0][:200]}".rstrip(": "))
            return _read_output(out)


class _Failed(Exception):
    """A MinerU run gave no usable result (the reason is the message); handled by the fallback."""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _read_output(out: Path) -> Converted:
    """``<out>/input/<method>/input.md`` and the ``images/`` it links; a backend other than the one
    asked for writes another method folder, so any ``<out>/input/*/input.md`` is accepted."""
    found = sorted((out / STEM).glob(f"*/{STEM}.md"))
    if not found:
        raise _Failed("no Markdown written")
    md_path = found[0]
    try:
        markdown = md_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _Failed(f"unreadable Markdown: {type(exc).__name__}") from None
    images = md_path.parent / "images"
    assets: list[ConvertedAsset] = []
    warnings: list[str] = []
    kept: set[str] = set()
    for ref in dict.fromkeys(_IMAGE_REF.findall(markdown)):
        path = images / ref
        if Path(ref).name != ref or not path.is_file():
            warnings.append(f"MinerU linked an image it did not write: images/{ref}")
            continue
        if len(assets) >= MAX_PDF_IMAGES:
            warnings.append(f"more than {MAX_PDF_IMAGES} images; the rest are left out")
            break
        mime = mimetypes.guess_type(ref)[0] or "application/octet-stream"
        assets.append(ConvertedAsset(ref, path.read_bytes(), mime))
        kept.add(ref)
    # assets are named flat, as every converter's: ![](images/x.jpg) -> ![](x.jpg)
    markdown = _IMAGE_REF.sub(lambda m: f"]({m.group(1)})" if m.group(1) in kept else m.group(0), markdown)
    return Converted(markdown, assets, warnings, confidence=0.9)


def pdf_converter() -> Converter:
    """The PDF converter ``OPENKB_PDF_CONVERTER`` selects (module docstring)."""
    choice = _settings().openkb_pdf_converter
    if choice == "builtin":
        return PdfConverter()
    status = detect()
    if status.usable:
        return MinerUConverter(status)
    if choice == "mineru":
        raise ConverterUnavailable(f"OPENKB_PDF_CONVERTER=mineru but MinerU is not usable: {status.reason}")
    return PdfConverter()


def choose(sniffed: Sniffed) -> Converter:
    """``converters.choose``, with the PDF converter chosen by ``pdf_converter``."""
    conv = converters.choose(sniffed)
    if conv.name == PdfConverter.name:
        return pdf_converter()
    return conv
