"""The harness's error statistics and loss, on tiny synthetic tables with known answers."""

from __future__ import annotations

import dataclasses
import math

import pytest

from benchmarks.accuracy.convert import Case
from benchmarks.accuracy.evaluate import Outcome
from benchmarks.accuracy.fit import (
    FIT_SUBSETS,
    bounds_for,
    calibration_loss,
    default_parameters,
    fit,
    model_constants,
)
from benchmarks.accuracy.report import accuracy_table, fit_table, ranking_table
from benchmarks.accuracy.stats import error_stats, mean_abs_log_error, relative_errors
from planner.catalog import get_gpu


def test_error_stats_of_a_known_table() -> None:
    measured = [10.0, 20.0, 40.0, 5.0]
    predicted = [11.0, 18.0, 40.0, 6.0]  # +10 %, -10 %, 0 %, +20 %
    stats = error_stats(predicted, measured)
    assert stats.num_rows == 4
    assert stats.mean_ape == pytest.approx((0.1 + 0.1 + 0.0 + 0.2) / 4)
    assert stats.max_ape == pytest.approx(0.2)
    assert stats.bias == pytest.approx((0.1 - 0.1 + 0.0 + 0.2) / 4)


def test_bias_is_signed_and_ape_is_not() -> None:
    stats = error_stats([0.5, 1.5], [1.0, 1.0])
    assert stats.mean_ape == pytest.approx(0.5)
    assert stats.bias == pytest.approx(0.0)


def test_empty_table_gives_nan_not_an_error() -> None:
    stats = error_stats([], [])
    assert stats.num_rows == 0
    assert math.isnan(stats.mean_ape)
    assert math.isnan(stats.max_ape)
    assert math.isnan(stats.bias)


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="predictions"):
        relative_errors([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        relative_errors([1.0], [0.0])


def test_mean_abs_log_error_is_symmetric_in_ratio() -> None:
    assert mean_abs_log_error([2.0, 0.5], [1.0, 1.0]) == pytest.approx(math.log(2.0))


def _case(source: str, measured: float, *, calibration: bool) -> Case:
    return Case(
        source=source,
        config_id=f"{source}-{measured}",
        document={},
        measured_iteration_time_s=measured,
        derived_from="iteration_time",
        calibration=calibration,
    )


def test_calibration_loss_weighs_sources_equally_and_ignores_held_out_rows() -> None:
    cases = [
        _case("a", 1.0, calibration=True),
        _case("a", 2.0, calibration=True),
        _case("a", 3.0, calibration=False),  # held out: its huge error must not count
        _case("b", 1.0, calibration=True),
    ]
    predicted = [math.e, 2.0 * math.e, 300.0, 1.0]  # source a: |ln| = 1, 1; source b: 0
    assert calibration_loss(cases, predicted, sources=("a", "b")) == pytest.approx(0.5)


def _gpu_case(gpu: str, *, moe: bool) -> Case:
    model = {"preset": "llama3-8b", **({"num_experts": 8} if moe else {})}
    return dataclasses.replace(
        _case("s", 1.0, calibration=True),
        config_id=f"{gpu}-{moe}",
        document={"model": model, "hardware": {"gpu": gpu}},
    )


def test_fit_subsets_select_a_generation_s_rows_and_its_dense_ones() -> None:
    cases = [
        _gpu_case("b200", moe=False),
        _gpu_case("gb200", moe=False),
        _gpu_case("gb200", moe=True),
        _gpu_case("h100-sxm", moe=False),
        _gpu_case("h100-sxm", moe=True),
        _gpu_case("a100-80gb", moe=False),
    ]

    def chosen(name: str) -> list[str]:
        return [c.config_id for c in cases if FIT_SUBSETS[name][1](c)]

    assert chosen("blackwell-dense") == ["b200-False", "gb200-False"]
    assert chosen("blackwell") == ["b200-False", "gb200-False", "gb200-True"]
    assert chosen("dense-ampere-hopper") == ["h100-sxm-False", "a100-80gb-False"]
    assert chosen("all") == [c.config_id for c in cases]
    with pytest.raises(ValueError, match="fit subset"):
        fit(cases, ["gemm_peak_fraction_blackwell"], subset="no-such-subset")


def test_accuracy_table_reports_calibration_and_held_out_rows_separately() -> None:
    outcomes = [
        Outcome(
            case=_case("sc21", 10.0, calibration=True),
            predicted_iteration_time_s=11.0,
            predicted_memory_bytes=1.0,
            predicted_fits_in_memory=True,
        ),
        Outcome(
            case=_case("sc21", 20.0, calibration=False),
            predicted_iteration_time_s=15.0,
            predicted_memory_bytes=1.0,
            predicted_fits_in_memory=True,
        ),
        Outcome(
            case=_case("sc21", 40.0, calibration=False),
            predicted_iteration_time_s=42.0,
            predicted_memory_bytes=1.0,
            predicted_fits_in_memory=True,
        ),
    ]
    row = next(line for line in accuracy_table(outcomes).splitlines() if line.startswith("| sc21"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # calibration: 1 row, +10 %; held-out: 2 rows, -25 % and +5 % -> mean 15, max 25, bias -10
    assert cells[1:5] == ["1", "10.0", "10.0", "+10.0"]
    assert cells[5:9] == ["2", "15.0", "25.0", "-10.0"]
    assert cells[9] == "misses"


def test_fitted_constants_exist_in_the_model_and_have_sane_bounds() -> None:
    constants = model_constants()
    names = default_parameters()
    assert names
    assert set(names) <= set(constants)
    for name in names:
        low, high = bounds_for(name, constants[name])
        assert low <= constants[name] <= high
    assert bounds_for("tp_overlap_fraction", 0.15) == (0.0, 1.0)
    assert bounds_for("gemm_tile_m", 128.0) == (16.0, 1024.0)


def _run(measured_s: float, predicted_s: float, num_gpus: int) -> Outcome:
    doc = {
        "model": {
            "num_layers": 2,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "seq_length": 100,
            "vocab_size": 1000,
        },
        "hardware": {"gpu": "h100-sxm", "num_gpus": num_gpus},
        "parallelism": {"global_batch_size": 40},
    }
    case = Case(
        source="llm_foundry",
        config_id=f"run{num_gpus}",
        document=doc,
        measured_iteration_time_s=measured_s,
        derived_from="iteration_time",
        calibration=False,
    )
    return Outcome(
        case=case,
        predicted_iteration_time_s=predicted_s,
        predicted_memory_bytes=1.0,
        predicted_fits_in_memory=True,
    )


def test_ranking_table_scores_order_and_the_pick_of_the_fastest_run() -> None:
    # throughput per GPU = 4000 tokens / (t * gpus): measured order 1 > 2 > 4 > 8 GPUs; the
    # model swaps the two fastest, so it picks the 2-GPU run (measured 0.8 of the best)
    outcomes = [
        _run(1.0, 1.0, 1),  # measured 4000 tok/s/GPU, predicted 4000
        _run(0.625, 0.45, 2),  # measured 3200, predicted 4444
        _run(0.5, 0.5, 4),  # 2000, 2000
        _run(0.5, 0.5, 8),  # 1000, 1000
    ]
    row = next(line for line in ranking_table(outcomes).splitlines() if "llm_foundry" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "1 (4)"
    assert float(cells[2]) == pytest.approx(0.8)  # Spearman of [1,2,3,4] vs [2,1,3,4]
    assert float(cells[4]) == pytest.approx(0.8)
    assert "llm_foundry" not in ranking_table(outcomes[:3])  # fewer than RANK_MIN_ROWS


def test_fit_table_counts_published_runs_predicted_not_to_fit() -> None:
    fits, too_big = _run(1.0, 1.0, 1), _run(1.0, 1.0, 2)
    too_big = dataclasses.replace(
        too_big, predicted_fits_in_memory=False, predicted_memory_bytes=1.05 * 80 * 2**30
    )
    row = next(line for line in fit_table([fits, too_big]).splitlines() if "llm_foundry" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["2", "1"]
    assert float(cells[3]) == pytest.approx(1.05 * 80 * 2**30 / get_gpu("h100-sxm").hbm_bytes)
