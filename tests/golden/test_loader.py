"""The ground-truth loader: every published configuration is either a valid scenario with a
correctly derived measured iteration time, or is left out with a counted reason."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.accuracy.cases import REFUSED
from benchmarks.accuracy.convert import (
    CALIBRATION_SOURCES,
    REASONS,
    Case,
    Dataset,
    build_dataset,
)
from benchmarks.accuracy.convert import calibration_eligible as eligible
from benchmarks.accuracy.runs import DATA_DIR, SOURCE_FILES, load_runs
from planner.perf import predict
from planner.scenario import parse_scenario

# Configurations per file, from tests/data/ground_truth/README.md ("rows / configs").
CONFIGS = {
    "sc21": 32,
    "korthikanti2022": 14,
    "megatron_h100": 11,
    "llm_foundry": 216,
    "nemo_24.07": 18,
    "torchtitan": 32,
    "moe_h100_2025": 28,
}


def test_every_source_file_is_in_the_project() -> None:
    for name in SOURCE_FILES.values():
        assert (DATA_DIR / name).is_file(), name


@pytest.mark.parametrize("source", list(SOURCE_FILES))
def test_pivot_yields_the_documented_number_of_configurations(source: str) -> None:
    assert len(load_runs(source)) == CONFIGS[source]


def test_every_configuration_is_used_or_has_a_reason(dataset: Dataset) -> None:
    used = Counter(c.source for c in dataset.cases)
    left_out = Counter(u.source for u in dataset.unusable)
    for source, total in CONFIGS.items():
        assert used[source] + left_out[source] == total, source
    assert {u.reason for u in dataset.unusable} <= set(REASONS)


def test_every_usable_row_is_a_valid_scenario(dataset: Dataset) -> None:
    for case in dataset.cases + dataset.memory_cases:
        scenario = parse_scenario(case.document)
        assert scenario.hardware.num_gpus > 0
        assert case.measured_iteration_time_s > 0


def test_each_dense_source_has_calibration_and_held_out_rows(dataset: Dataset) -> None:
    for source in CALIBRATION_SOURCES:
        rows = [c for c in dataset.cases if c.source == source]
        calibration = [c for c in rows if c.calibration]
        assert 0 < len(calibration) < len(rows), source
        # every third configuration by sorted config_id, starting with the first; rows the
        # planner refuses keep their place
        refused = [
            u.config_id for u in dataset.unusable if u.source == source and u.reason == REFUSED
        ]
        ids = sorted(i for i in [c.config_id for c in rows] + refused if eligible(source, i))
        assert sorted(c.config_id for c in calibration) == [i for i in ids[::3] if i not in refused]
    assert not any(c.calibration for c in dataset.cases if c.source == "torchtitan")


def test_split_is_deterministic() -> None:
    first = {c.key for c in build_dataset().cases if c.calibration}
    second = {c.key for c in build_dataset().cases if c.calibration}
    assert first == second


def _case(dataset: Dataset, config_id: str) -> Case:
    return next(c for c in dataset.cases if c.config_id == config_id)


def test_measured_time_published_directly(dataset: Dataset) -> None:
    assert _case(dataset, "korth_175B_selective").measured_iteration_time_s == 13.75


def test_measured_time_from_sc21_tflops(dataset: Dataset) -> None:
    # 1.7B: B=512, s=2048, layers n=24, h=2304, V=51200; 137 TFLOP/s on 32 GPUs.
    b, s, n, h, v = 512, 2048, 24, 2304, 51200
    flops = 96 * b * s * n * h**2 * (1 + s / (6 * h) + v / (16 * n * h))
    case = _case(dataset, "sc21_t1_1.7B")
    assert case.measured_iteration_time_s == pytest.approx(flops / (137e12 * 32))


def test_measured_time_from_megatron_model_flops(dataset: Dataset) -> None:
    # 70B: B=384, s=4096, layers n=84, h=8192, V=131072; 419.7 TFLOP/s on 768 GPUs.
    b, s, n, h, v = 384, 4096, 84, 8192, 131072
    flops = 72 * b * s * n * h**2 * (1 + s / (6 * h) + v / (12 * n * h))
    case = _case(dataset, "mlm_h100_70B")
    assert case.measured_iteration_time_s == pytest.approx(flops / (419.7e12 * 768))
    # The source's MFU (42 %) is the same measurement against the 989 TFLOP/s peak.
    assert flops / case.measured_iteration_time_s / 768 / 989e12 == pytest.approx(0.42, abs=0.01)


def test_megatron_h100_rows_reduce_fp32_gradients_under_the_distributed_optimizer(
    dataset: Dataset,
) -> None:
    # Megatron-LM at the table's commit: --overlap-param-gather requires the distributed
    # optimizer, --bf16 forces fp32 gradient accumulation and reduction; the 32B row (one GPU
    # per node in each data-parallel ring) is the one these bytes weigh on most
    case = _case(dataset, "mlm_h100_32B")
    par = case.document["parallelism"]
    assert par["zero_stage"] == 1
    assert par["grad_reduce_in_fp32"] is True
    stated = predict(parse_scenario(case.document))
    bf16 = dict(case.document, parallelism=dict(par, grad_reduce_in_fp32=False))
    halved = predict(parse_scenario(bf16))
    # the model prices the fp32 bytes: the exposed reduction shrinks with 16-bit gradients
    assert halved.breakdown.dp_comm_exposed_s < 0.7 * stated.breakdown.dp_comm_exposed_s


def test_measured_time_from_tokens_per_second(dataset: Dataset) -> None:
    nemo = _case(dataset, "nemo2407_LLAMA3-70B_pre-training_64_128")
    assert nemo.measured_iteration_time_s == pytest.approx(128 * 8192 / (1524 * 64))
    foundry = _case(dataset, "foundry_H100_h100_80gb_70b_s2048_g512_gbs4096_mbs8")
    assert foundry.measured_iteration_time_s == pytest.approx(4096 * 2048 / 515636)


def test_foundry_maps_fsdp_and_checkpointing(dataset: Dataset) -> None:
    par = _case(dataset, "foundry_H100_h100_80gb_70b_s2048_g512_gbs4096_mbs8").document[
        "parallelism"
    ]
    assert par["zero_stage"] == 3
    assert par["recompute"] == "full"
    assert par["micro_batch_size"] == 8


def test_foundry_rows_before_torch_2_1_recompute_the_whole_layer(dataset: Dataset) -> None:
    """The A100-40GB table predates torch 2.1 (no checkpoint early stop) and the FP8 table's
    Transformer Engine linears recompute every GEMM; the A100-80GB and H100 BF16 tables ran
    the 2.1 image and keep the framework's default."""
    old = _case(dataset, "foundry_A100_a100_40gb_13b_s2048_g8_gbs512_mbs4").document
    new = _case(dataset, "foundry_A100_a100_80gb_13b_s1024_g8_gbs960_mbs40").document
    h100 = _case(dataset, "foundry_H100_h100_80gb_70b_s2048_g512_gbs4096_mbs8").document
    fp8 = _case(dataset, "foundry_H100_fp8_3b_s32768_g8_gbs144_mbs3").document
    assert old["parallelism"]["recompute_early_stop"] is False
    assert fp8["parallelism"]["recompute_early_stop"] is False  # te.Linear re-runs every GEMM
    assert "recompute_early_stop" not in new["parallelism"]
    assert "recompute_early_stop" not in h100["parallelism"]


def test_torchtitan_full_ac_rows_stop_recomputing_early(dataset: Dataset) -> None:
    """torchtitan's full AC at the benchmark commits kept torch's checkpoint early stop (turned
    off only in 2025-08); its op-level SAC rows are not full recompute and state nothing."""
    full = _case(dataset, "titan2412_t2_cp1").document["parallelism"]
    sac = _case(dataset, "titan_asynctp_8b_None_(bfloat16)_vanilla").document["parallelism"]
    assert full["recompute"] == "full"
    assert full["recompute_early_stop"] is True
    assert "recompute_early_stop" not in sac


def test_torchtitan_rows_state_their_separate_query_key_value_linears(dataset: Dataset) -> None:
    """Every benchmark commit predates torchtitan's fused ``wqkv`` default, which the profile
    describes: each row states its separate ``wq`` / ``wk`` / ``wv``."""
    for config_id in ("titan2412_t2_cp1", "titan_asynctp_8b_None_(bfloat16)_async"):
        par = _case(dataset, config_id).document["parallelism"]
        assert par["separate_qkv_projections"] is True
        assert "separate_gate_up_projections" not in par  # w1 / w3 apart then and now


def test_torchtitan_fp8_tensor_parallel_rows_state_their_fp8_all_gathers(dataset: Dataset) -> None:
    """The benchmark commits all-gathered FP8 under tensorwise float8 with TP, which current
    torchtitan (the profile) does not: the FP8 TP rows state it, the others leave it out."""
    fp8_tp = _case(dataset, "titan2412_t4_2D (FSDP+TP)").document["parallelism"]
    fp8_fsdp = _case(dataset, "titan2412_t2_cp1").document["parallelism"]
    bf16_tp = _case(dataset, "titan_asynctp_8b_None_(bfloat16)_async").document["parallelism"]
    assert fp8_tp["fp8_tp_all_gather"] is True
    assert "fp8_tp_all_gather" not in fp8_fsdp
    assert "fp8_tp_all_gather" not in bf16_tp


def test_nemo_fills_missing_architecture_from_the_catalog_preset(dataset: Dataset) -> None:
    model = _case(dataset, "nemo2407_Nemotron-340B_pre-training_128_32").document["model"]
    assert model["preset"] == "nemotron4-340b"
    assert parse_scenario(_case(dataset, "nemo2407_Nemotron-340B_pre-training_128_32").document)


def test_torchtitan_memory_rows_keep_every_published_peak(dataset: Dataset) -> None:
    peaks = {c.config_id: c.measured_peak_memory_bytes for c in dataset.memory_cases}
    assert peaks["titan2412_t1_FSDP"] == pytest.approx(82.4 * 2**30)
    assert len(peaks) == 14  # 20 published peaks, 6 on 405B pipeline rows left out


def test_torchtitan_h100_rows_run_on_the_96_gb_500_w_part(dataset: Dataset) -> None:
    from planner.perf import predict

    rows = [c for c in dataset.cases if c.source == "torchtitan" and "h200" not in c.config_id]
    assert len(rows) == 18
    assert {c.document["hardware"]["gpu"] for c in rows} == {"h100-sxm-96gb"}
    # every published run ran: on 96 GB each fits (on the 80 GB h100-sxm, 7 of the 12 did not)
    for case in rows:
        assert predict(parse_scenario(case.document)).fits_in_memory, case.config_id


def test_torchtitan_async_tp_rows_state_tp_comm_overlap_and_keep_their_plain_twins(
    dataset: Dataset,
) -> None:
    overlap = {
        c.config_id: c.document["parallelism"].get("tp_comm_overlap")
        for c in dataset.cases
        if c.source == "torchtitan"
    }
    # the async-TP benchmark publishes each configuration with vanilla and async TP: both
    # kept, the async one with its collectives under the GEMMs
    for config in ("70b_None_(bfloat16)", "8b_None_(bfloat16)", "8b_float8_tensorwise"):
        assert overlap[f"titan_asynctp_{config}_async"] is True, config
        assert overlap[f"titan_asynctp_{config}_vanilla"] is False, config
    assert overlap["titan2412_t4_2D (FSDP+TP)"] is False
    assert overlap["titan_asynctp_70b_float8_tensorwise_async"] is True
    # no tensor parallelism: nothing stated
    assert overlap["titan2412_t1_FSDP + torch.compile"] is None


def test_torchtitan_rows_of_2025_state_their_compiled_loss(dataset: Dataset) -> None:
    compiled = {
        c.config_id: c.document["training"].get("compiled_loss", False)
        for c in dataset.cases + dataset.memory_cases
        if c.source == "torchtitan"
    }
    # June 2025 (torchtitan 820504e, e7c0cae): --training.compile compiles the loss too
    assert compiled["titan_trainy_h200_4nodes"] is True
    assert compiled["titan_asynctp_8b_None_(bfloat16)_vanilla"] is True
    # Dec 2024 (9dec370): the model compiled, the loss eager
    assert compiled["titan2412_t1_FSDP + torch.compile"] is False
    assert compiled["titan2412_t4_2D + AsyncTP"] is False
    # the Dec-2024 70B 2D rows and the 2025 ones are other scenarios now: both kept
    assert {"titan2412_t4_2D (FSDP+TP)", "titan_asynctp_70b_float8_tensorwise_vanilla"} <= set(
        compiled
    )


def test_torchtitan_rows_state_the_adamw_implementation_of_their_commit(
    dataset: Dataset,
) -> None:
    implementation = {
        c.config_id: c.document["parallelism"]["optimizer_implementation"]
        for c in dataset.cases + dataset.memory_cases
        if c.source == "torchtitan"
    }
    # June 2025 (820504e, e7c0cae): after the fused default of 6e4988550, configs leave it unset
    assert implementation["titan_trainy_h200_4nodes"] == "fused"
    assert implementation["titan_asynctp_70b_None_(bfloat16)_async"] == "fused"
    # Dec 2024 (9dec370): AdamW built with foreach=not fused, fused off by default
    assert implementation["titan2412_t1_FSDP"] == "foreach"
    assert implementation["titan2412_t4_2D + AsyncTP"] == "foreach"
    assert set(implementation.values()) == {"fused", "foreach"}


def test_nemo_fine_tuning_rows_are_cases() -> None:
    dataset = build_dataset(["nemo_24.07"])
    modes = {
        c.config_id: c.document["training"].get("mode")
        for c in dataset.cases
        if "_SFT_" in c.config_id or "_LoRA_" in c.config_id
    }
    assert len(modes) == 6
    assert {m for cid, m in modes.items() if "_LoRA_" in cid} == {"lora"}
    assert {m for cid, m in modes.items() if "_SFT_" in cid} == {"sft"}


def test_the_packed_sample_assumption_barely_moves_the_fine_tuning_rows() -> None:
    from dataclasses import replace

    from planner.perf import predict

    dataset = build_dataset(["nemo_24.07"])
    for case in dataset.cases:
        if "training" not in case.document or "mode" not in case.document["training"]:
            continue
        times = []
        for length in (128, 512):
            doc = dict(case.document)
            doc["training"] = {**doc["training"], "packed_sample_length": length}
            times.append(
                predict(parse_scenario(replace(case, document=doc).document)).iteration_time_s
            )
        assert times[1] / times[0] < 1.02, case.config_id
