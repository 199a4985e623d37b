"""`planner recommend`: human and JSON output, exit 2 when the deadline cannot be met."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from planner.cli import app
from tests.recommend.test_allocation import JOB

runner = CliRunner()


def test_recommend_json_and_human(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    result = runner.invoke(app, ["recommend", str(path), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert {"scaling", "knee", "recommendation", "smallest_meeting_deadline"} <= set(body)
    human = runner.invoke(app, ["recommend", str(path)])
    assert human.exit_code == 0
    assert "scaling curve" in human.output
    assert "knee:" in human.output


def test_recommend_unreachable_deadline_exits_2(tmp_path: Path) -> None:
    job = copy.deepcopy(JOB)
    job["recommend"]["deadline_s"] = 1.0
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    result = runner.invoke(app, ["recommend", str(path)])
    assert result.exit_code == 2
    assert "cannot be met" in result.output
