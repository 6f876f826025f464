"""The deployment files, checked offline: compose/docker-compose.yml against the compose
specification's JSON schema (the copy check-jsonschema vendors), plus the rules the schema cannot
say (pinned images, healthchecks with start periods, every variable documented in .env.example);
the Dockerfile against the rules of docs/deployment.md (multi-stage, non-root, healthcheck on
/readyz, openkb entrypoint, no `latest`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose" / "docker-compose.yml"
ONE_SHOT = {"migrate", "minio-init"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())  # resolves the x-openkb anchors and << merges


def _compose_schema() -> dict:
    import check_jsonschema

    path = Path(check_jsonschema.__file__).parent / "builtin_schemas" / "vendor" / "compose-spec.json"
    return json.loads(path.read_text())


def test_compose_file_matches_the_compose_specification(compose):
    schema = _compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])


def test_the_schema_check_catches_a_broken_file(compose):
    schema = _compose_schema()
    broken = {**compose, "services": {**compose["services"], "api": {**compose["services"]["api"], "ports": "8000"}}}
    assert list(jsonschema.validators.validator_for(schema)(schema).iter_errors(broken))


def test_compose_services_are_pinned_healthy_and_wired(compose):
    services = compose["services"]
    need = {
        "api",
        "worker",
        "migrate",
        "postgres",
        "redis",
        "minio",
        "milvus",
        "milvus-etcd",
        "milvus-minio",
        "tei",
        "tei-reranker",
    }
    assert need <= set(services)
    for name, svc in services.items():
        image = svc["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else None
        assert tag and tag != "latest" and "${" not in tag or image.startswith("${OPENKB_IMAGE"), (name, image)
        if name not in ONE_SHOT:
            hc = svc.get("healthcheck") or {}
            assert hc.get("test") and hc.get("start_period"), f"{name} needs a healthcheck with a start_period"
        for dep in svc.get("depends_on") or {}:
            assert dep in services, (name, dep)
        for vol in svc.get("volumes") or []:
            src = vol.split(":", 1)[0]
            assert src.startswith(".") or src in compose["volumes"], (name, vol)
    assert services["migrate"]["command"] == ["migrate"] and services["migrate"]["restart"] == "no"
    assert services["api"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "ports" not in services["worker"] and "container_name" not in services["api"]  # scalable
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["milvus"]["image"].startswith("milvusdb/milvus:v2.6")
    assert services["tei"]["profiles"] == ["tei"] and services["tei-reranker"]["profiles"] == ["rerank"]
    env = services["api"]["environment"]
    assert env["S3_ENDPOINT"] == "http://minio:9000" and env["REDIS_URL"].startswith("redis://redis")
    assert not any("key" in k.lower() and "SECRET" not in k and "ACCESS" not in k for k in env), env


def test_every_compose_variable_is_in_env_example():
    used = set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)", COMPOSE.read_text()))
    example = (ROOT / "compose" / ".env.example").read_text()
    documented = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", example, flags=re.M))
    assert used, "no variables found: the pattern is wrong"
    assert not used - documented, f"add these to compose/.env.example: {sorted(used - documented)}"
    assert not documented - used, f"documented but unused: {sorted(documented - used)}"


def _dockerfile() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_rules():
    ins = _dockerfile()
    froms = [rest for word, rest in ins if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a slim runtime"
    args = dict(re.match(r"(\w+)=?(.*)", rest).groups() for word, rest in ins if word == "ARG")
    for f in froms:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), f.split()[0])
        assert ":" in image and not image.endswith(":latest") and "slim" in image, image
    last_from = max(i for i, (word, _) in enumerate(ins) if word == "FROM")
    runtime = ins[last_from:]
    users = [rest for word, rest in runtime if word == "USER"]
    assert users and users[-1] not in ("root", "0"), "the runtime stage must switch to a non-root user"
    health = [rest for word, rest in runtime if word == "HEALTHCHECK"]
    assert health and "/readyz" in health[0] and "--start-period" in health[0]
    entry = [rest for word, rest in runtime if word == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1])[-1] == "openkb"
    assert any(word == "COPY" and "--from=build" in rest for word, rest in runtime)
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert ".git" in ignore and ".env" in ignore and "web/node_modules" in ignore
    # the web UI ships as package data: the build must fail rather than ship without it
    assert any("server/web/dist/index.html" in rest for word, rest in ins if word == "RUN")
