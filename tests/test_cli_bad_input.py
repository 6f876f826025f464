"""Bad input to ``openkb`` commands: one line on stderr and the exit code for it, never a
traceback, nothing half-done (docs/operations.md#exit-codes)."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlmodel import select

from openkb.errors import ValidationError
from openkb.models import User
from tests.factories import make_tenant, make_user
from tests.test_cli import assert_one_line_error, db_env, run  # noqa: F401 - db_env is a fixture


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        pytest.param(b'{"name": "x",', "not JSON", id="truncated"),
        pytest.param(b'["collections.read:diary"]', "JSON object", id="a-list"),
        pytest.param('{"name": "caf\u00e9"}'.encode("latin-1"), "not UTF-8", id="latin-1"),
        pytest.param(b'{"name": "x", "knowledge": ["collections.read:diary"]}', "knowledge", id="knowledge-a-list"),
    ],
)
def test_app_register_refuses_a_manifest_that_is_not_a_json_object(db_env, committed, tmp_path, content, needle):  # noqa: F811
    with committed() as s:
        u = make_user(s, make_tenant(s))
        s.commit()
        email = u.email
    manifest = tmp_path / "manifest.json"
    manifest.write_bytes(content)
    p = run(["app", "register", "--user", email, "--manifest", str(manifest)], env=db_env)
    assert_one_line_error(p, 2, needle)


def test_app_register_with_a_missing_manifest_is_an_io_error(db_env, tmp_path):  # noqa: F811
    p = run(["app", "register", "--user", "x@example.com", "--manifest", str(tmp_path / "none.json")], env=db_env)
    assert_one_line_error(p, 74, "none.json")


@pytest.mark.parametrize("analyzer", ["[1]", "1", '"jieba"'])
def test_profile_create_refuses_an_analyzer_that_is_not_a_json_object(db_env, analyzer):  # noqa: F811
    p = run(["profile", "create", "bm", "--analyzer", analyzer], env=db_env)
    assert_one_line_error(p, 2, "--analyzer takes a JSON object")


@pytest.mark.parametrize("field", ["analyzer", "params", "rerank_params"])
def test_a_profile_input_refuses_function_params_that_are_not_objects(field):
    """The REST body reaches the same service: a list where an object belongs is bad input."""
    from openkb.indexing.profiles import ProfileInput, build_spec

    with pytest.raises(ValidationError, match=f"{field} must be a JSON object"):
        build_spec(None, None, ProfileInput(name="bm", **{field: [1]}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "missing"),
    [(["--knowledge-id", "kid1"], "--kb KB"), (["--kb", "some-kb"], "--knowledge-id ID")],
)
def test_dify_map_with_half_a_mapping_says_what_is_missing(db_env, args, missing):  # noqa: F811
    for extra in ([], ["--json"]):
        p = run(["dify", "map", *args, *extra], env=db_env)
        assert_one_line_error(p, 2, f"missing {missing}")
        assert p.stdout == ""


def test_dify_map_alone_prints_its_help_on_stderr(db_env):  # noqa: F811
    p = run(["dify", "map"], env=db_env)
    assert p.returncode == 2 and p.stdout == ""
    assert "--knowledge-id" in p.stderr and "Traceback" not in p.stderr


def test_user_create_refuses_a_status_no_new_user_can_have(db_env, committed):  # noqa: F811
    """Created ``deleted``, the row blocked its address for good."""
    email = f"gone-{uuid.uuid4().hex[:6]}@example.com"
    with committed() as s:
        slug = make_tenant(s).slug
        s.commit()
    p = run(["user", "create", email, "--tenant", slug, "--no-password", "--status", "deleted"], env=db_env)
    assert_one_line_error(p, 2, "new user's status", "suspended")
    with committed() as s:
        assert s.exec(select(User).where(User.email == email)).first() is None
    p = run(["user", "create", email, "--tenant", slug, "--no-password", "--status", "suspended", "--json"], env=db_env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "suspended"
