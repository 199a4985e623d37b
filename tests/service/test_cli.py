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
