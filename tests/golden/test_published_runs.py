"""Golden tests: predicted iteration time of a handful of published runs per dense source.

The target is a held-out mean error of at most 5 % (max 15 %) on each dense A100/H100 source;
these per-row tolerances are far looser: they are what the model achieved when they were set,
and are to be tightened as the model improves. The full table is `python -m benchmarks.accuracy`
(benchmarks/RESULTS.md). Errors of the pinned rows when set (first analytical model dea3e67 /
operator-level model in progress, shipped constants): Korthikanti -14..+4 % / -2..+9 %; SC21
-15..-4 % / -31..+0 %; Megatron-LM H100 -7..+16 % / -30..+12 %; NeMo -11..+8 % / -15..+5 %;
llm-foundry -11..+5 % / -21..-13 %. Tightened with the framework profiles and refit
(``planner.perf.frameworks``): Korthikanti -1..+10 %; SC21 -29..+1 %; Megatron-LM H100
-22..+3 %; NeMo -3..+6 %; llm-foundry -8..+8 %. The SC21 ZeRO-3 row and the smallest H100 row
(1.7B, tp 1) are the weakest regimes, hence the wider tolerance of those two sources.
Tightened again after batched-GEMM wave quantisation, gradient-reduction precision, DeepSpeed
ZeRO-3 prefetch and unoverlapped 2021-22 Megatron DP (errors then): Korthikanti -6..+1 %;
SC21 -21..-4 %; Megatron-LM H100 -16..+3 %; NeMo 0..+4 %; llm-foundry -2..+6 %.
"""

from __future__ import annotations

import pytest

from benchmarks.accuracy.convert import Case, Dataset
from planner.perf import predict
from planner.scenario import parse_scenario

TOLERANCE = {
    "korthikanti2022": 0.08,
    "sc21": 0.25,
    "megatron_h100": 0.20,
    "nemo_24.07": 0.06,
    "llm_foundry": 0.08,
}
"""Largest accepted |predicted - measured| / measured per source (the target is 5 % mean)."""

PINNED = [
    ("korthikanti2022", "korth_22B_selective"),
    ("korthikanti2022", "korth_175B_full"),
    ("korthikanti2022", "korth_530B_selective"),
    ("korthikanti2022", "korth_1T_selective"),
    ("sc21", "sc21_t1_18.4B"),
    ("sc21", "sc21_t1_145.6B"),
    ("sc21", "sc21_t1_1008.0B"),
    ("sc21", "sc21_t2_zero3_174.6B_384"),
    ("megatron_h100", "mlm_h100_1.7B"),
    ("megatron_h100", "mlm_h100_70B"),
    ("megatron_h100", "mlm_h100_177B"),
    ("megatron_h100", "mlm_h100_462B"),
    ("nemo_24.07", "nemo2407_LLAMA2-7B_pre-training_8_128"),
    ("nemo_24.07", "nemo2407_LLAMA2-70B_pre-training_64_128"),
    ("nemo_24.07", "nemo2407_LLAMA3-70B_pre-training_64_128"),
    ("nemo_24.07", "nemo2407_GPT3-175B_pre-training_128_256"),
    ("llm_foundry", "foundry_A100_a100_40gb_7b_s2048_g8_gbs384_mbs12"),
    ("llm_foundry", "foundry_A100_a100_80gb_70b_s2048_g64_gbs2048_mbs8"),
    ("llm_foundry", "foundry_H100_h100_80gb_13b_s2048_g128_gbs2048_mbs16"),
    ("llm_foundry", "foundry_H100_h100_80gb_70b_s2048_g512_gbs4096_mbs8"),
]


def _case(dataset: Dataset, source: str, config_id: str) -> Case:
    return next(c for c in dataset.cases if c.key == (source, config_id))


@pytest.mark.parametrize(("source", "config_id"), PINNED, ids=[cid for _, cid in PINNED])
def test_iteration_time_within_tolerance_of_published(
    dataset: Dataset, source: str, config_id: str
) -> None:
    case = _case(dataset, source, config_id)
    predicted = predict(parse_scenario(case.document)).iteration_time_s
    assert predicted == pytest.approx(case.measured_iteration_time_s, rel=TOLERANCE[source])


def test_every_dense_source_has_pinned_rows() -> None:
    assert {source for source, _ in PINNED} == set(TOLERANCE)
