"""`planner predict`: output contract, error lines, exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()

GOOD = {
    "name": "good",
    "model": {"preset": "llama2-7b"},
    "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
    "parallelism": {"tensor_parallel": 2, "global_batch_size": 32},
}


def test_predict_json_batch_with_one_bad_line(tmp_path: Path) -> None:
    batch = tmp_path / "batch.jsonl"
    bad = {**GOOD, "name": "bad", "parallelism": {"tensor_parallel": 3, "global_batch_size": 32}}
    batch.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n{not json\n")
    result = runner.invoke(app, ["predict", str(batch), "--json"])
    assert result.exit_code == 2
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 3
    assert lines[0]["name"] == "good"
    assert lines[0]["iteration_time_s"] > 0
    assert lines[1]["name"] == "bad"
    assert lines[1]["error"].startswith("parallelism.")
    assert "error" in lines[2]


def test_predict_valid_yaml_exits_zero(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(GOOD))
    result = runner.invoke(app, ["predict", str(path)])
    assert result.exit_code == 0, result.stdout
    assert result.stdout.startswith("good: iteration")


def test_missing_file_is_an_error_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["predict", str(tmp_path / "nope.yaml"), "--json"])
    assert result.exit_code == 2
    line = json.loads(result.stdout)
    assert "nope.yaml" in line["error"]
    assert "Traceback" not in result.stdout


def test_predict_with_a_calibration_says_which_it_used(tmp_path: Path) -> None:
    from planner.calibration import fit_calibration, read_op_samples_csv

    samples = Path(__file__).resolve().parents[1] / "data" / "calibration"
    lines = (samples / "cpu_epyc_2core_fp32" / "op_samples.csv").read_text().splitlines()
    subset = "\n".join([lines[0], *[row for row in lines[1:] if row.startswith("gemm,")][:60]])
    cal = tmp_path / "cal.json"
    cal.write_text(fit_calibration(read_op_samples_csv(subset + "\n")).to_json())
    scenario = tmp_path / "s.yaml"
    scenario.write_text(json.dumps(GOOD))
    result = runner.invoke(
        app,
        [
            "predict",
            str(scenario),
            "--json",
            "--calibration",
            str(cal),
            "--device-key",
            "a100-80gb",
        ],
    )
    assert result.exit_code == 0, result.stdout
    line = json.loads(result.stdout)
    assert line["iteration_time_s"] > 0
    assert line["efficiency_model"]["efficiency_model"] == "CalibratedEfficiency"
    assert line["efficiency_model"]["device_key"] == "a100-80gb"

    missing = runner.invoke(app, ["predict", str(scenario), "--calibration", str(tmp_path / "x")])
    assert missing.exit_code == 2
