"""Write the app's OpenAPI document to web/openapi.json (input of `npm run gen:api`).

The web app's API types are generated from this file, so a renamed field breaks the build
(docs/web.md). tests/web/test_openapi_snapshot.py fails when the committed file is stale;
regenerate with `python web/scripts/openapi.py` from the repository root.

The app is built without any live component: create_app only wires routes, and the engine it
receives connects lazily, so no database is needed to describe the routes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def document() -> dict:
    from openkb.config import Settings
    from openkb.context import AppContext
    from openkb.jobs import RecordingQueue
    from openkb.runtime.embedded import Endpoints
    from server.app import create_app

    home = Path("/nonexistent-openkb-home")
    ep = Endpoints(
        database_url="postgresql://openapi@localhost/none",
        milvus_uri="",
        milvus_token=None,
        embedder_url=None,
        queue="",
        home=home,
    )
    app = create_app(AppContext.build(Settings(), ep), queue=RecordingQueue(), warm=False)
    return app.openapi()


def render(doc: dict) -> str:
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    out = ROOT / "web" / "openapi.json"
    out.write_text(render(document()), encoding="utf-8")
    print(out)
