"""MLPerf Training result logs of every round since v1.0 (``adapters.logs.mlperf``): the logs
written for the project in the format of four rounds (``tests/data/logs/mlperf/README.md``),
read whole and replayed by ``planner eta replay``, and the variants of other rounds and
benchmarks line by line. Expected values were read from the files by hand, not from the parser.
"""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.logs import LogContext, LogReading, parse_line, read_log
from planner.cli import app
from planner.eta_cli import PROGRESS_MIN_RECORDS, ReplayProgress
from planner.specs.job import ProgressRecord

ROUNDS = Path(__file__).resolve().parents[2] / "data" / "logs" / "mlperf"
BERT_V10 = ROUNDS / "mlperf-v1.0-bert-samples.log"
RESNET_V21 = ROUNDS / "mlperf-v2.1-resnet-epochs.log"
LORA_V40 = ROUNDS / "mlperf-v4.0-llama2-70b-lora-samples.log"
LLAMA_V50 = ROUNDS / "mlperf-v5.0-llama31-405b-steps.log"


def _read(path: Path) -> LogReading:
    return read_log(path.read_text(encoding="utf-8"), tz=UTC)


def _mllog(key: str, value: object = None, time_ms: int = 1_700_000_000_000, **md: object) -> str:
    event = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key}
    return ":::MLLOG " + json.dumps({**event, "value": value, "metadata": md})


def _feed(lines: list[str]) -> tuple[list[ProgressRecord], LogContext]:
    context = LogContext()
    records = [parse_line(line, tz=UTC, context=context) for line in lines]
    return [r for r in records if isinstance(r, ProgressRecord)], context


# --- the logs of four rounds, read whole ------------------------------------------------------


def test_v10_bert_counts_samples_on_its_evaluations() -> None:
    reading = _read(BERT_V10)
    assert (reading.framework, len(reading.records)) == ("mlperf", 18)
    first, last = reading.records[0], reading.records[-1]
    # eval_accuracy epoch_num 154,833 samples / global batch 1,536 = 100.8: step 101
    assert first.iteration == 101
    assert first.timestamp_s == pytest.approx(1621000269.825)
    assert first.train_iters == 2400  # the cap: opt_learning_rate_training_steps
    assert first.step_time_s is None  # no training statistic: the times give the pace
    # the last: 2,784,098 samples = 1,812.6 steps; run_stop ends the run there
    assert (last.iteration, last.num_iterations) == (1813, 1813 - reading.records[-2].iteration)
    assert reading.train_iters == 1813
    # submission_benchmark comes last at time 0: not a time of the log
    assert reading.first_timestamp_s == pytest.approx(1621000000.0)
    assert reading.last_timestamp_s == pytest.approx(1621000781.885)  # run_final


def test_v21_resnet_counts_epochs_of_its_dataset() -> None:
    reading = _read(RESNET_V21)
    steps_per_epoch = 1281167 / 3264  # train_samples / global_batch_size
    assert [r.iteration for r in reading.records] == [
        round(epoch * steps_per_epoch) for epoch in range(1, 41)
    ]
    first = reading.records[0]
    assert first.timestamp_s == pytest.approx(1652000090.025)  # epoch_stop 1 ("0: " label)
    assert first.step_time_s is None  # imgs_sec comes after epoch_stop, at the same epoch
    assert reading.train_iters == round(40 * steps_per_epoch)  # run_stop after epoch 40
    assert [e.name for e in reading.events].count("eval_start") == 10


def test_v40_lora_counts_samples_and_states_a_cap() -> None:
    reading = _read(LORA_V40)
    assert [r.iteration for r in reading.records] == list(range(192, 577, 48))  # 1,536 / 8 on
    first = reading.records[0]
    # tracked_stats throughput 1.9904495819473644 samples/s: 8 samples per step
    assert first.step_time_s == pytest.approx(8 / 1.9904495819473644)
    assert first.timestamp_s == pytest.approx(1714901071.684)
    assert (first.train_iters, reading.records[1].num_iterations) == (1024, 48)
    assert reading.train_iters == 576  # run_stop samples_count 4,608


def test_v50_llama_has_one_record_per_step_and_skips_block_summaries() -> None:
    reading = _read(LLAMA_V50)
    assert [r.iteration for r in reading.records] == list(range(1, 161))  # 1,152 samples each
    assert all(r.step_time_s is not None and r.num_iterations == 1 for r in reading.records)
    assert reading.records[0].loss is not None
    assert reading.train_iters == 160  # no cap (a decay horizon is none); run_stop ends it
    names = [e.name for e in reading.events]
    assert names.count("eval_start") == names.count("eval_stop") == 4


@pytest.mark.parametrize(
    ("path", "total", "points"),
    [(BERT_V10, 1813, 17), (RESNET_V21, 15701, 39), (LORA_V40, 576, 9), (LLAMA_V50, 160, 160)],
    ids=["v1.0", "v2.1", "v4.0", "v5.0"],
)
def test_planner_eta_replay_works_on_every_round(path: Path, total: int, points: int) -> None:
    result = CliRunner().invoke(app, ["eta", "replay", str(path), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.splitlines()[-1])["summary"]
    assert (summary["framework"], summary["total_iterations"]) == ("mlperf", total)
    assert summary["points"] == points
    assert "error" not in summary  # its end is known: the errors are computed
    assert summary["median_abs_p50_error_ratio"]["from_10pct"] < 0.05


# --- variants of other rounds and benchmarks, line by line ------------------------------------


def test_v41_gpt3_step_timing_in_s_counts_tokens_and_states_what_it_trained() -> None:
    header = [
        _mllog("submission_benchmark", "gpt3"),
        _mllog("global_batch_size", 2048),
        _mllog("max_sequence_length", 2048),
        _mllog("opt_learning_rate_decay_steps", 81450),  # a horizon, not a cap
    ]
    steps = [
        _mllog("tracked_stats", {"train_step_timing in s": 36.0}, time_ms=t, step=4194304 * k)
        for k, t in ((1, 1_700_000_036_000), (2, 1_700_000_072_000))
    ]
    records, context = _feed([*header, *steps, _mllog("trained_samples", 8388608)])
    assert [(r.iteration, r.step_time_s, r.train_iters) for r in records] == [
        (1, 36.0, None),
        (2, 36.0, None),
    ]
    assert context.totals["mlperf"] == 2


def test_v40_ssd_numbers_epochs_from_0_and_cuts_its_last_epoch_short() -> None:
    def epoch(num: int, start_s: int, stop_s: int) -> list[str]:
        return [
            _mllog("epoch_start", num, time_ms=start_s * 1000, epoch_num=num),
            _mllog("epoch_stop", num, time_ms=stop_s * 1000, epoch_num=num),
            _mllog("eval_start", num + 1, time_ms=stop_s * 1000 + 1, epoch_num=num + 1),
        ]

    lines = [
        _mllog("submission_benchmark", "ssd"),
        _mllog("global_batch_size", 256),
        _mllog("train_samples", 4608),  # 18 steps per epoch
        *epoch(0, 1_700_000_000, 1_700_000_500),
        *epoch(1, 1_700_000_520, 1_700_001_020),
        _mllog("epoch_start", 2, time_ms=1_700_001_040_000, epoch_num=2),
        _mllog("eval_stop", 2, time_ms=1_700_001_045_000, epoch_num=2),  # target reached
        _mllog("epoch_stop", 2, time_ms=1_700_001_046_000, epoch_num=2),  # 6 s: cut short
        _mllog("run_stop", time_ms=1_700_001_046_001, status="success"),
        _mllog("epoch_stop", 3, time_ms=1_700_001_046_002, epoch_num=3),  # after run_stop
    ]
    records, context = _feed(lines)
    assert [(r.iteration, r.timestamp_s) for r in records] == [
        (18, 1_700_000_500.0),  # epoch_stop 0: one epoch done
        (36, 1_700_001_020.0),
    ]
    assert context.totals["mlperf"] == 36


def test_v10_dlrm_counts_fractions_of_an_epoch_from_1_without_a_dataset_size() -> None:
    lines = [
        _mllog("submission_benchmark", "dlrm"),
        _mllog("epoch_start", time_ms=1_700_000_000_000, epoch_num=1),
        _mllog("eval_start", time_ms=1_700_000_300_000, epoch_num=1.05),
        _mllog("eval_stop", time_ms=1_700_000_330_000, epoch_num=1.05),
        _mllog("eval_start", time_ms=1_700_000_630_000, epoch_num=1.1),
        _mllog("epoch_stop", time_ms=1_700_000_660_000, epoch_num=2),  # HugeCTR's closing
        _mllog("run_stop", time_ms=1_700_000_660_001, status="success"),
    ]
    records, context = _feed(lines)
    # a thousandth of an epoch per iteration: 5 % and 10 % of the first epoch
    assert [r.iteration for r in records] == [50, 100]
    assert context.totals["mlperf"] == 100


def test_v40_gnn_fractions_start_below_the_first_epoch_number() -> None:
    lines = [
        _mllog("submission_benchmark", "gnn"),
        _mllog("global_batch_size", 1000),
        _mllog("train_samples", 100000),  # 100 steps per epoch
        _mllog("epoch_start", epoch_num=1),
        _mllog("eval_start", epoch_num=0.5),
        _mllog("eval_start", epoch_num=1.0),
        _mllog("eval_start", epoch_num=1.5),
        _mllog("epoch_stop", epoch_num=1.6),
    ]
    records, _ = _feed(lines)
    assert [r.iteration for r in records] == [50, 100, 150, 160]


def test_v40_stable_diffusion_counts_steps_and_drops_late_evaluations() -> None:
    lines = [
        _mllog("submission_benchmark", "stable_diffusion"),
        _mllog("global_batch_size", 256),
        _mllog("tracked_stats", {"throughput": 512.0, "loss": 0.3}, step_num=100),
        _mllog("tracked_stats", {"throughput": 512.0, "loss": 0.3}, step_num=200),
        _mllog("run_stop", status="success", step_num=200),
        _mllog("eval_start", samples_count=25600),  # a checkpoint evaluated after training
    ]
    records, context = _feed(lines)
    assert [(r.iteration, r.step_time_s, r.num_iterations) for r in records] == [
        (100, 0.5, 1),  # 256 samples / 512 samples/s
        (200, 0.5, 100),
    ]
    assert context.totals["mlperf"] == 200


def test_v40_bert_statistic_counts_samples_in_its_epoch_num() -> None:
    lines = [
        _mllog("submission_benchmark", "bert"),
        _mllog("global_batch_size", 1000),
        _mllog("opt_learning_rate_training_steps", 480.0),
        _mllog("tracked_stats", {"throughput": 2000.0}, epoch_num=150500),
        _mllog("eval_start", 150500, epoch_num=150500),  # the same position: no record
        _mllog("eval_accuracy", 0.4, epoch_num=150500),
        _mllog("train_samples", 390200),
        _mllog("run_stop", status="success"),
        _mllog("tracked_stats", {"throughput": 2000.0, "epoch_num": 390200}, step=[2, 390]),
    ]
    records, context = _feed(lines)
    assert [(r.iteration, r.step_time_s, r.train_iters) for r in records] == [(150, 0.5, 480)]
    assert context.totals["mlperf"] == 390  # the samples it trained


def test_v10_nvidia_bert_logs_no_progress_in_its_mllog() -> None:
    lines = [
        _mllog("submission_benchmark", "bert"),
        _mllog("global_batch_size", 256),
        *[_mllog("eval_accuracy", 0.3 + k / 100, epoch_num=1) for k in range(3)],
        "{'global_steps': 586, 'eval_loss': 4.06, 'eval_mlm_accuracy': 0.37}",
    ]
    records, _ = _feed(lines)
    assert records == []


def test_v40_unet3d_counts_samples_in_its_epoch_num() -> None:
    lines = [
        _mllog("submission_benchmark", "unet3d"),
        _mllog("train_samples", 168),
        _mllog("global_batch_size", 28),
        _mllog("tracked_stats", {"throughput": 230.0}, step=1),  # an epoch benchmark's: none
        _mllog("eval_start", 168000, epoch_num=168000),
        _mllog("eval_start", 171360, epoch_num=171360),
    ]
    records, _ = _feed(lines)
    assert [r.iteration for r in records] == [6000, 6120]  # samples / 28


def test_every_rank_printing_an_event_gives_one_record() -> None:
    lines = [
        _mllog("submission_benchmark", "llama2_70b_lora"),
        _mllog("global_batch_size", 8),
        *[f"{rank}: " + _mllog("eval_start", samples_count=1536) for rank in range(4)],
    ]
    records, _ = _feed(lines)
    assert [r.iteration for r in records] == [192]


# --- progress of a long replay ------------------------------------------------------------------


def test_a_long_replay_prints_its_progress_every_tenth_and_every_few_seconds() -> None:
    now = [0.0]
    lines: list[str] = []
    progress = ReplayProgress("job.log", lines.append, clock=lambda: now[0])
    total = PROGRESS_MIN_RECORDS * 2
    for done in range(1, total + 1):
        now[0] += 0.004  # 16 s in all
        progress(done, total)
    assert len(lines) == 10
    assert lines[0] == "planner: replaying job.log: 10 % (400 of 4,000 records, 2 s)"
    assert lines[-1] == "planner: replaying job.log: 100 % (4,000 of 4,000 records, 16 s)"
    slow: list[str] = []
    progress = ReplayProgress("job.log", slow.append, clock=lambda: now[0])
    for done in range(1, 30):
        now[0] += 5.0  # a slow machine: a line at least every 10 s
        progress(done, total)
    assert len(slow) == 14
    short: list[str] = []
    progress = ReplayProgress("job.log", short.append, clock=lambda: now[0])
    for done in range(1, 11):
        progress(done, 10)
    assert short == []


def test_progress_goes_to_standard_error_not_into_the_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the v5.0 log's 160 records count as long here (a long log takes minutes to replay)
    monkeypatch.setattr("planner.eta_cli.PROGRESS_MIN_RECORDS", 100)
    result = CliRunner().invoke(app, ["eta", "replay", str(LLAMA_V50), "--json"])
    assert result.exit_code == 0, result.output
    assert all(json.loads(line) for line in result.stdout.splitlines())
    progress = result.stderr.splitlines()
    assert len(progress) == 10
    assert progress[-1].startswith(
        "planner: replaying mlperf-v5.0-llama31-405b-steps.log: 100 % (160 of 160 records, "
    )
    quiet = CliRunner().invoke(app, ["eta", "replay", str(LORA_V40)])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""  # 9 records: no progress
