"""planner calibrate observe, and planner predict --calibration telling the two kinds of
calibration file apart (operator models through the same option: tests/service/test_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app
from tests.calibration.test_observed import _runs_text, _scenario

runner = CliRunner()


def test_observe_writes_a_calibration_that_predict_uses(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text(_runs_text(1.3) + "not json\n")
    out = tmp_path / "observed.json"
    res = runner.invoke(app, ["calibrate", "observe", str(runs), "--out", str(out)])
    assert res.exit_code == 2, res.output  # the bad line is reported, the others used
    assert "runs.jsonl:13" in res.output
    assert "learnt from 12 runs (1 left out)" in res.output
    assert "held-out error (5-fold cross-validation)" in res.output
    assert "east h100-sxm bf16 megatron dense: 12 runs" in res.output
    assert "within keys (runs most like the prediction weigh most): dense " in res.output
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps(_scenario(2, 8)))
    res = runner.invoke(
        app,
        ["predict", str(scenario), "--calibration", str(out), "--cluster", "east", "--json"],
    )
    assert res.exit_code == 0, res.output
    result = json.loads(res.output)
    assert result["calibration"]["method"] == "observed_runs"
    assert result["calibrated_iteration_time_s"] > 1.2 * result["iteration_time_s"]
    human = runner.invoke(app, ["predict", str(scenario), "--calibration", str(out)])
    assert "calibrated from observed runs" in human.output


def test_observe_json_summary_and_no_usable_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text(_runs_text(1.1))
    res = runner.invoke(app, ["calibrate", "observe", str(runs), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["num_runs"] == 12
    assert summary["keys"][0]["num_runs"] == 12
    local = summary["local_residual"]
    assert [c["family"] for c in local] == ["dense"]
    assert local[0]["selected"] in ("none", "kernel")
    assert set(local[0]["cv_mse"]) >= {"none"}
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"scenario": {}, "iteration_time_s": 1}\n')
    res = runner.invoke(app, ["calibrate", "observe", str(empty)])
    assert res.exit_code == 2
    assert "no usable observed run" in res.output


def test_predict_tells_the_calibration_kinds_apart(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps(_scenario(1, 1)))
    res = runner.invoke(app, ["predict", str(scenario), "--calibration", str(scenario)])
    assert res.exit_code == 2
    assert "is neither planner-calibration/1" in res.output
    assert "planner-observed-runs/11" in res.output


def test_observe_names_a_hung_run_and_learns_from_the_others(tmp_path: Path) -> None:
    """Twelve runs at 1.3 times the model and one more of the same key at 20 times (a job
    that hung): the hung one is left out and named on stderr, not an invalid run (exit 0)."""
    hung = json.loads(_runs_text(20.0).splitlines()[0])
    runs = tmp_path / "runs.jsonl"
    runs.write_text(_runs_text(1.3) + json.dumps(hung) + "\n")
    res = runner.invoke(app, ["calibrate", "observe", str(runs), "--json"])
    assert res.exit_code == 0, res.output
    assert f"{runs}:13: iteration_time_s: " in res.output
    summary = json.loads(res.output.splitlines()[-1])
    assert (summary["num_runs"], summary["num_invalid"], summary["num_far_off"]) == (12, 0, 1)
    assert summary["keys"][0]["num_runs"] == 12
