"""MCP Inspector's CLI (a real third-party client, pinned in tests/mcp/inspector/package.json)
against the live server: tools/list and a tool call with a personal access token.

``npx --no-install`` runs only the pinned copy; the fixture installs it from the lockfile
(``npm ci``) when ``node_modules`` is missing. Without node/npm on the machine the test is
skipped with that reason (CI installs Node).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.api.helpers import make_user_with_pat

HERE = Path(__file__).parent / "inspector"


@pytest.fixture(scope="module")
def inspector() -> Path:
    if shutil.which("npx") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    if not (HERE / "node_modules" / ".bin" / "mcp-inspector").exists():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=HERE,
            check=True,
            capture_output=True,
            timeout=600,
        )
    return HERE


def inspect(cwd: Path, home: Path, url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "npx",
            "--no-install",
            "inspector",
            "--cli",
            url,
            *args,
            "--header",
            f"Authorization: Bearer {token}",
            "--format",
            "json",
        ],
        cwd=cwd,
        env={"PATH": __import__("os").environ["PATH"], "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_inspector_lists_tools_and_calls_one(inspector: Path, live_server: str, committed, tmp_path: Path) -> None:
    _, token = make_user_with_pat(committed, scopes=("kb:read", "kb:search", "doc:read"))
    url = live_server + "/mcp"
    listed = inspect(inspector, tmp_path, url, token, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr + listed.stdout
    names = {t["name"] for t in json.loads(listed.stdout)["result"]["tools"]}
    assert {"kb_search", "kb_list_workspaces", "kb_get_document_markdown"} <= names
    assert "kb_upsert_document" not in names
    called = inspect(inspector, tmp_path, url, token, "--method", "tools/call", "--tool-name", "kb_list_workspaces")
    assert called.returncode == 0, called.stderr + called.stdout
    assert json.loads(called.stdout)["result"]["structuredContent"] == {
        "workspaces": [],
        "total": 0,
        "next_cursor": None,
    }
    unknown = inspect(inspector, tmp_path, url, token, "--method", "tools/call", "--tool-name", "kb_nope")
    assert unknown.returncode != 0
    refused = inspect(inspector, tmp_path, url, "kbpat_wrong", "--method", "tools/list")
    assert refused.returncode != 0
