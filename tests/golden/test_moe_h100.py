"""The 2025 MoE source: its rows become faithful scenarios with correctly derived times."""

from __future__ import annotations

import pytest

from benchmarks.accuracy.cases import (
    ARCHITECTURE_NOT_MODELLED_LINEAR_ATTENTION,
    ARCHITECTURE_NOT_MODELLED_MAMBA,
    MFU_ONLY,
    SUPERSEDED,
    num,
)
from benchmarks.accuracy.convert import Dataset, convert
from benchmarks.accuracy.moe_h100 import (
    PRESETS,
    SOURCE,
    _flops_model,
    convert_moe_h100,
    megatron_flops_per_token,
    publisher_of,
)
from benchmarks.accuracy.runs import PublishedRun, load_runs
from planner.catalog import model_preset
from planner.errors import SpecError

RUNS = {run.config_id: run for run in load_runs(SOURCE)}


def _preset_key(run: PublishedRun) -> str | None:
    name = run.text("model_name")
    return next((key for prefix, key in PRESETS if name.startswith(prefix)), None)


def test_megatron_2025_flops_reproduce_the_modelzoo_step_times() -> None:
    # rows that publish both step time and TFLOP/s per GPU: the formula the long-context rows'
    # times are derived with must turn one into the other
    checked = 0
    for run in RUNS.values():
        metrics = run.metrics
        if not run.config_id.startswith("mz_qwen3_235b_256gpu") or "step_time" not in metrics:
            continue
        tokens = run.integer("global_batch") * run.integer("seq_len")  # type: ignore[operator]
        flops = tokens * megatron_flops_per_token(_flops_model(run), causal_half=True)
        seconds = flops / (metrics["model_tflops_per_gpu"] * 1e12 * run.integer("num_gpus"))  # type: ignore[operator]
        assert seconds == pytest.approx(metrics["step_time"], rel=0.01), run.config_id
        checked += 1
    assert checked == 5


def test_automodel_step_time_agrees_with_its_tokens_per_second() -> None:
    for run in RUNS.values():
        if run.config_id.startswith("am_"):
            tokens = run.integer("global_batch") * run.integer("seq_len")  # type: ignore[operator]
            per_s = run.metrics["tokens_per_sec_per_gpu"] * run.integer("num_gpus")  # type: ignore[operator]
            assert run.metrics["step_time"] == pytest.approx(tokens / per_s, rel=0.01)


@pytest.mark.parametrize("config_id", sorted(RUNS))
def test_presets_agree_with_the_architecture_the_row_states(config_id: str) -> None:
    run = RUNS[config_id]
    key = _preset_key(run)
    if key is None:
        return
    try:
        preset = model_preset(key)
    except SpecError:  # presets added with their architecture features
        pytest.skip(f"preset {key} not in the catalog yet")
    stated = {
        "num_layers": "layers",
        "hidden_size": "hidden",
        "num_attention_heads": "heads",
        "vocab_size": "vocab",
        "num_experts": "moe_experts",
        "moe_router_topk": "moe_topk",
    }
    for field, column in stated.items():
        if run.integer(column) is not None:
            assert preset[field] == run.integer(column), (field, column)
    notes = _flops_model(run)
    assert preset["moe_ffn_hidden_size"] == notes["moe_ffn_hidden_size"]


def test_rows_left_out_say_why(dataset: Dataset) -> None:
    reasons = {u.config_id: u.reason for u in dataset.unusable if u.source == SOURCE}
    for config_id in (
        "am_nemotron3_nano_30b_8gpu",
        "am_nemotron3_super_120b_64gpu",
        "am_nemotron3_ultra_550b_128gpu",
    ):
        assert reasons[config_id] == ARCHITECTURE_NOT_MODELLED_MAMBA
    assert reasons["mz_qwen3_next_80b_128gpu"] == ARCHITECTURE_NOT_MODELLED_LINEAR_ATTENTION
    assert reasons["am_qwen3_30b_a3b_8gpu_v0"] == SUPERSEDED
    assert reasons["flagperf_mixtral8x7b_h100_32gpu_pp4tp8_seq8192"] == MFU_ONLY


def test_automodel_rows_run_fsdp2_with_the_recipe_recompute() -> None:
    qwen = convert_moe_h100(RUNS["am_qwen3_30b_a3b_8gpu"])
    par = qwen.document["parallelism"]
    assert par["zero_stage"] == 3
    assert par["recompute"] == "full"
    assert par["expert_parallel"] == 8
    assert qwen.document["training"]["framework"] == "automodel"
    assert qwen.measured_iteration_time_s == 21.773
    oss = convert_moe_h100(RUNS["am_gptoss_120b_64gpu"])
    assert oss.document["parallelism"]["recompute"] == "none"
    assert oss.document["parallelism"]["expert_parallel"] == 64
    # under pipeline parallelism each gradient-accumulation step runs the schedule once
    # over the local batch (LBS 8: Kimi K2 GA 2, DeepSeek-V3 on 1,024 GPUs GA 4)
    for config_id in ("am_kimi_k2_256gpu", "am_dsv3_671b_1024gpu"):
        par = convert_moe_h100(RUNS[config_id]).document["parallelism"]
        assert par["pipeline_batch_size"] == 8, config_id
    assert "pipeline_batch_size" not in oss.document["parallelism"]


def test_each_publisher_is_its_own_cluster() -> None:
    """The source gathers four publishers' machines and stacks: the observed-runs
    calibration must not learn one cluster's factor from another's runs."""
    ids = (
        "am_qwen3_30b_a3b_8gpu",
        "mz_qwen3_235b_256gpu_intranodeEP8_a2a",
        "mlm_moe_readme_mixtral8x7b_mcore_v0.9",
        "flagperf_mixtral8x7b_h100_32gpu_pp2dp2tp8",
    )
    clusters = [convert_moe_h100(RUNS[i]).cluster_of for i in ids]
    assert len(set(clusters)) == 4
    assert clusters[0] == "NVIDIA-NeMo/Automodel"
    with pytest.raises(ValueError, match="no publisher"):
        publisher_of("xx_unknown")


def test_every_configuration_converts_or_has_a_reason() -> None:
    for run in RUNS.values():
        convert(run)  # never raises: a Case or an Unusable


def test_megatron_rows_run_as_their_launch_scripts_say() -> None:
    # FlagPerf's megatron_main.sh passes --use-distributed-optimizer; its EP 8 cannot run on 2
    # data-parallel ranks in Megatron-Core 0.6, so the README's EP 1 stands
    flagperf = convert_moe_h100(RUNS["flagperf_mixtral8x7b_h100_32gpu_pp2dp2tp8"])
    assert flagperf.document["parallelism"]["zero_stage"] == 1
    assert flagperf.document["parallelism"]["expert_parallel"] == 1
    # it passes neither --overlap-grad-reduce nor --overlap-param-gather (off by default in
    # core_v0.6.0): the gradient reduction and the parameter gather run exposed
    assert flagperf.document["parallelism"]["overlap_grad_reduce"] is False
    assert flagperf.document["parallelism"]["overlap_param_gather"] is False
    # ... nor --tp-comm-overlap, and no launch of the ModelZoo main table does (its README:
    # "not yet compatible with MoE layers"): the tensor-parallel collectives are not split
    assert flagperf.document["parallelism"]["tp_comm_overlap"] is False
    for config_id, run in RUNS.items():
        if config_id.startswith("mz_qwen3_235b_256gpu_"):
            par = convert_moe_h100(run).document["parallelism"]
            assert par["tp_comm_overlap"] is False, config_id
    # ModelZoo sets no --grad-reduce-in-bf16: Megatron reduces bf16 gradients in fp32, under
    # the distributed optimizer and Megatron-FSDP alike
    for config_id in (
        "mz_qwen3_235b_256gpu_intranodeEP8_fsdp",
        "mz_qwen3_235b_256gpu_xnodeEP32_deepep",
    ):
        par = convert_moe_h100(RUNS[config_id]).document["parallelism"]
        assert par["grad_reduce_in_fp32"] is True, config_id
    assert (
        convert_moe_h100(RUNS["mz_qwen3_235b_256gpu_intranodeEP8_fsdp"]).document["parallelism"][
            "zero_stage"
        ]
        == 3
    )


def test_rows_state_the_routing_their_launch_configs_ran() -> None:
    # every Automodel benchmark recipe sets fake_balanced_gate: true (a round-robin gate);
    # the ModelZoo main table's launch commands all pass --moe-router-force-load-balancing
    for config_id in ("am_qwen3_30b_a3b_8gpu", "am_dsv3_671b_1024gpu", "am_gptoss_120b_64gpu"):
        model = convert_moe_h100(RUNS[config_id]).document["model"]
        assert model.get("moe_router_round_robin") is True, config_id
        assert "moe_router_force_load_balancing" not in model, config_id
    for layout in ("xnodeEP32_deepep", "xnodeEP32_deepep_1f1b_overlap", "intranodeEP8_tp4"):
        model = convert_moe_h100(RUNS[f"mz_qwen3_235b_256gpu_{layout}"]).document["model"]
        assert model.get("moe_router_force_load_balancing") is True, layout
    dropless = convert_moe_h100(RUNS["mz_qwen3_235b_longctx_seq16384_dropless"]).document["model"]
    assert "moe_router_force_load_balancing" not in dropless


def _expert_fsdp_infiniband_s(run: PublishedRun, tensor_parallel: int) -> float:
    """Seconds per step each GPU's InfiniBand link (the row's "8x50 GB/s": 50 GB/s a GPU)
    spends on Megatron-FSDP's expert traffic at line rate: per microbatch two bf16 gathers
    and one fp32 reduce-scatter of the GPU's expert parameters over the expert data-parallel
    group, whose ranks sit one per node (expert parallel 8 fills a node)."""
    notes = dict(item.split("=", 1) for item in run.notes.split("; ") if "=" in item)
    ep, gpus = num(run, "ep"), num(run, "num_gpus")
    params = (
        num(run, "layers")
        * num(run, "moe_experts")
        * 3
        * num(run, "hidden")
        * int(notes["moe_ffn_hidden"])
        / ep
    )
    expert_dp = gpus // ep  # expert tensor parallel 1
    microbatches = num(run, "global_batch") // (num(run, "micro_batch") * gpus // tensor_parallel)
    per_microbatch = (2 * 2 + 4) * params * (expert_dp - 1) / expert_dp
    return microbatches * per_microbatch / 50e9


def test_modelzoo_fsdp_row_runs_its_launch_commands_tensor_parallel() -> None:
    run = RUNS["mz_qwen3_235b_256gpu_intranodeEP8_fsdp"]
    step_s = run.metrics["step_time"]
    # the table's TP 2 (GA 4): the expert traffic alone fills the published step at line rate
    assert run.integer("tp") == 2
    assert _expert_fsdp_infiniband_s(run, 2) == pytest.approx(step_s, rel=0.01)
    # the launch command's TP 1 (GA 2) leaves half the step for everything else
    assert _expert_fsdp_infiniband_s(run, 1) == pytest.approx(step_s / 2, rel=0.01)
    case = convert_moe_h100(run)
    par = case.document["parallelism"]
    assert par["tensor_parallel"] == 1
    assert par["sequence_parallel"] is False
    assert "expert_tensor_parallel" not in par
    assert any(a.startswith("tensor_parallel 1 (the launch command") for a in case.assumptions)
    # every other ModelZoo row keeps the table's tensor parallel
    for config_id, other in RUNS.items():
        if config_id.startswith("mz_") and config_id != run.config_id:
            converted = convert(other)
            if hasattr(converted, "document"):
                assert converted.document["parallelism"]["tensor_parallel"] == (
                    other.integer("tp") or 1
                ), config_id
