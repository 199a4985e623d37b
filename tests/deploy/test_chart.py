"""The Helm chart, rendered and linted by the real Helm engine (Helm SDK v4 bundled in the
``helm-python-sdk`` package; no helm binary exists for these machines), every rendered
manifest validated against the Kubernetes JSON schemas (``kubernetes-validate --strict``,
offline schemas for 1.28..1.37), and the shipped rules and dashboards checked equal to deploy/.

CRD-based objects have no bundled schema: the PrometheusRule's spec is checked with
``promtool check rules`` and equality with deploy/, the ServiceMonitor structurally (selector
and port match the Service). Nothing else is skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import stack

helm = pytest.importorskip("helm_python", reason="pip install helm-python-sdk (dev extra)")
kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")

REPO = stack.REPO
CHART = REPO / "helm" / "llm-capacity-planner"
RULES = REPO / "deploy" / "prometheus" / "rules" / "planner.yml"
DASHBOARDS = sorted((REPO / "deploy" / "grafana").glob("planner-*.json"))
PLACEHOLDER = "https://example.com/llm-capacity-planner/runbooks"
K8S_VERSIONS = ("1.28.0", "1.32.0", "1.37.0")
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "ha-postgres": {
        "replicaCount": 2,
        "database": {"existingSecret": "planner-db"},
        "rbac": {"integrations": {"kueueAdmissionCheck": True}},
        "serviceMonitor": {"additionalLabels": {"release": "kube-prometheus-stack"}},
        "prometheusRule": {
            "additionalLabels": {"release": "kube-prometheus-stack"},
            "runbookBaseUrl": "https://git.example.org/ml/planner/-/blob/main/runbooks/",
        },
        "networkPolicy": {
            "ingressFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
        },
        "env": {"PLANNER_INGEST_INTERVAL_S": "30"},
    },
    "minimal": {
        "persistence": {"enabled": True, "size": "5Gi"},
        "rbac": {
            "integrations": dict.fromkeys(
                ("batchJobs", "jobset", "pytorchjob", "trainjob", "kueue"), False
            )
        },
        "leaderElection": {"enabled": False},
        "serviceMonitor": {"enabled": False},
        "prometheusRule": {"enabled": False},
        "dashboards": {"enabled": False},
        "networkPolicy": {"enabled": False},
    },
}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(chart.merge_values(values))
        out = chart.render(values, name="planner", namespace="ml")
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    return request.param, render(VALUE_SETS[request.param])


def _kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_lint_is_clean() -> None:
    result = helm.lint(str(CHART))
    assert result["errors"] == []
    assert [m["error"] for m in result["messages"]] == ["icon is recommended"]  # INFO only


def test_every_manifest_validates_against_kubernetes_schemas(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = rendered
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        for version in K8S_VERSIONS:
            kv.validate(doc, version, strict=True)  # raises ValidationError


def test_invalid_values_are_rejected_by_the_schema() -> None:
    for bad in (
        {"replicaCount": "three"},
        {"replicaCas": 1},
        {"env": {"HOME": "/"}},
        {"serviceMonitor": {"interval": "often"}},
        {"image": {"pullPolicy": "Sometimes"}},
    ):
        with pytest.raises(helm.HelmError):
            render(bad)


def test_several_replicas_need_postgres() -> None:
    with pytest.raises(helm.HelmError, match=r"database\.existingSecret"):
        render({"replicaCount": 2})


def test_deployment_probes_security_and_database(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    name, docs = rendered
    (deploy,) = _kind(docs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    env = {e["name"]: e for e in container["env"]}
    db = env["PLANNER_DATABASE_URL"]
    if name == "ha-postgres":
        assert db["valueFrom"]["secretKeyRef"] == {"name": "planner-db", "key": "database_url"}
        assert deploy["spec"]["replicas"] == 2
        (pdb,) = _kind(docs, "PodDisruptionBudget")
        assert pdb["spec"]["selector"] == deploy["spec"]["selector"]
        assert env["PLANNER_INGEST_INTERVAL_S"]["value"] == "30"
    else:
        assert db["value"].startswith("sqlite:////var/lib/planner/")
        assert not _kind(docs, "PodDisruptionBudget")
    if name == "minimal":
        (pvc,) = _kind(docs, "PersistentVolumeClaim")
        assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


def test_rbac_is_least_privilege(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = rendered
    (role,) = _kind(docs, "ClusterRole")
    granted = {
        (group, res, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    }
    writes = {g for g in granted if g[2] not in ("get", "list", "watch")}
    assert all("*" not in part for g in granted for part in g)
    assert not {g for g in granted if g[1] in ("secrets", "configmaps")}
    if name == "ha-postgres":
        assert writes == {
            ("kueue.x-k8s.io", "workloads/status", "patch"),
            ("kueue.x-k8s.io", "admissionchecks/status", "patch"),  # the check's Active condition
        }
    else:
        assert writes == set()
    reads = {(g, r) for g, r, v in granted if v == "watch"}
    if name == "minimal":
        assert reads == {("", "nodes"), ("", "pods")}
        assert not _kind(docs, "Role")
    else:
        assert reads == {
            ("", "nodes"),
            ("", "pods"),
            ("batch", "jobs"),
            ("jobset.x-k8s.io", "jobsets"),
            ("kubeflow.org", "pytorchjobs"),
            ("trainer.kubeflow.org", "trainjobs"),
            ("kueue.x-k8s.io", "workloads"),
            ("kueue.x-k8s.io", "localqueues"),
            ("kueue.x-k8s.io", "clusterqueues"),
            ("kueue.x-k8s.io", "resourceflavors"),  # watched by default
            ("kueue.x-k8s.io", "admissionchecks"),
        }
        (lease_role,) = _kind(docs, "Role")
        assert lease_role["metadata"]["namespace"] == "ml"
        assert {r["resources"][0] for r in lease_role["rules"]} == {"leases"}


def test_files_in_the_chart_equal_deploy() -> None:
    fix = (
        "run: cp deploy/prometheus/rules/planner.yml deploy/grafana/planner-*.json into "
        "helm/llm-capacity-planner/files/{rules,dashboards}/"
    )
    assert (CHART / "files" / "rules" / "planner.yml").read_bytes() == RULES.read_bytes(), fix
    shipped = sorted((CHART / "files" / "dashboards").glob("*.json"))
    assert [p.name for p in shipped] == [p.name for p in DASHBOARDS], fix
    for a, b in zip(shipped, DASHBOARDS, strict=True):
        assert a.read_bytes() == b.read_bytes(), fix


def test_rendered_rules_and_dashboards_equal_deploy(tmp_path: Path) -> None:
    docs = render(VALUE_SETS["ha-postgres"])
    (rule,) = _kind(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    base = "https://git.example.org/ml/planner/-/blob/main/runbooks"
    expected = yaml.safe_load(RULES.read_text().replace(PLACEHOLDER, base))
    assert rule["spec"] == expected
    if shutil.which("promtool"):
        path = tmp_path / "rules.yml"
        path.write_text(yaml.safe_dump(rule["spec"]))
        proc = subprocess.run(
            ["promtool", "check", "rules", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr

    maps = {
        key: json.loads(text)
        for cm in _kind(docs, "ConfigMap")
        if cm["metadata"]["labels"].get("grafana_dashboard") == "1"
        for key, text in cm["data"].items()
    }
    assert maps == {p.name: json.loads(p.read_text()) for p in DASHBOARDS}
    assert all(
        cm["metadata"]["annotations"]["grafana_folder"] == "LLM capacity planner"
        for cm in _kind(docs, "ConfigMap")
    )
    assert not _kind(render(VALUE_SETS["minimal"]), "ConfigMap")


def test_servicemonitor_scrapes_the_service() -> None:
    docs = render(VALUE_SETS["ha-postgres"])
    (svc,) = _kind(docs, "Service")
    (sm,) = _kind(docs, "ServiceMonitor")
    (deploy,) = _kind(docs, "Deployment")
    labels = svc["metadata"]["labels"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": ["ml"]}
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    (netpol,) = _kind(docs, "NetworkPolicy")
    assert netpol["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()


def test_the_processes_value_runs_the_api_and_the_ingest_loop_apart() -> None:
    def pod_of(values: dict[str, Any]) -> dict[str, Any]:
        docs = render(values)
        for doc in docs:
            if doc["kind"] not in CRD_KINDS:
                kv.validate(doc, K8S_VERSIONS[-1], strict=True)
        (deploy,) = _kind(docs, "Deployment")
        spec: dict[str, Any] = deploy["spec"]["template"]["spec"]
        return spec

    def env_of(container: dict[str, Any]) -> dict[str, Any]:
        return {e["name"]: e.get("value") for e in container["env"]}

    (split,) = pod_of({})["containers"]  # the default
    assert env_of(split)["PLANNER_SERVICE__PROCESSES"] == "split"
    assert "PLANNER_SERVICE__ROLE" not in env_of(split)
    (single,) = pod_of({"processes": "single"})["containers"]
    # said outright: the chart's value holds whatever the planner's own default
    assert env_of(single)["PLANNER_SERVICE__PROCESSES"] == "single"
    assert "PLANNER_SERVICE__ROLE" not in env_of(single)

    api, ingest = pod_of({"processes": "containers", "persistence": {"enabled": True}})[
        "containers"
    ]
    assert (api["name"], ingest["name"]) == ("planner", "ingest")
    assert env_of(api).pop("PLANNER_SERVICE__ROLE") == "api"
    assert env_of(ingest).pop("PLANNER_SERVICE__ROLE") == "ingest"
    same = {k: v for k, v in env_of(api).items() if k != "PLANNER_SERVICE__ROLE"}
    assert same == {k: v for k, v in env_of(ingest).items() if k != "PLANNER_SERVICE__ROLE"}
    one = {k: v for k, v in env_of(single).items() if k != "PLANNER_SERVICE__PROCESSES"}
    assert same == one  # the same settings as one process
    assert api["volumeMounts"] == ingest["volumeMounts"]  # one SQLite file
    assert "ports" not in ingest
    assert "readinessProbe" not in ingest
    assert ingest["securityContext"] == api["securityContext"]
