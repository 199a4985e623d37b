"""``planner demo`` says what is missing before starting anything (exit 2); its output helpers
show the band and the straggler flag. The whole demo runs in tests/integration/test_demo.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import demo_cli
from planner.cli import app


def test_not_root_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_cli.os, "geteuid", lambda: 1000)
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 2
    assert "run it as root" in result.output


def test_missing_slurm_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_cli.os, "geteuid", lambda: 0)
    monkeypatch.setattr(demo_cli.shutil, "which", lambda name: None)
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 2
    assert "install-deps.sh --demo" in result.output


def test_an_installed_package_without_the_clone_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo_cli, "__file__", str(tmp_path / "planner" / "demo_cli.py"))
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 2
    assert "run the demo from a clone" in result.output


def test_the_lines_it_prints() -> None:
    job = {
        "progress": {"iteration": 300, "train_iters": 600, "progress_ratio": 0.5},
        "eta": {
            "completion_time_s": {
                "p10": 1_800_000_090.0,
                "p50": 1_800_000_100.0,
                "p90": 1_800_000_120.0,
            },
            "step_time_s": {"p50": 0.1},
            "pauses_s": 6.0,
        },
    }
    line = demo_cli._line(job, 1_800_000_000.0)
    assert "50.0%" in line
    assert "in   100 s" in line
    assert "30 s wide" in line
    report = {
        "available": True,
        "stragglers": [{"rank": 1, "node": "node1", "slowdown": 1.6}],
        "slowdown": 1.5,
        "action": "drain-node",
        "advice": "drain node1",
    }
    flagged = demo_cli._straggler_line(report)
    assert flagged is not None
    assert flagged.startswith("straggler flagged: rank 1 on node1 (1.60x)")
    assert demo_cli._straggler_line({"available": False}) is None
    # the demo prints a line each time the named ranks change
    assert demo_cli._flagged_ranks(report) == {1}
    assert demo_cli._flagged_ranks({**report, "available": False}) == frozenset()
    assert demo_cli._flagged_ranks({"available": True, "stragglers": []}) == frozenset()
    narrowing = demo_cli._narrowing(
        [
            (0.1, {"p10": 90.0, "p50": 100.0, "p90": 130.0}),
            (0.9, {"p10": 99.0, "p50": 100.0, "p90": 101.0}),
        ],
        end_s=100.0,
    )
    assert len(narrowing) == 3
