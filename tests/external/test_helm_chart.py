"""The Helm chart (compose/helm/openkb), rendered offline by Helm's own Go engine (the
``helm-python-sdk`` wheel binds libhelm; no cluster, no network) with the default values and
with every component external, and every rendered manifest validated against the Kubernetes
OpenAPI schemas (``kubernetes-validate``, strict: unknown fields fail)."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from helm_python import Chart

CHART = Path(__file__).resolve().parents[2] / "compose" / "helm" / "openkb"
K8S_VERSION = "1.31.0"

EXTERNAL = {
    "postgres": {"external": True},
    "redis": {"external": True},
    "s3": {"external": True, "endpoint": "https://s3.eu-west-1.amazonaws.com", "bucket": "kb-assets"},
    "milvus": {"mode": "external", "uri": "https://in01-abc.zillizcloud.com:19530"},
    "embedder": {"enabled": False, "url": "http://tei.ml.svc:80/v1"},
    "mcp": {"enabled": True, "host": "mcp.example.com"},
    "difyAdapter": {"enabled": True, "host": "dify-kb.example.com"},
    "api": {"replicas": 3},
    "worker": {"replicas": 4},
}


@pytest.fixture(scope="module")
def chart() -> Chart:
    return Chart.load(str(CHART))


def render(chart: Chart, values: dict | None = None) -> dict[tuple[str, str], dict]:
    out = chart.render(values, name="kb", namespace="openkb", is_install=True)
    docs: dict[tuple[str, str], dict] = {}
    for path, text in out.items():
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("variant", ["in-cluster", "external"])
def test_rendered_manifests_are_valid_kubernetes(chart, variant):
    docs = render(chart, EXTERNAL if variant == "external" else None)
    assert docs
    for doc in docs.values():
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises with the field path
    kinds = {k for k, _ in docs}
    assert "Secret" not in kinds  # secrets are referenced, never created
    if variant == "in-cluster":
        assert {("StatefulSet", f"kb-openkb-{c}") for c in ("postgres", "redis", "minio", "milvus")} <= set(docs)
    else:
        assert kinds == {"ConfigMap", "Deployment", "Service", "Job", "Ingress"}
        assert {n for k, n in docs if k == "Deployment"} == {"kb-openkb-api", "kb-openkb-worker"}


def test_the_schema_check_catches_a_broken_manifest(chart):
    api = render(chart)[("Deployment", "kb-openkb-api")]
    api["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = {"name": "http"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(api, K8S_VERSION, strict=True)
    api = render(chart)[("Deployment", "kb-openkb-api")]
    api["spec"]["template"]["spec"]["containers"][0]["healthCheck"] = {}  # an unknown field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(api, K8S_VERSION, strict=True)


def test_api_worker_and_migration(chart):
    docs = render(chart, EXTERNAL)
    api = docs[("Deployment", "kb-openkb-api")]["spec"]
    worker = docs[("Deployment", "kb-openkb-worker")]["spec"]
    assert api["replicas"] == 3 and worker["replicas"] == 4
    a = api["template"]["spec"]["containers"][0]
    assert a["args"][0] == "serve" and a["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert a["livenessProbe"]["httpGet"]["path"] == "/healthz" and a["startupProbe"]
    assert a["resources"]["limits"] and a["resources"]["requests"]
    w = worker["template"]["spec"]["containers"][0]
    assert w["args"][0] == "worker" and w["livenessProbe"] and w["resources"]["limits"]
    for spec in (api, worker):
        assert spec["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    job = docs[("Job", "kb-openkb-migrate-1")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    env = _env(a)
    for var, key in (
        ("DATABASE_URL", "database-url"),
        ("REDIS_URL", "redis-url"),
        ("OPENKB_SECRET_KEY", "secret-key"),
        ("S3_SECRET_KEY", "s3-secret-key"),
    ):
        assert env[var]["valueFrom"]["secretKeyRef"] == {"name": "openkb-secrets", "key": key}
    config = docs[("ConfigMap", "kb-openkb")]["data"]
    assert config["MILVUS_URI"] == EXTERNAL["milvus"]["uri"] and config["S3_ENDPOINT"] == EXTERNAL["s3"]["endpoint"]
    assert config["OPENKB_EMBEDDER_URL"] == "http://tei.ml.svc:80/v1"
    assert not any("key" in k.lower() or "password" in k.lower() for k in config)  # no secret in the ConfigMap
    hosts = [r["host"] for r in docs[("Ingress", "kb-openkb")]["spec"]["rules"]]
    assert hosts == ["kb.example.com", "mcp.example.com", "dify-kb.example.com"]


def test_in_cluster_defaults_wire_the_services(chart):
    docs = render(chart)
    config = docs[("ConfigMap", "kb-openkb")]["data"]
    assert config["MILVUS_URI"] == "http://kb-openkb-milvus:19530"
    assert config["S3_ENDPOINT"] == "http://kb-openkb-minio:9000"
    env = _env(docs[("Deployment", "kb-openkb-api")]["spec"]["template"]["spec"]["containers"][0])
    assert env["DATABASE_URL"]["value"] == "postgresql://openkb:$(POSTGRES_PASSWORD)@kb-openkb-postgres:5432/openkb"
    assert list(env).index("POSTGRES_PASSWORD") < list(env).index("DATABASE_URL")  # $(VAR) needs it defined first
    assert docs[("Job", "kb-openkb-migrate-1")]["spec"]["template"]["spec"]["initContainers"][0]["name"] == "bucket"
    hosts = [r["host"] for r in docs[("Ingress", "kb-openkb")]["spec"]["rules"]]
    assert hosts == ["kb.example.com"]


def test_endpoint_switches_reach_the_server(chart):
    """``mcp.enabled`` / ``difyAdapter.enabled`` switch the endpoints off in the server, not only
    their dedicated Ingress hosts (the main host would still serve /mcp and /retrieval)."""
    on = render(chart)[("ConfigMap", "kb-openkb")]["data"]
    assert (on["OPENKB_MCP_ENABLED"], on["OPENKB_DIFY_ENABLED"]) == ("true", "true")
    off = render(chart, {"mcp": {"enabled": False, "host": "mcp.example.com"}, "difyAdapter": {"enabled": False}})
    config = off[("ConfigMap", "kb-openkb")]["data"]
    assert (config["OPENKB_MCP_ENABLED"], config["OPENKB_DIFY_ENABLED"]) == ("false", "false")
    assert [r["host"] for r in off[("Ingress", "kb-openkb")]["spec"]["rules"]] == ["kb.example.com"]
    from openkb.config import Settings

    assert Settings(openkb_mcp_enabled=config["OPENKB_MCP_ENABLED"]).openkb_mcp_enabled is False


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"milvus": {"mode": "cluster"}}, "milvus.uri is required"),
        ({"milvus": {"mode": "embedded"}}, "milvus.mode must be standalone, cluster or external"),
        ({"s3": {"external": True}}, "s3.endpoint is required"),
    ],
)
def test_bad_values_fail_the_render(chart, values, message):
    with pytest.raises(Exception, match=message):
        chart.render(values, name="kb", namespace="openkb", is_install=True)
