"""`planner explore`: JSON contract, JSONL sweeps, exit status 2 for invalid or infeasible."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.scenario import predict_documents
from planner.scenario.plans import scenario_document

runner = CliRunner()


def test_explore_json_contract(tmp_path: Path, small: dict[str, Any]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(small))
    result = runner.invoke(app, ["explore", str(path), "--json", "--top-k", "3", "--workers", "1"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert set(body) >= {"top", "pareto", "counts"}
    assert set(body["counts"]) >= {"enumerated", "evaluated", "rejected"}
    best = body["top"][0]
    assert set(best) >= {"parallelism", "prediction"}
    doc = scenario_document(small, best["parallelism"], best["num_gpus"])
    assert predict_documents([doc])[0] == best["prediction"]  # = `planner predict --json`


def test_explore_jsonl_sweep_and_exit_2(tmp_path: Path, small: dict[str, Any]) -> None:
    other = {**small, "name": "on-8", "hardware": {"gpu": "a100-80gb", "num_gpus": 8}}
    bad = {**small, "name": "bad", "parallelism": {"global_batch_size": 64, "zero_stage": 7}}
    path = tmp_path / "sweep.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in (small, other, bad)) + "\n")
    result = runner.invoke(app, ["explore", str(path), "--json", "--top-k", "1"])
    assert result.exit_code == 2
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [line["name"] for line in lines] == ["small", "on-8", "bad"]
    assert lines[1]["top"][0]["num_gpus"] == 8
    assert lines[2]["error"].startswith("parallelism.zero_stage:")


def test_explore_human_output(tmp_path: Path, small: dict[str, Any]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(small))
    result = runner.invoke(app, ["explore", str(path), "--top-k", "2"])
    assert result.exit_code == 0
    assert "candidates enumerated" in result.output
    assert "Pareto front" in result.output


def test_explore_infeasible_exits_2(tmp_path: Path, small: dict[str, Any]) -> None:
    small["model"] = {"preset": "gpt3-175b"}
    small["hardware"]["num_gpus"] = 8
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(small))
    result = runner.invoke(app, ["explore", str(path)])
    assert result.exit_code == 2
    assert "out of memory" in result.output


def test_explore_unknown_objective(tmp_path: Path, small: dict[str, Any]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(small))
    result = runner.invoke(app, ["explore", str(path), "--objective", "speed"])
    assert result.exit_code == 2
