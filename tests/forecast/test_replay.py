"""``planner eta replay`` and the replay it is built on: the clock of a log,
its end, one JSON line per logged point, the summary, and the errors for a log without a total."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import SpecError
from planner.forecast.replay import replay, replay_clock, summarize
from planner.specs.job import ProgressRecord

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
TINY = DATA / "tiny_gpt_megatron_900it.log"
MLPERF = DATA / "mlperf-v3.1-nvidia-gpt3-175b-eos-n1344-result_0.log"
CI_TABLE = DATA / "megatron-ci-nemotron3-super-release-gb200-golden.json"
T0 = 1_800_000_000.0


def test_the_clock_is_printed_times_else_the_running_sum_of_step_times() -> None:
    records = [
        ProgressRecord(iteration=10, step_time_s=2.0, num_iterations=10),
        ProgressRecord(iteration=20, step_time_s=2.0, num_iterations=10),
        ProgressRecord(iteration=30, step_time_s=2.0, num_iterations=10, timestamp_s=T0 + 100),
        ProgressRecord(iteration=40, step_time_s=3.0, num_iterations=10),
        ProgressRecord(iteration=50, num_iterations=10),  # neither: the last pace printed
        ProgressRecord(iteration=60, num_iterations=10, timestamp_s=T0 + 150),  # never back
    ]
    # the records before the first printed time lead up to it
    assert replay_clock(records) == [T0 + 60, T0 + 80, T0 + 100, T0 + 130, T0 + 160, T0 + 160]
    with pytest.raises(SpecError, match="no clock"):
        replay_clock([ProgressRecord(iteration=1), ProgressRecord(iteration=2)])


def test_a_replay_ends_where_the_total_is_reached_and_knows_no_end_before() -> None:
    records = [
        ProgressRecord(iteration=i, step_time_s=1.0, num_iterations=10, timestamp_s=T0 + i)
        for i in range(10, 210, 10)
    ]
    shorter = replay(records, total_iterations=100, end_time_s=T0 + 999)
    assert shorter.points[-1].iteration == 100
    assert shorter.duration_s == pytest.approx(90.0)  # the log ran on: its last time is not it
    whole = replay(records, total_iterations=200, end_time_s=T0 + 205)
    assert whole.duration_s == pytest.approx(195.0)  # teardown after the last line
    longer = summarize(replay(records, total_iterations=400))
    assert longer["duration_s"] is None
    assert "real end is unknown" in longer["error"]


def test_replay_of_a_recorded_run_is_deterministic_and_judged_against_its_own_end() -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["eta", "replay", str(TINY), "--json"])
    second = runner.invoke(app, ["eta", "replay", str(TINY), "--json"])
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    lines = [json.loads(line) for line in first.output.splitlines()]
    points, summary = lines[:-1], lines[-1]["summary"]
    assert set(points[0]) == {"elapsed_s", "iteration", "progress", "eta_s"}
    assert set(points[0]["eta_s"]) == {"p10", "p50", "p90"}
    assert [p["iteration"] for p in points] == list(range(5, 901, 5))
    assert points[-1]["eta_s"] == {"p10": 0.0, "p50": 0.0, "p90": 0.0}
    assert all(p["eta_s"]["p10"] <= p["eta_s"]["p50"] <= p["eta_s"]["p90"] for p in points)
    assert summary["duration_s"] == 52.0
    assert summary["total_iterations"] == 900
    assert summary["points"] == 180
    # the accuracy of this run (a busy 2-core machine, second-resolution times)
    assert summary["median_abs_p50_error_ratio"]["from_10pct"] < 0.05
    assert summary["median_abs_p50_error_ratio"]["from_50pct"] < 0.03


def test_a_log_without_a_total_is_an_error_unless_it_is_given(tmp_path: Path) -> None:
    # The MLPerf GPT-3 run states its total only once it has ended (run_stop, the tokens it
    # trained): cut before run_stop, as a live log is, it states none.
    lines = MLPERF.read_text().splitlines(keepends=True)
    stop = next(k for k, line in enumerate(lines) if '"key": "run_stop"' in line)
    live = tmp_path / "mlperf-live.log"
    live.write_text("".join(lines[:stop]))
    runner = CliRunner()
    missing = runner.invoke(app, ["eta", "replay", str(live), "--json"])
    assert missing.exit_code == 2
    assert "states no total number of iterations" in missing.output
    assert "--total-iterations" in missing.output
    given = runner.invoke(app, ["eta", "replay", str(live), "--json", "--total-iterations", "220"])
    assert given.exit_code == 0, given.output
    summary = json.loads(given.output.splitlines()[-1])["summary"]
    assert summary["framework"] == "mlperf"
    assert summary["points"] == 220
    assert summary["median_abs_p50_error_ratio"]["from_10pct"] < 0.01
    stated = runner.invoke(app, ["eta", "replay", str(MLPERF), "--json"])
    assert stated.exit_code == 0, stated.output
    assert json.loads(stated.output.splitlines()[-1])["summary"]["total_iterations"] == 220


@pytest.mark.timeout(60)  # 2,384 points replayed: a few seconds, more on a busy machine
def test_a_table_without_times_is_replayed_on_the_sum_of_its_step_times() -> None:
    result = CliRunner().invoke(app, ["eta", "replay", str(CI_TABLE)])
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()  # the progress of the replay goes to standard error
    assert rows[0].split() == ["progress", "elapsed_s", "p10_s", "p50_s", "p90_s"]
    assert "planner: replaying" in result.stderr
    summary = json.loads(rows[-1])
    assert summary["framework"] == "megatron-ci"
    assert summary["total_iterations"] == 23840
    assert summary["duration_s"] > 3e5  # 2,384 rows of ten ~14 s steps


def test_a_scenario_gives_the_prior_and_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parents[2] / "deploy" / "dev" / "tiny_gpt" / "scenario.yaml"
    runner = CliRunner()
    with_prior = runner.invoke(app, ["eta", "replay", str(TINY), "--scenario", str(scenario)])
    assert with_prior.exit_code == 0, with_prior.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {num_layers: -1}\n")
    invalid = runner.invoke(app, ["eta", "replay", str(TINY), "--scenario", str(bad)])
    assert invalid.exit_code == 2
    assert "--scenario" in invalid.output
    nothing = runner.invoke(app, ["eta", "replay", str(tmp_path / "missing.log")])
    assert nothing.exit_code == 2
    assert "cannot read" in nothing.output
    empty = tmp_path / "empty.log"
    empty.write_text("hello\n")
    unread = runner.invoke(app, ["eta", "replay", str(empty)])
    assert unread.exit_code == 2
    assert "no training progress" in unread.output
