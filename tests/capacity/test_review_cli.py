"""``planner review`` as a user runs it: the three outputs, the summary lines, and a clear
located message with exit status 2 for a bad input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def test_review_writes_html_json_and_markdown(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "review", str(EXAMPLES / "fleet.yaml"), str(EXAMPLES / "plan.yaml"),
        "--jobs", str(EXAMPLES / "jobs-snapshot.json"), "--out", str(out),
        "--samples", "20", "--seed", "3", "--no-sizing",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "base: 5 deadline jobs" in result.output
    data = json.loads((out / "review.json").read_text())
    assert data["seed"] == 3
    assert data["num_samples"] == 20
    assert (out / "review.md").read_text().startswith("# Capacity review")
    assert (out / "review.html").read_text().startswith("<!DOCTYPE html>")


def test_review_reports_a_located_error(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("jobs:\n  - name: x\n    megatron_args: --num-layers 2\n    num_gpus: 8\n")
    result = CliRunner().invoke(
        app, ["review", str(EXAMPLES / "fleet.yaml"), str(plan), "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert f"{plan}:3: jobs[0].megatron_args: needs at least --num-layers" in result.output
    missing = CliRunner().invoke(
        app, ["review", str(tmp_path / "nope.yaml"), str(plan), "--out", str(tmp_path)]
    )
    assert missing.exit_code == 2
    assert "cannot read the file" in missing.output
