"""The web app's document page in a real browser: how long until the editor is ready, how much
JavaScript it costs, how long an autosave round trip takes.

    python bench/web.py [--loads 20] [--size 10000] [--saves 40]
    python bench/web.py --admin [--users 10000] [--audit 100000]   (runs bench/admin.py)

Setup: an embedded PostgreSQL (pgserver) in a temporary OPENKB_HOME, migrated; the real app
(``server.app.create_app``, the committed bundle in ``server/web/dist``) served by uvicorn on a
loopback port, as ``openkb serve`` does; Milvus is not started (nothing here searches: index
jobs go to a recording queue). A user, workspace, knowledge base and one page of ``--size``
bytes of mixed Chinese/English Markdown (``bench/markdown_bench.build_document``) are made
over the REST API. Chromium is Debian's (``/usr/bin/chromium`` or ``OPENKB_CHROMIUM``) driven
by Playwright, one signed-in context with its HTTP cache (the steady state of a user).

Figures:

* **editor ready**: from navigation start to the editor mounted (``data-ready`` on the editor
  element, read as ``performance.now()``), ``--loads`` loads of the document page after one
  warm-up, next to a **bare page** (served by this script only) that loads the same Editor
  chunk and CSS of the bundle and mounts it on the same Markdown embedded in the page: the
  ratio is what the app adds (its own code, session, document, knowledge base, tree requests).
  Target: p50 ratio <= 1.3.
* **JavaScript transferred** for the document page on a cold cache: the sum of the encoded
  (gzip) sizes of every script the page loaded. Target <= 700 KB.
* **autosave round trip**: the request the autosave sends (``POST /api/documents/{id}/versions``
  with SHA-256 computed in the page, one changed line each time) timed in the page, ``--saves``
  times. Target p95 <= 100 ms.

The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# not bench/ itself on the path: bench/mcp.py would shadow the mcp package the server imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

_HOME = tempfile.mkdtemp(prefix="openkb-bench-web-")
os.environ["OPENKB_HOME"] = _HOME
os.environ["OPENKB_ENV"] = "test"
for _v in ("DATABASE_URL", "MILVUS_URI", "REDIS_URL", "S3_ENDPOINT", "SMTP_HOST"):
    os.environ.pop(_v, None)

import httpx
from sqlmodel import Session

from bench.markdown_bench import build_document
from openkb.bootstrap import default_tenant
from openkb.config import Settings, reset_settings_cache
from openkb.context import AppContext
from openkb.jobs import RecordingQueue
from openkb.migrate import upgrade
from openkb.models import TenantMembership, User
from openkb.runtime.embedded import EmbeddedServices, Endpoints
from openkb.security import hash_password
from server.web import ASSETS

PASSWORD = "bench password 123"
CHROMIUM = os.environ.get("OPENKB_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def fmt(name: str, vals: list[float]) -> str:
    return f"  {name:<30} p50 {statistics.median(vals):8.1f} ms   p95 {pct(vals, 0.95):8.1f} ms   (n={len(vals)})"


def bare_page(markdown: str) -> str:
    """The same Editor chunk and CSS as the app, mounted on the same Markdown, nothing else."""
    js = next(ASSETS.glob("Editor-*.js")).name
    css = "".join(f'<link rel="stylesheet" href="/assets/{p.name}">' for p in sorted(ASSETS.glob("Editor-*.css")))
    md = json.dumps(markdown).replace("</", "<\\/")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{css}</head><body><div id='e'></div>"
        f"<script type='module'>import {{ mountEditor }} from '/assets/{js}';"
        f"const el = document.getElementById('e');"
        f"mountEditor(el, {{ markdown: {md} }}).then(() => el.setAttribute('data-ready', 'true'));"
        f"</script></body></html>"
    )


def serve(ctx: AppContext, markdown_for_bare: list[str]) -> tuple[str, object]:
    from fastapi.responses import HTMLResponse

    from server.app import create_app

    app = create_app(ctx, queue=RecordingQueue(), warm=False)

    @app.get("/__bench/bare", include_in_schema=False)
    def bare() -> HTMLResponse:
        return HTMLResponse(bare_page(markdown_for_bare[0]))

    from bench.admin import serve_app

    return serve_app(app)


def ready_ms(page, url: str, selector: str) -> float:
    page.goto(url)
    page.wait_for_selector(selector, state="attached", timeout=60_000)
    return float(
        page.evaluate(
            "(sel) => { const m = performance.getEntriesByName('editor-ready'); return m.length ? m[0].startTime"
            " : performance.now() }",
            selector,
        )
    )


# Record the moment the editor element gets data-ready, in the page, so Playwright's polling
# delay is not counted.
READY_OBSERVER = """
new MutationObserver((_, obs) => {
  if (document.querySelector('[data-ready="true"]')) { performance.mark('editor-ready'); obs.disconnect() }
}).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-ready'] })
"""

SAVE_LOOP = """
async ([docId, n]) => {
  const me = await (await fetch('/api/auth/me')).json()
  let doc = await (await fetch(`/api/documents/${docId}`)).json()
  let base = doc.current_version_id, text = doc.markdown, out = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const md = text + `\\nedit ${i} ${Math.random()}\\n`
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(md))
    const hash = Array.from(new Uint8Array(digest), b => b.toString(16).padStart(2, '0')).join('')
    const r = await fetch(`/api/documents/${docId}/versions`, { method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token },
      body: JSON.stringify({ base_version_id: base, markdown: md, markdown_hash: hash }) })
    const body = await r.json()
    if (!r.ok) throw new Error(JSON.stringify(body))
    out.push(performance.now() - t0)
    base = body.version_id
  }
  return out
}
"""


def main() -> None:
    if "--admin" in sys.argv[1:]:  # the admin console's lists on a big tenant: bench/admin.py
        sys.argv.remove("--admin")
        from bench.admin import main as admin_main

        return admin_main()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loads", type=int, default=20)
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--saves", type=int, default=40)
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    settings = Settings()
    svc = EmbeddedServices(settings, components=("postgresql",))
    ep = svc.start()
    try:
        upgrade(ep.database_url)
        os.environ["DATABASE_URL"] = ep.database_url
        reset_settings_cache()
        ctx = AppContext.build(
            Settings(),
            Endpoints(
                database_url=ep.database_url,
                milvus_uri="",
                milvus_token=None,
                embedder_url=None,
                queue="",
                home=Path(_HOME),
            ),
        )
        email = "owner@bench.local"
        with Session(ctx.engine) as s:
            t = default_tenant(s)
            u = User(email=email, display_name="Owner", status="active", password_hash=hash_password(PASSWORD))
            s.add(u)
            s.flush()
            s.add(TenantMembership(tenant_id=t.id, user_id=u.id, role="member"))
            s.commit()
        markdown = build_document(args.size)
        holder = [markdown]
        base, server = serve(ctx, holder)

        with httpx.Client(base_url=base, timeout=30) as c:
            r = c.post("/api/auth/login", json={"email": email, "password": PASSWORD})
            r.raise_for_status()
            c.headers["X-CSRF-Token"] = r.json()["csrf_token"]
            ws = c.post("/api/workspaces", json={"name": "Bench"}).json()
            kb = c.post(
                "/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Bench", "visibility": "workspace"}
            ).json()
            for i in range(30):  # a tree of realistic size around the page
                c.post("/api/documents", json={"knowledge_base_id": kb["id"], "title": f"Page {i}", "markdown": "x\n"})
            doc = c.post(
                "/api/documents", json={"knowledge_base_id": kb["id"], "title": "Ten KB", "markdown": markdown}
            )
            doc.raise_for_status()
            doc = doc.json()
            holder[0] = c.get(f"/api/documents/{doc['id']}").json()["markdown"]  # the stored form
            cookies = [{"name": k, "value": v, "url": base} for k, v in r.cookies.items()]
        doc_url = f"{base}/app/kb/{kb['id']}/docs/{doc['id']}"

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            # cold cache: the JavaScript a first visit transfers
            cold = browser.new_context(viewport={"width": 1280, "height": 860})
            cold.add_cookies(cookies)
            p = cold.new_page()
            p.add_init_script(READY_OBSERVER)
            ready_ms(p, doc_url, ".editor[data-ready='true']")
            js = p.evaluate(
                "() => performance.getEntriesByType('resource').filter(e => e.name.endsWith('.js'))"
                ".concat(performance.getEntriesByType('navigation'))"
                ".filter(e => e.name.endsWith('.js')).map(e => [e.name, e.encodedBodySize])"
            )
            js_bytes = sum(size for _, size in js)
            cold.close()

            warm = browser.new_context(viewport={"width": 1280, "height": 860})
            warm.add_cookies(cookies)
            page = warm.new_page()
            page.add_init_script(READY_OBSERVER)
            ready_ms(page, doc_url, ".editor[data-ready='true']")  # warm-up
            ready_ms(page, f"{base}/__bench/bare", "#e[data-ready='true']")
            app_ms: list[float] = []
            bare_ms: list[float] = []
            for _ in range(args.loads):  # interleaved, so drift hits both alike
                app_ms.append(ready_ms(page, doc_url, ".editor[data-ready='true']"))
                bare_ms.append(ready_ms(page, f"{base}/__bench/bare", "#e[data-ready='true']"))
            page.goto(doc_url)
            page.wait_for_selector(".editor[data-ready='true']")
            saves = page.evaluate(SAVE_LOOP, [doc["id"], args.saves])
            browser.close()
        server.should_exit = True  # type: ignore[attr-defined]
    finally:
        svc.stop()
        shutil.rmtree(_HOME, ignore_errors=True)

    print(f"document page, {len(holder[0].encode())} bytes of Markdown, {args.loads} loads each (warm HTTP cache):")
    print(fmt("app: navigation -> editor", app_ms))
    print(fmt("bare Crepe page", bare_ms))
    ratio50 = statistics.median(app_ms) / statistics.median(bare_ms)
    ratio95 = pct(app_ms, 0.95) / pct(bare_ms, 0.95)
    print(f"  ratio app/bare                 p50 {ratio50:.2f}   p95 {ratio95:.2f}   (target p50 <= 1.3)")
    print(
        f"JavaScript transferred on a cold cache: {js_bytes / 1024:.1f} KB gzip in {len(js)} files (target <= 700 KB)"
    )
    print(fmt("autosave round trip", saves) + "   (target p95 <= 100 ms)")
    print(
        json.dumps(
            {
                "markdown_bytes": len(holder[0].encode()),
                "loads": args.loads,
                "editor_ready_p50_ms": round(statistics.median(app_ms), 1),
                "editor_ready_p95_ms": round(pct(app_ms, 0.95), 1),
                "bare_ready_p50_ms": round(statistics.median(bare_ms), 1),
                "bare_ready_p95_ms": round(pct(bare_ms, 0.95), 1),
                "ready_ratio_p50": round(ratio50, 2),
                "ready_ratio_p95": round(ratio95, 2),
                "js_gzip_kb": round(js_bytes / 1024, 1),
                "js_files": len(js),
                "autosave_p50_ms": round(statistics.median(saves), 1),
                "autosave_p95_ms": round(pct(saves, 0.95), 1),
                "cpus": os.cpu_count() or 0,
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
