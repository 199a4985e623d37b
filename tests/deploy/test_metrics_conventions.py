"""The planner's own /metrics, as a real planner process serves them (conftest), linted with
``promtool check metrics`` and checked against Prometheus naming conventions."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .conftest import PlannerStack, planner_metrics

pytestmark = pytest.mark.integration

#: What promtool reports today, reported to the service's owners; the test fails on anything new.
#: - a "quantile" label is reserved for summaries: planner_job_eta_seconds{quantile} should use
#:   another label name (e.g. percentile="10|50|90") or one gauge per bound;
#: - planner_job_straggler_hours_lost is in hours, not the base unit (seconds);
#: - planner_capacity_forecast_gpus{quantile} likewise.
KNOWN_PROMTOOL_FINDINGS = {
    'planner_job_eta_seconds non-summary metrics should not have "quantile" label',
    'planner_capacity_forecast_gpus non-summary metrics should not have "quantile" label',
    'planner_job_straggler_hours_lost use base unit "seconds" instead of "hours"',
}
JOB_LABELS = {"scheduler", "cluster", "job_id"}


def test_promtool_check_metrics(planner_stack: PlannerStack) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed: run deploy/dev/install-deps.sh")
    text = planner_metrics(planner_stack.planner_url)
    proc = subprocess.run(
        ["promtool", "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    findings = {line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()}
    assert findings <= KNOWN_PROMTOOL_FINDINGS, findings - KNOWN_PROMTOOL_FINDINGS


def test_names_help_and_labels_follow_conventions(planner_stack: PlannerStack) -> None:
    text = planner_metrics(planner_stack.planner_url)
    helps = dict(re.findall(r"^# HELP (\S+) (.+)$", text, re.MULTILINE))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    planner = {n for n in types if n.startswith("planner_")}
    assert len(planner) >= 17
    for name in planner:
        assert re.fullmatch(r"planner(_[a-z0-9]+)+", name), name
        assert helps.get(name, "").endswith("."), f"{name}: help text"
        if types[name] == "gauge":
            assert not name.endswith("_total"), name
    # Units named in help texts of unit-suffixed metrics.
    for name in planner:
        if name.endswith("_timestamp_seconds"):
            assert "epoch seconds" in helps[name], name
        elif name.endswith("_seconds"):
            assert "seconds" in helps[name] or "Seconds" in helps[name], name
        if name.endswith("_bytes"):
            assert "bytes" in helps[name], name
    # Bounded cardinality: job series carry exactly the job labels (+ the documented extras).
    extras = {
        "planner_job_info": {"name", "user", "status", "described_by"},
        "planner_job_eta_seconds": {"quantile"},
        # one series per flagged rank only (bounded by the detector's flags)
        "planner_job_straggler_rank_slowdown_ratio": {"rank", "node"},
    }
    for name, labels in re.findall(r"^(planner_job_\w+)\{([^}]*)\}", text, re.MULTILINE):
        keys = set(re.findall(r'(\w+)="', labels))
        assert keys == JOB_LABELS | extras.get(name, set()), (name, keys)
    # The feed's running job slows x1.5 at its 10th interval (its straggler's doing): a phase,
    # exported as the latest sustained change of pace and where it began.
    for name in ("planner_job_phase_slowdown_ratio", "planner_job_phase_start_iteration"):
        assert types.get(name) == "gauge", name
        assert re.search(rf"^{name}\{{[^}}]*\}} ", text, re.MULTILINE), name
