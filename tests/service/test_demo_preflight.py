"""``planner demo`` says what is missing before starting anything (exit 2); its output helpers
show the band and the straggler flag. The whole demo runs in tests/integration/test_demo.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import demo_cli
from planner.cli import app


def test_not_root_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("planner.demo_cli.os.geteuid", lambda: 1000)
    monkeypatch.setattr("planner.demo_cli.shutil.which", lambda name: "/usr/bin/sudo")
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 2
    assert "run it as root" in result.output
    assert "sudo" in result.output
    # where there is no sudo (a container), it does not send the user to it
    monkeypatch.setattr("planner.demo_cli.shutil.which", lambda name: None)
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 2
    assert "sudo is not installed" in result.output


def test_demo_sh_needs_no_sudo_as_root_and_uses_it_otherwise() -> None:
    script = (Path(__file__).resolve().parents[2] / "deploy" / "dev" / "demo.sh").read_text()
    body = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    # the only sudo is the re-run of a non-root user, and only when sudo exists
    uses = [line for line in body if "sudo" in line and "echo" not in line]
    assert uses == [
        "  if command -v sudo >/dev/null 2>&1; then",
        '    exec sudo -E bash "$self" "$@"',
    ]
    assert "if ((EUID != 0)); then" in body


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
    eta: dict[str, object] = {
        "method": "observed",
        "num_observations": 40,
        "completion_time_s": {
            "p10": 1_800_000_090.0,
            "p50": 1_800_000_100.0,
            "p90": 1_800_000_120.0,
        },
        "step_time_s": {"p50": 0.1},
        "pauses_s": 6.0,
        "pauses": {
            "periods": [
                {
                    "interval": 150,
                    "per_slot_s": 3.0,
                    "slots_seen": 1,
                    "slots_ahead": 2,
                    "source": "arguments",
                    "kind": "evaluation",
                }
            ],
            "irregular_s": 0.0,
        },
    }
    job = {"progress": {"iteration": 300, "train_iters": 600, "progress_ratio": 0.5}, "eta": eta}
    line = demo_cli._line(job, 1_800_000_000.0)
    assert line is not None
    assert "50.0%" in line
    assert "in   100 s" in line
    assert "30 s wide" in line
    # the pauses ahead say what they are and where they come from
    assert "pauses ahead 6 s: 2 evaluations of 3.0 s (every 150 iterations: launch" in line
    # nothing before the job logged an iteration of a known total: no "0/0" line
    assert demo_cli._line({"progress": {"iteration": 0, "train_iters": 0}, "eta": {}}, 0.0) is None
    # no band while the pace is being measured (the first 5 %, or only a few steps seen)
    early = {
        "progress": {"iteration": 15, "train_iters": 600, "progress_ratio": 0.025},
        "eta": {**eta, "num_observations": 2, "pauses_s": 0.0},
    }
    text = demo_cli._line(early, 1_800_000_000.0)
    assert text is not None
    assert "wide" not in text
    assert "measuring the pace" in text
    assert "pauses ahead" not in text  # nothing to say when none are ahead
    # a line per phase event, once
    shown: set[int] = set()
    events = {
        "events": [
            {
                "kind": "phase",
                "iteration": 361,
                "description": "job slowed by 35 % since iteration 361",
            }
        ]
    }
    assert demo_cli._phase_lines(events, shown) == ["phase: job slowed by 35 % since iteration 361"]
    assert demo_cli._phase_lines(events, shown) == []
    # the ended job's p50 error at 30 % in % of its duration, not as a bare ratio
    kept = demo_cli._kept_line("http://h", "7", {"p50_error_ratio_at": {"30pct": -0.2727}})
    assert kept.endswith("/v1/jobs/7 (p50 error at 30 %: -27.3 % of its duration)")
    assert demo_cli._kept_line("http://h", "7", {}).endswith("(p50 error at 30 %: not measured)")
    # where the time went
    timings = demo_cli._timings_line({"the local Slurm up": 2.4, "job running": 101.0}, 120.0)
    assert timings == (
        "where the time went: the local Slurm up 2 s, job running 101 s; in all 120 s"
    )
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
