"""The chart's security: RBAC checked against what the Kubernetes adapter calls, the
API's token Secret, Kubernetes-mode reviews and roles, and a NetworkPolicy that admits only the
scrapers and the named clients. Rendered by the real Helm engine (``test_chart.render``) and
validated against the Kubernetes schemas."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.kubernetes.admission import KIND_RESOURCES
from adapters.kubernetes.client import ADMISSIONCHECKS, TRAINJOBS, WORKLOADS
from adapters.kubernetes.source import DEFAULT_RESOURCES

from .test_chart import K8S_VERSIONS, kv, render

Grant = tuple[str, str, str]

EVERYTHING_ON: dict[str, Any] = {
    "auth": {"mode": "kubernetes"},
    "rbac": {
        "integrations": {
            "kueueAdmissionCheck": True,
            "hintAnnotations": True,
            "publishWorkloadAdmission": True,
            "publishTrainjobProgress": True,
            "publishExpectedRuntime": True,
        }
    },
}
PUBLISH_ONLY: dict[str, Any] = {
    "rbac": {"integrations": {"publishWorkloadAdmission": True, "publishTrainjobProgress": True}},
}


def _granted(doc: dict[str, Any]) -> set[Grant]:
    return {
        (group, res, verb)
        for rule in doc["rules"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    }


def _cluster_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (role,) = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "planner-llm-capacity-planner"
    ]
    return role


def what_the_code_calls(
    *,
    admission: bool,
    hints: bool,
    reviews: bool,
    published: tuple[bool, bool, bool] = (False, False, False),
) -> set[Grant]:
    """The API calls of ``adapters.kubernetes`` as RBAC grants (from its resource tables)."""
    needed: set[Grant] = set()
    # The chart's Kueue integration reads AdmissionChecks even with the check off (the RBAC
    # list of docs/kubernetes.md; turning the check on then needs only its writes).
    watched = (*DEFAULT_RESOURCES, ADMISSIONCHECKS)
    for res in watched:
        needed |= {(res.group, res.plural, verb) for verb in ("get", "list", "watch")}
    # KubernetesSource._positions: Kueue's visibility API
    needed.add(("visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "get"))
    if admission:  # AdmissionCheckController: apply_status on workloads and admission checks
        needed |= {(WORKLOADS.group, "workloads/status", "patch")}
        needed |= {(ADMISSIONCHECKS.group, "admissionchecks/status", "patch")}
    if hints:  # write_hints: merge_patch of every job kind
        needed |= {(res.group, res.plural, "patch") for res in KIND_RESOURCES.values()}
    workload_admission, trainjob_progress, expected_runtime = published
    if workload_admission:  # PredictionPublisher: apply_status and merge_patch of workloads
        needed |= {(WORKLOADS.group, p, "patch") for p in ("workloads", "workloads/status")}
    if trainjob_progress:  # PredictionPublisher: merge_patch of trainjobs
        needed.add((TRAINJOBS.group, TRAINJOBS.plural, "patch"))
    if expected_runtime:  # PredictionPublisher: merge_patch of every job kind
        needed |= {(res.group, res.plural, "patch") for res in KIND_RESOURCES.values()}
    if reviews:  # adapters.kubernetes.auth
        needed |= {
            ("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create"),
        }
    return needed


@pytest.mark.parametrize("everything", [False, True])
def test_the_cluster_role_grants_what_the_code_calls(everything: bool) -> None:
    # Probe: the ClusterRole lacked resourceflavors (watched by default), admissionchecks/status
    # and job patch, which docs/kubernetes.md lists.
    docs = render(EVERYTHING_ON if everything else {})
    granted = _granted(_cluster_role(docs))
    needed = what_the_code_calls(
        admission=everything,
        hints=everything,
        reviews=everything,
        published=(everything, everything, everything),
    )
    assert needed <= granted, needed - granted
    extra = {g for g in granted - needed if g[2] != "get" or "/" not in g[1]}
    assert not extra, extra  # nothing beyond what the code calls (get on a subresource aside)


def test_publishing_alone_grants_only_its_patches() -> None:
    docs = render(PUBLISH_ONLY)
    granted = _granted(_cluster_role(docs))
    needed = what_the_code_calls(
        admission=False, hints=False, reviews=False, published=(True, True, False)
    )
    assert needed <= granted, needed - granted
    extra = {g for g in granted - needed if g[2] != "get" or "/" not in g[1]}
    assert not extra, extra
    (container,) = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PLANNER_KUBERNETES__PUBLISH__WORKLOAD_ADMISSION"] == "true"
    assert env["PLANNER_KUBERNETES__PUBLISH__TRAINJOB_PROGRESS"] == "true"
    assert env["PLANNER_KUBERNETES__PUBLISH__EXPECTED_RUNTIME"] == "false"


def test_kubernetes_mode_ships_the_user_roles() -> None:
    docs = render(EVERYTHING_ON)
    roles = {
        d["metadata"]["name"]: d["rules"]
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] != "planner-llm-capacity-planner"
    }
    assert roles["planner-llm-capacity-planner-admin"] == [
        {
            "apiGroups": ["planner.llm"],
            "resources": ["roles"],
            "resourceNames": ["reader", "operator", "admin"],
            "verbs": ["use"],
        }
    ]
    assert roles["planner-llm-capacity-planner-reader"][0]["resourceNames"] == ["reader"]
    (container,) = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PLANNER_AUTH__MODE"] == "kubernetes"
    assert "PLANNER_AUTH__TOKEN_FILE" not in env
    assert not [d for d in docs if d["kind"] == "Secret"]
    for doc in docs:
        if doc["kind"] not in ("ServiceMonitor", "PrometheusRule"):
            kv.validate(doc, K8S_VERSIONS[-1], strict=True)


def test_token_mode_wires_a_secret_of_digests() -> None:
    digest = "5" * 64
    docs = render({"auth": {"tokens": [{"role": "operator", "name": "ci", "sha256": digest}]}})
    (secret,) = [d for d in docs if d["kind"] == "Secret"]
    assert secret["metadata"]["name"] == "planner-llm-capacity-planner-auth"
    assert f"operator ci sha256:{digest}" in secret["stringData"]["tokens"]
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PLANNER_AUTH__TOKEN_FILE"] == "/etc/planner/auth/tokens"
    assert env["PLANNER_AUTH__MODE"] == "token"
    assert env["PLANNER_AUTH__ANONYMOUS_READ"] == "false"
    assert env["PLANNER_READ_ONLY"] == "false"
    volume = next(v for v in pod["volumes"] if v["name"] == "auth")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert pod["terminationGracePeriodSeconds"] == 30
    kv.validate(secret, K8S_VERSIONS[-1], strict=True)
    # an existing Secret replaces the generated one; token values are never plain text
    own = render({"auth": {"existingSecret": "planner-tokens"}})
    assert not [d for d in own if d["kind"] == "Secret"]
    with pytest.raises(Exception, match="sha256"):
        render({"auth": {"tokens": [{"role": "admin", "name": "x", "sha256": "plain-token"}]}})


def test_the_network_policy_admits_only_scrapers_and_named_clients() -> None:
    # Probe: the NetworkPolicy admitted every pod.
    for values in ({}, {"networkPolicy": {"ingressFrom": [{"podSelector": {}}]}}):
        docs = render(values)
        (netpol,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
        for rule in netpol["spec"]["ingress"]:
            assert rule.get("from"), rule  # a rule without "from" admits everyone
    (default,) = [d for d in render({}) if d["kind"] == "NetworkPolicy"]
    (scrapers,) = default["spec"]["ingress"]
    assert scrapers["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    nobody = render({"networkPolicy": {"scrapers": [], "ingressFrom": []}})
    (closed,) = [d for d in nobody if d["kind"] == "NetworkPolicy"]
    assert closed["spec"]["ingress"] == []
