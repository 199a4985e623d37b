"""The alert rules: promtool check + unit tests, runbooks, and the rules' contract."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy import stack

REPO = stack.REPO
RULES = REPO / "deploy" / "prometheus" / "rules" / "planner.yml"
UNIT_TESTS = Path(__file__).resolve().parent / "promtool" / "planner_test.yml"
RUNBOOKS = REPO / "runbooks"
EXPECTED_ALERTS = {
    "PlannerJobETASlipped",
    "PlannerJobStraggler",
    "PlannerJobSlowedDown",  # a sustained slower phase, not a straggler or a pause
    "PlannerJobPredictedToMissTimeLimit",
    "PlannerQueuedJobPredictedOOM",
    "PlannerModelDrift",
    "PlannerIngestStale",
    "PlannerDown",  # the planner itself down or unscrapeable
}


def _alerts() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def _promtool(*args: str) -> str:
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed: run deploy/dev/install-deps.sh (Debian prometheus)")
    proc = subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_promtool_check_rules() -> None:
    out = _promtool("check", "rules", str(RULES))
    assert "SUCCESS: 9 rules found" in out


def test_promtool_unit_tests_cover_every_alert() -> None:
    out = _promtool("test", "rules", str(UNIT_TESTS))
    assert "SUCCESS" in out
    tested = set(re.findall(r"alertname: (\w+)", UNIT_TESTS.read_text()))
    assert tested == EXPECTED_ALERTS
    # every alert has at least one case where it fires
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    firing = {
        case["alertname"]
        for test in doc["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert firing == EXPECTED_ALERTS


def test_every_alert_has_a_runbook_and_the_annotations() -> None:
    alerts = _alerts()
    assert {a["alert"] for a in alerts} == EXPECTED_ALERTS
    for a in alerts:
        name = str(a["alert"])
        labels = a["labels"]
        annotations = a["annotations"]
        assert isinstance(labels, dict)
        assert labels["severity"] in ("warning", "critical"), name
        assert isinstance(annotations, dict)
        assert annotations["summary"], name
        assert annotations["description"], name
        url = str(annotations["runbook_url"])
        assert url.endswith(f"/runbooks/{name}.md"), url
        page = (RUNBOOKS / f"{name}.md").read_text()
        assert page.startswith(f"# {name}\n"), name
        for section in ("## Meaning", "## First checks", "## Remedies", "## Escalation"):
            assert section in page, f"{name}.md lacks {section}"
    index = (RUNBOOKS / "README.md").read_text()
    assert all(f"`{name}`" in index for name in EXPECTED_ALERTS)


def test_rules_reference_only_metrics_the_planner_exports() -> None:
    from planner.service import metrics

    exported = set(re.findall(r"``(planner_\w+)", metrics.__doc__ or ""))
    used = set(re.findall(r"\b(planner_[a-z_]+)\b", RULES.read_text()))
    assert used <= exported, used - exported
