"""End to end: the planner's real metrics fire alerts in a real Prometheus, which a real
Alertmanager delivers to a webhook (see conftest for the stack)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy import stack

from .conftest import RULES, PlannerStack, rules_without_for

pytestmark = pytest.mark.integration


def _alerts(body: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (a["labels"]["alertname"], a["labels"].get("job_id", a["labels"].get("cluster", "")))
        for a in body.get("alerts", [])
        if a.get("status") == "firing"
    }


def test_planner_alerts_reach_the_webhook(planner_stack: PlannerStack) -> None:
    sink = planner_stack.sink
    # Job 101 runs with 600 s of time limit and ~6500 s of predicted work left.
    body = sink.wait_for(
        lambda b: ("PlannerJobPredictedToMissTimeLimit", "101") in _alerts(b), timeout_s=60
    )
    alert = next(
        a
        for a in body["alerts"]
        if a["labels"]["alertname"] == "PlannerJobPredictedToMissTimeLimit"
    )
    assert alert["labels"] == {
        "alertname": "PlannerJobPredictedToMissTimeLimit",
        "severity": "warning",
        "scheduler": "slurm",
        "cluster": "feedcluster",
        "job_id": "101",
    }
    assert alert["annotations"]["runbook_url"].endswith(
        "/runbooks/PlannerJobPredictedToMissTimeLimit.md"
    )
    assert (
        "Job 101 on feedcluster is predicted to hit its time limit"
        in (alert["annotations"]["summary"])
    )
    assert body["receiver"] == "webhook"

    # The other conditions the fed cluster has: a slow rank, a queued job that cannot fit, a
    # model far off the observed pace (H100 prediction of a job that runs on CPUs).
    fired: set[tuple[str, str]] = set()

    def seen_all(b: dict[str, Any]) -> bool:
        fired.update(_alerts(b))
        return {
            ("PlannerJobStraggler", "101"),
            ("PlannerQueuedJobPredictedOOM", "103"),
            ("PlannerModelDrift", "feedcluster"),
        } <= fired

    sink.wait_for(seen_all, timeout_s=60)
    every = set().union(*(_alerts(b) for b in sink.bodies))
    assert not {a for a in every if a[0] in ("PlannerIngestStale", "PlannerJobETASlipped")}
    assert ("PlannerQueuedJobPredictedOOM", "102") not in every  # job 102 fits


def test_planner_down_fires_in_a_real_prometheus(
    planner_stack: PlannerStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The planner itself down or unscrapeable has its own alert. The running
    # planner keeps it quiet; a Prometheus whose planner target does not answer fires it.
    assert not planner_stack.prom.query('ALERTS{alertname="PlannerDown"}')
    root = tmp_path_factory.mktemp("planner-down")
    rules = root / "rules" / "planner.yml"
    rules_without_for(RULES, rules)
    dead = stack.start(
        root / "stack",
        scrape_jobs={"planner": [f"127.0.0.1:{stack.free_port()}"]},  # nothing listens
        rules_glob=str(rules),
    )
    try:
        firing = dead.wait_for('ALERTS{alertname="PlannerDown",alertstate="firing"}', timeout_s=60)
        assert firing[0]["metric"]["severity"] == "critical"
    finally:
        stack.stop(dead)
