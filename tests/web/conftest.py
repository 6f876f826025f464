"""Browser fixtures: Playwright (pip) driving the system's Chromium, never a downloaded browser.

``OPENKB_CHROMIUM`` names the executable (default ``/usr/bin/chromium``, Debian's package; CI
installs it). On a failure every page still open is screenshotted into
``$OPENKB_WEB_ARTIFACTS`` (default ``web/test-artifacts``), which CI keeps.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("OPENKB_WEB_ARTIFACTS", ROOT / "web" / "test-artifacts"))
CHROMIUM = os.environ.get("OPENKB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.web_failed = rep.failed


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Contexts:
    """Browser contexts opened by one test; each page records console CSP violations."""

    def __init__(self, browser, base_url: str) -> None:
        self.browser = browser
        self.base_url = base_url
        self.opened: list = []
        self.csp_violations: list[str] = []

    def new(self, locale: str = "en-US"):
        ctx = self.browser.new_context(base_url=self.base_url, locale=locale, viewport={"width": 1280, "height": 860})
        ctx.set_default_timeout(15_000)
        self.opened.append(ctx)
        return ctx

    def page(self, locale: str = "en-US"):
        page = self.new(locale).new_page()
        self.watch(page)
        return page

    def watch(self, page) -> None:
        def on_console(msg) -> None:
            if "Content Security Policy" in msg.text:
                self.csp_violations.append(msg.text)

        page.on("console", on_console)


@pytest.fixture()
def contexts(browser, live_server, request) -> Iterator[Contexts]:
    c = Contexts(browser, live_server)
    yield c
    if getattr(request.node, "web_failed", False):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        for i, ctx in enumerate(c.opened):
            for j, page in enumerate(ctx.pages):
                try:
                    page.screenshot(path=str(ARTIFACTS / f"{name}-{i}-{j}.png"), full_page=True)
                except Exception as exc:  # noqa: BLE001 - a screenshot must not hide the real failure
                    print(f"screenshot failed: {exc}")
    for ctx in c.opened:
        ctx.close()
    assert c.csp_violations == [], c.csp_violations
