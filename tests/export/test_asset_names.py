"""Asset file names of an export (docs/export.md#the-zip): one file per name as a case-insensitive
file system sees them, and the import gives each upload its own name back."""

from __future__ import annotations

import json

from sqlmodel import Session, col, select

from openkb.models import DocumentAsset
from tests.export.conftest import Node, kb_target, members, png, sha


def test_the_same_image_as_logo_and_logo_gets_two_names_that_differ_without_case(world, tmp_path):
    logo = png("orange", 12)
    kb = world.new_kb()
    world.build(
        kb,
        [
            Node(
                "a",
                "Two logos",
                body="![a]({asset:Logo.png}) ![b]({asset:logo.png})\n",
                assets={"Logo.png": (logo, "image/png"), "logo.png": (logo, "image/png")},
            ),
        ],
    )
    data = world.export(kb_target(kb))
    files = members(data)
    names = [p for p in files if p.startswith("assets/") and not p.endswith("/")]
    assert len(names) == 2 and len({n.casefold() for n in names}) == 2, names
    assert all(files[n] == logo for n in names)
    m = json.loads(files["openkb-export.json"])
    assert sorted(a["filename"] for a in m["assets"]) == ["Logo.png", "logo.png"]
    empty = world.new_kb()
    report = world.import_zip(data, empty, tmp_path)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    with Session(world.engine) as s:
        rows = s.exec(
            select(DocumentAsset.filename).where(
                col(DocumentAsset.sha256) == sha(logo), col(DocumentAsset.document_id).is_not(None)
            )
        ).all()
    assert sorted(rows) == ["Logo.png", "Logo.png", "logo.png", "logo.png"]  # the original's two, the copy's two
