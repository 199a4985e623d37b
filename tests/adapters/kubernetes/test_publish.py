"""Predictions written onto Workloads and jobs (adapters.kubernetes.publish) against the fake API
server, with the recorded objects of tests/data/kubernetes/cluster.yaml (real client)."""

from __future__ import annotations

from typing import Any

from adapters.kubernetes.admission import AdmissionCheckController, CheckDecision, CheckState
from adapters.kubernetes.client import WORKLOADS, KubeApi
from adapters.kubernetes.publish import (
    ANNOTATION_ADMISSION_P50,
    ANNOTATION_ADMISSION_P90,
    ANNOTATION_ETA_P10,
    ANNOTATION_ETA_P50,
    ANNOTATION_ETA_P90,
    ANNOTATION_EXPECTED_RUNTIME,
    ANNOTATION_PROGRESS,
    FORECAST_FIELD_MANAGER,
    ChangeRule,
    PredictionPublisher,
    go_duration,
    parse_go_duration,
)
from adapters.kubernetes.translate import JobContext, job_state, parse_time, queue_products
from adapters.kubernetes.translate.kueue import flavor_product
from planner.capacity.pending import PublishedForecast
from tests.adapters.kubernetes.conftest import find, load_cluster
from tests.adapters.kubernetes.crd_schema import validate_object
from tests.k8s_fake import FakeKube, Fault

G, WL = "kueue.x-k8s.io", "workloads"
WL_NAME, NS = "pytorchjob-gpt-13b-8c1d2", "team-a"
NOW = parse_time("2026-11-20T09:10:00Z") or 0.0
GPT = "team-a/pytorchjob/gpt-13b"
MIXTRAL = "team-b/trainjob/mixtral"


def _pending(start_p50_s: float = 3600.0, made_at_s: float = NOW) -> PublishedForecast:
    return PublishedForecast(
        job_id=GPT,
        pending=True,
        start_s=(NOW + 0.5 * start_p50_s, NOW + start_p50_s, NOW + 2 * start_p50_s),
        made_at_s=made_at_s,
        completion_s=(NOW + 80000.0, NOW + 90000.0, NOW + 120000.0),
        expected_runtime_s=146366.0,
    )


def _running() -> PublishedForecast:
    return PublishedForecast(
        job_id=MIXTRAL,
        pending=False,
        completion_s=(NOW + 14000.0, NOW + 16200.0, NOW + 20000.0),
        progress_ratio=0.42,
        expected_runtime_s=58000.0,
    )


def _objects(fake: FakeKube) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """What the informers would hold: the Workloads and the job objects, as stored now."""
    workloads = [
        w
        for o in load_cluster()
        if o["kind"] == "Workload"
        and (w := fake.get(G, WL, o["metadata"]["name"], o["metadata"]["namespace"]))
    ]
    jobs: dict[str, list[dict[str, Any]]] = {}
    for group, plural, kind in (
        ("kubeflow.org", "pytorchjobs", "PyTorchJob"),
        ("trainer.kubeflow.org", "trainjobs", "TrainJob"),
        ("jobset.x-k8s.io", "jobsets", "JobSet"),
    ):
        for o in load_cluster():
            if o["kind"] == kind:
                stored = fake.get(group, plural, o["metadata"]["name"], o["metadata"]["namespace"])
                if stored is not None:
                    jobs.setdefault(plural, []).append(stored)
    return workloads, jobs


def _reserve_quota(fake: FakeKube) -> None:
    checks = [
        {"name": n, "state": "Pending", "message": "", "lastTransitionTime": "2026-11-20T09:12:00Z"}
        for n in ("llm-planner", "provisioning")
    ]
    quota = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "Quota reserved in ClusterQueue gpu-cq",
        "lastTransitionTime": "2026-11-20T09:12:00Z",
    }
    KubeApi(fake.api_client()).apply_status(
        WORKLOADS,
        WL_NAME,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": WL_NAME, "namespace": NS},
            "status": {"conditions": [quota], "admissionChecks": checks},
        },
        namespace=NS,
        field_manager="kueue-admission",
        force=True,
    )


def _publisher(fake: FakeKube, now_s: float = NOW, **kwargs: Any) -> PredictionPublisher:
    return PredictionPublisher(KubeApi(fake.api_client()), clock=lambda: now_s, **kwargs)


def _workload(fake: FakeKube) -> dict[str, Any]:
    wl = fake.get(G, WL, WL_NAME, NS)
    assert wl is not None
    assert validate_object(wl) == []  # the CRD's schema (metav1.Condition, annotations)
    return wl


def _conditions(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in wl["status"]["conditions"]}


def test_pending_workload_gets_the_condition_by_apply_and_annotations_by_merge(
    loaded_fake: FakeKube,
) -> None:
    workloads, jobs = _objects(loaded_fake)
    report = _publisher(loaded_fake).publish(workloads, jobs, {GPT: _pending()})
    assert report.errors == []
    wl = _workload(loaded_fake)
    cond = _conditions(wl)["PredictedAdmission"]
    assert cond["status"] == "True"
    assert cond["reason"] == "QueueForecast"
    assert "2026-11-20T10:10:00Z (p50)" in cond["message"]
    assert "by 2026-11-20T11:10:00Z (p90)" in cond["message"]
    assert cond["observedGeneration"] == 1
    assert cond["lastTransitionTime"] == "2026-11-20T09:10:00Z"
    assert _conditions(wl)["QuotaReserved"]["status"] == "False"  # Kueue's own, untouched
    annotations = wl["metadata"]["annotations"]
    assert annotations[ANNOTATION_ADMISSION_P50] == "2026-11-20T10:10:00Z"
    assert annotations[ANNOTATION_ADMISSION_P90] == "2026-11-20T11:10:00Z"
    # the verbs: server-side apply on the status subresource, merge patch on the object
    owners = loaded_fake.owners(G, WL, WL_NAME, NS)
    assert any(
        "PredictedAdmission" in str(p) for p in owners[(FORECAST_FIELD_MANAGER, "Apply", "status")]
    )
    assert (FORECAST_FIELD_MANAGER, "Apply", "") not in owners
    patched = [p for m, p in loaded_fake.requests if m == "PATCH" and WL_NAME in p]
    assert {p.split("?")[0].rsplit("/", 1)[-1] for p in patched} == {"status", WL_NAME}
    merged = owners[("llm-capacity-planner", "Update", "")]
    assert any(ANNOTATION_ADMISSION_P50 in str(p) for p in merged)


def test_nothing_is_rewritten_until_the_forecast_moves_enough(loaded_fake: FakeKube) -> None:
    workloads, jobs = _objects(loaded_fake)
    _publisher(loaded_fake).publish(workloads, jobs, {GPT: _pending(3600.0)})
    version = _workload(loaded_fake)["metadata"]["resourceVersion"]
    # 2 minutes later, the p50 moved 5 minutes on an hour ahead: under 10 % of the time ahead
    workloads, jobs = _objects(loaded_fake)
    report = _publisher(loaded_fake, NOW + 120).publish(
        workloads, jobs, {GPT: _pending(3600.0 + 300, NOW + 120)}
    )
    assert report.written == {}
    assert _workload(loaded_fake)["metadata"]["resourceVersion"] == version
    # the p50 moved by 40 minutes: both are written again, the transition time stays
    workloads, jobs = _objects(loaded_fake)
    report = _publisher(loaded_fake, NOW + 240).publish(
        workloads, jobs, {GPT: _pending(3600.0 + 2400, NOW + 240)}
    )
    assert report.written == {"workload_condition": 1, "workload_annotations": 1}
    wl = _workload(loaded_fake)
    assert wl["metadata"]["annotations"][ANNOTATION_ADMISSION_P50] == "2026-11-20T10:50:00Z"
    assert _conditions(wl)["PredictedAdmission"]["lastTransitionTime"] == "2026-11-20T09:10:00Z"


def test_condition_turns_false_once_quota_is_reserved_and_keeps_the_admission_check(
    loaded_fake: FakeKube,
) -> None:
    workloads, jobs = _objects(loaded_fake)
    _publisher(loaded_fake).publish(workloads, jobs, {GPT: _pending()})
    # Kueue reserves quota and adds the checks (server-side apply under its own manager, which
    # holds only its entries); the AdmissionCheck controller (field manager
    # llm-capacity-planner) decides ours
    _reserve_quota(loaded_fake)
    wl = _workload(loaded_fake)
    assert _conditions(wl)["PredictedAdmission"]["status"] == "True"  # Kueue's apply kept it
    AdmissionCheckController(
        loaded_fake.api_client(),
        decide=lambda _s: CheckDecision(state=CheckState.READY, message="ok"),
        clock=lambda: NOW,
    ).reconcile_workload(wl, {"llm-planner"})
    workloads, jobs = _objects(loaded_fake)
    report = _publisher(loaded_fake, NOW + 60).publish(workloads, jobs, {GPT: _pending()})
    assert report.written == {"workload_condition": 1}
    wl = _workload(loaded_fake)
    cond = _conditions(wl)["PredictedAdmission"]
    assert (cond["status"], cond["reason"]) == ("False", "QuotaReserved")
    assert "2026-11-20T10:10:00Z" in cond["message"]  # the last prediction, to compare
    checks = {c["name"]: c["state"] for c in wl["status"]["admissionChecks"]}
    assert checks == {"llm-planner": "Ready", "provisioning": "Pending"}
    # settled: a further pass writes nothing
    workloads, jobs = _objects(loaded_fake)
    assert (
        _publisher(loaded_fake, NOW + 120).publish(workloads, jobs, {GPT: _pending()}).written == {}
    )


def test_no_admission_within_the_horizon_is_unknown(loaded_fake: FakeKube) -> None:
    workloads, jobs = _objects(loaded_fake)
    forecast = PublishedForecast(job_id=GPT, pending=True, start_s=None, made_at_s=NOW)
    _publisher(loaded_fake).publish(workloads, jobs, {GPT: forecast})
    wl = _workload(loaded_fake)
    cond = _conditions(wl)["PredictedAdmission"]
    assert (cond["status"], cond["reason"]) == ("Unknown", "BeyondHorizon")
    assert ANNOTATION_ADMISSION_P50 not in (wl["metadata"].get("annotations") or {})
    # no forecast made yet: nothing said at all
    loaded_fake.put(find(load_cluster(), "Workload", WL_NAME))
    workloads, jobs = _objects(loaded_fake)
    unmade = PublishedForecast(job_id=GPT, pending=True)
    assert _publisher(loaded_fake).publish(workloads, jobs, {GPT: unmade}).written == {}


def test_running_trainjob_gets_progress_and_eta_band_and_jobs_their_expected_runtime(
    loaded_fake: FakeKube,
) -> None:
    workloads, jobs = _objects(loaded_fake)
    report = _publisher(loaded_fake).publish(
        workloads, jobs, {GPT: _pending(), MIXTRAL: _running()}
    )
    assert report.errors == []
    trainjob = loaded_fake.get("trainer.kubeflow.org", "trainjobs", "mixtral", "team-b")
    assert trainjob is not None
    assert validate_object(trainjob) == []
    annotations = trainjob["metadata"]["annotations"]
    assert annotations[ANNOTATION_PROGRESS] == "0.420"
    assert annotations[ANNOTATION_ETA_P10] == "2026-11-20T13:03:20Z"
    assert annotations[ANNOTATION_ETA_P50] == "2026-11-20T13:40:00Z"
    assert annotations[ANNOTATION_ETA_P90] == "2026-11-20T14:43:20Z"
    assert annotations[ANNOTATION_EXPECTED_RUNTIME] == "16h7m"
    pytorchjob = loaded_fake.get("kubeflow.org", "pytorchjobs", "gpt-13b", "team-a")
    assert pytorchjob is not None
    pj_annotations = pytorchjob["metadata"]["annotations"]
    assert pj_annotations[ANNOTATION_EXPECTED_RUNTIME] == "40h39m"
    assert ANNOTATION_PROGRESS not in pj_annotations  # progress only on TrainJobs
    assert "planner.llm/scenario" in pj_annotations  # the user's annotation stays
    # only the job kinds asked for
    loaded_fake.requests.clear()
    workloads, jobs = _objects(loaded_fake)
    moved = PublishedForecast(
        job_id=MIXTRAL, pending=False, progress_ratio=0.6, expected_runtime_s=58000.0
    )
    only_runtime = _publisher(loaded_fake, progress=False, workloads=False)
    assert only_runtime.publish(workloads, jobs, {MIXTRAL: moved}).written == {}
    assert not [m for m, _p in loaded_fake.requests if m == "PATCH"]


def test_errors_are_collected_per_object(loaded_fake: FakeKube) -> None:
    loaded_fake.faults.append(Fault(status=403, method="PATCH", path="/workloads/", times=5))
    workloads, jobs = _objects(loaded_fake)
    report = _publisher(loaded_fake).publish(
        workloads, jobs, {GPT: _pending(), MIXTRAL: _running()}
    )
    assert len(report.errors) == 1
    assert report.errors[0].startswith(f"workload {NS}/{WL_NAME}: ")
    assert "403" in report.errors[0]
    assert report.written == {"pytorchjob_annotations": 1, "trainjob_annotations": 1}


def test_change_rule_and_durations() -> None:
    rule = ChangeRule(min_change_s=60.0, min_change_ratio=0.1)
    key = ANNOTATION_ADMISSION_P50
    assert not rule.moved(key, "2026-11-20T10:00:00Z", "2026-11-20T10:00:50Z", now_s=NOW)
    assert rule.moved(key, "2026-11-20T10:00:00Z", "2026-11-20T10:06:00Z", now_s=NOW)
    assert not rule.moved(ANNOTATION_PROGRESS, "0.420", "0.425", now_s=NOW)
    assert rule.moved(ANNOTATION_PROGRESS, "0.420", "0.430", now_s=NOW)
    assert rule.moved(key, None, "2026-11-20T10:00:00Z", now_s=NOW)
    assert rule.moved(key, "garbage", "2026-11-20T10:00:00Z", now_s=NOW)
    assert [go_duration(s) for s in (0, 59, 2700, 96000)] == ["0m", "1m", "45m", "26h40m"]
    assert parse_go_duration("26h40m") == 96000.0
    assert parse_go_duration("45m") == 2700.0
    assert parse_go_duration("2d") is None


def test_a_waiting_workload_runs_on_its_cluster_queues_gpu_flavor() -> None:
    """A pending Workload has no flavor assigned yet: its GPU type is its ClusterQueue's (the
    queue forecast could otherwise place it in no pool)."""
    cluster = load_cluster()
    flavors = {
        o["metadata"]["name"]: p
        for o in cluster
        if o["kind"] == "ResourceFlavor" and (p := flavor_product(o))
    }
    products = queue_products([o for o in cluster if o["kind"] == "ClusterQueue"], flavors)
    assert products == {"gpu-cq": "NVIDIA-H100-80GB-HBM3"}
    job = job_state(
        "pytorchjob",
        find(cluster, "PyTorchJob", "gpt-13b"),
        JobContext(
            workload=find(cluster, "Workload", WL_NAME),
            local_queues={("team-a", "team-a-queue"): "gpu-cq"},
            flavor_products=flavors,
            queue_products=products,
        ),
        cluster="k8s-test",
    )
    assert (job.status.value, job.partition, job.gpu_type) == (
        "pending",
        "gpu-cq",
        "NVIDIA-H100-80GB-HBM3",
    )
