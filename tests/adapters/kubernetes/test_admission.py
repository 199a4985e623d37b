"""AdmissionCheck controller and hint annotations against the fake API server (real client)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.kubernetes.admission import (
    AdmissionCheckController,
    CheckDecision,
    CheckState,
    JobHints,
    WorkloadSnapshot,
    write_hints,
)
from adapters.kubernetes.client import WORKLOADS, ConflictError, KubeApi
from adapters.kubernetes.translate import parse_time
from tests.adapters.kubernetes.conftest import find, load_cluster
from tests.adapters.kubernetes.crd_schema import validate_object
from tests.k8s_fake import FakeKube

G, WL = "kueue.x-k8s.io", "workloads"
NOW = parse_time("2026-11-20T09:10:00Z") or 0.0


def _pending_workload(fake: FakeKube) -> dict[str, Any]:
    """The gpt-13b Workload after Kueue reserved quota and added both checks as Pending (Kueue
    writes them by server-side apply under its own manager, as it does)."""
    wl = find(load_cluster(), "Workload", "pytorchjob-gpt-13b-8c1d2")
    wl["status"]["conditions"] = [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "Quota reserved in ClusterQueue gpu-cq",
            "lastTransitionTime": "2026-11-20T09:05:00Z",
        }
    ]
    wl["status"]["admission"] = {
        "clusterQueue": "gpu-cq",
        "podSetAssignments": [
            {"name": "master", "count": 1, "flavors": {"nvidia.com/gpu": "h100"}},
            {"name": "worker", "count": 1, "flavors": {"nvidia.com/gpu": "h100"}},
        ],
    }
    fake.put(wl)
    api = KubeApi(fake.api_client())
    checks = [
        {
            "name": name,
            "state": "Pending",
            "message": "",
            "lastTransitionTime": "2026-11-20T09:05:00Z",
        }
        for name in ("llm-planner", "provisioning")
    ]
    api.apply_status(
        WORKLOADS,
        wl["metadata"]["name"],
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": wl["metadata"]["name"], "namespace": "team-a"},
            "status": {"admissionChecks": checks},
        },
        namespace="team-a",
        field_manager="kueue-admission",
        force=True,  # Kueue forces ownership when it (re)sets checks, as every controller does
    )
    stored = fake.get(G, WL, wl["metadata"]["name"], "team-a")
    assert stored is not None
    return stored


def _checks(fake: FakeKube) -> dict[str, dict[str, Any]]:
    wl = fake.get(G, WL, "pytorchjob-gpt-13b-8c1d2", "team-a")
    assert wl is not None
    assert validate_object(wl) == []
    return {c["name"]: c for c in wl["status"]["admissionChecks"]}


def _controller(fake: FakeKube, decide: Any = None, **kwargs: Any) -> AdmissionCheckController:
    return AdmissionCheckController(fake.api_client(), decide=decide, clock=lambda: NOW, **kwargs)


def test_marks_only_our_admission_check_active(loaded_fake: FakeKube) -> None:
    controller = _controller(loaded_fake)
    checks = [o for o in load_cluster() if o["kind"] == "AdmissionCheck"]
    assert controller.mark_active(checks) == ["llm-planner"]
    ours = loaded_fake.get(G, "admissionchecks", "llm-planner")
    assert ours is not None
    assert validate_object(ours) == []
    assert ours["status"]["conditions"][0]["type"] == "Active"
    assert ours["status"]["conditions"][0]["status"] == "True"
    patched = [path for method, path in loaded_fake.requests if method == "PATCH"]
    assert patched == [
        next(p for p in patched if "/admissionchecks/llm-planner/status" in p)
    ]  # the other controller's check is not touched
    # Already active: a second pass writes nothing.
    assert controller.mark_active([ours]) == ["llm-planner"]
    assert len([m for m, _p in loaded_fake.requests if m == "PATCH"]) == 1


def test_ssa_writes_only_our_entry_and_keeps_other_owners(loaded_fake: FakeKube) -> None:
    wl = _pending_workload(loaded_fake)
    controller = _controller(
        loaded_fake,
        decide=lambda s: CheckDecision(
            state=CheckState.READY, message="ETA 2026-11-22T10:00Z, 16 GPUs, tp=2"
        ),
    )
    assert controller.reconcile_workload(wl, {"llm-planner"}) == "Ready"
    checks = _checks(loaded_fake)
    assert checks["llm-planner"]["state"] == "Ready"
    assert checks["llm-planner"]["message"].startswith("ETA 2026-11-22")
    assert checks["llm-planner"]["lastTransitionTime"] == "2026-11-20T09:10:00Z"
    assert checks["provisioning"] == {
        "name": "provisioning",
        "state": "Pending",
        "message": "",
        "lastTransitionTime": "2026-11-20T09:05:00Z",
    }
    owners = loaded_fake.owners(G, WL, "pytorchjob-gpt-13b-8c1d2", "team-a")
    ours = owners[("llm-capacity-planner", "Apply", "status")]
    theirs = owners[("kueue-admission", "Apply", "status")]
    assert all('"name":"llm-planner"' in str(p) for p in ours)
    assert any('"name":"provisioning"' in str(p) for p in theirs)
    assert not any('"name":"llm-planner"' in str(p) and "state" in str(p) for p in theirs)
    managers = {
        m["manager"]
        for m in loaded_fake.get(G, WL, "pytorchjob-gpt-13b-8c1d2", "team-a")["metadata"][
            "managedFields"
        ]
    }  # type: ignore[index]
    assert managers == {"llm-capacity-planner", "kueue-admission"}


def test_without_force_the_apply_conflicts_with_kueue(loaded_fake: FakeKube) -> None:
    _pending_workload(loaded_fake)
    api = KubeApi(loaded_fake.api_client())
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "pytorchjob-gpt-13b-8c1d2", "namespace": "team-a"},
        "status": {
            "admissionChecks": [
                {
                    "name": "llm-planner",
                    "state": "Ready",
                    "message": "x",
                    "lastTransitionTime": "2026-11-20T09:10:00Z",
                }
            ]
        },
    }
    with pytest.raises(ConflictError, match="kueue-admission"):
        api.apply_status(
            WORKLOADS, "pytorchjob-gpt-13b-8c1d2", body, namespace="team-a", force=False
        )


def test_a_merge_patch_would_clobber_other_checks(loaded_fake: FakeKube) -> None:
    """Why SSA: the same change as a merge patch replaces the whole list."""
    _pending_workload(loaded_fake)
    api = KubeApi(loaded_fake.api_client())
    status = {
        "admissionChecks": [
            {
                "name": "llm-planner",
                "state": "Ready",
                "message": "x",
                "lastTransitionTime": "2026-11-20T09:10:00Z",
            }
        ]
    }
    api._custom.patch_namespaced_custom_object_status(
        G,
        "v1beta2",
        "team-a",
        WL,
        "pytorchjob-gpt-13b-8c1d2",
        {"status": status},
        _content_type="application/merge-patch+json",
    )
    assert set(_checks(loaded_fake)) == {"llm-planner"}


def test_second_pass_writes_nothing(loaded_fake: FakeKube) -> None:
    wl = _pending_workload(loaded_fake)
    controller = _controller(
        loaded_fake, decide=lambda s: CheckDecision(state=CheckState.READY, message="ok")
    )
    controller.reconcile_workload(wl, {"llm-planner"})
    writes = len([r for r in loaded_fake.requests if r[0] == "PATCH"])
    again = loaded_fake.get(G, WL, "pytorchjob-gpt-13b-8c1d2", "team-a")
    assert controller.reconcile_workload(again, {"llm-planner"}) == "skipped"  # no longer Pending
    assert len([r for r in loaded_fake.requests if r[0] == "PATCH"]) == writes


def test_gating_is_opt_in_per_queue(loaded_fake: FakeKube) -> None:
    def decide(s: WorkloadSnapshot) -> CheckDecision:
        assert (s.job_id, s.num_gpus, s.cluster_queue) == (
            "team-a/pytorchjob/gpt-13b",
            16,
            "gpu-cq",
        )
        return CheckDecision(
            state=CheckState.RETRY, message="ETA misses the deadline", requeue_after_s=600
        )

    wl = _pending_workload(loaded_fake)
    assert (
        _controller(loaded_fake, decide=decide).reconcile_workload(wl, {"llm-planner"}) == "Ready"
    )
    assert "would be Retry" in _checks(loaded_fake)["llm-planner"]["message"]

    wl = _pending_workload(loaded_fake)
    gated = _controller(loaded_fake, decide=decide, gating_queues={"team-a/team-a-queue"})
    assert gated.reconcile_workload(wl, {"llm-planner"}) == "Retry"
    check = _checks(loaded_fake)["llm-planner"]
    assert (check["state"], check["requeueAfterSeconds"]) == ("Retry", 600)


def test_undecided_waits_for_the_grace_period_then_readies(loaded_fake: FakeKube) -> None:
    wl = _pending_workload(loaded_fake)  # Pending since 09:05, now is 09:10

    def broken(_s: WorkloadSnapshot) -> CheckDecision:
        raise RuntimeError("model store unreachable")

    assert (
        _controller(loaded_fake, decide=broken, grace_period_s=600).reconcile_workload(
            wl, {"llm-planner"}
        )
        == "waiting"
    )
    assert _checks(loaded_fake)["llm-planner"]["state"] == "Pending"
    assert (
        _controller(loaded_fake, decide=broken, grace_period_s=120).reconcile_workload(
            wl, {"llm-planner"}
        )
        == "Ready"
    )
    message = _checks(loaded_fake)["llm-planner"]["message"]
    assert "model store unreachable" in message
    assert "never blocks" in message


def test_reconcile_pass_collects_errors(loaded_fake: FakeKube) -> None:
    wl = _pending_workload(loaded_fake)
    gone = dict(wl, metadata={**wl["metadata"], "name": "deleted-meanwhile"})
    controller = _controller(loaded_fake)
    report = controller.reconcile(
        [wl, gone], [o for o in load_cluster() if o["kind"] == "AdmissionCheck"]
    )
    assert report.active_checks == ["llm-planner"]
    assert report.written == {"Ready": 1}
    assert len(report.errors) == 1
    assert "deleted-meanwhile" in report.errors[0]


def test_hint_annotations_merge_with_others(loaded_fake: FakeKube) -> None:
    api = KubeApi(loaded_fake.api_client())
    write_hints(
        api,
        "team-a/pytorchjob/gpt-13b",
        JobHints(
            predicted_runtime_s=36000.4,
            eta_s=NOW + 36000,
            recommended_gpus=16,
            recommended_parallelism="tp=2,pp=1,dp=8",
        ),
    )
    obj = loaded_fake.get("kubeflow.org", "pytorchjobs", "gpt-13b", "team-a")
    assert obj is not None
    notes = obj["metadata"]["annotations"]
    assert notes["planner.llm/predicted-runtime-seconds"] == "36000"
    assert notes["planner.llm/eta"] == "2026-11-20T19:10:00Z"
    assert notes["planner.llm/recommended-parallelism"] == "tp=2,pp=1,dp=8"
    assert "planner.llm/scenario" in notes  # the user's annotation stays
    write_hints(api, "team-a/pytorchjob/gpt-13b", JobHints(recommended_gpus=8))
    notes = loaded_fake.get("kubeflow.org", "pytorchjobs", "gpt-13b", "team-a")["metadata"][
        "annotations"
    ]  # type: ignore[index]
    assert "planner.llm/eta" not in notes
    assert notes["planner.llm/recommended-gpus"] == "8"
    write_hints(api, "team-b/job/eval-7b", JobHints(recommended_gpus=1))
    with pytest.raises(ValueError, match="namespace/kind/name"):
        write_hints(api, "slurm-123", JobHints())
