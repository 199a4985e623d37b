"""The Megatron-Bridge 2025 converter on rows copied from
``megatron_bridge_2025.csv`` (NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md``
@ ``067f987df03b``; the file itself is in the workplace's shared data, which tests do not read):
precision recipes, routing, the DeepSeek-V3 pipeline layout, measured time and releases."""

from __future__ import annotations

import pytest

from benchmarks.accuracy.bridge import convert_bridge
from benchmarks.accuracy.convert import deduplicate
from benchmarks.accuracy.runs import PublishedRun
from planner.scenario import parse_scenario

LLAMA = {
    "model_name": "LLAMA3_8B",
    "layers": "32",
    "hidden": "4096",
    "heads": "32",
    "kv_heads": "8",
    "vocab": "128256",
    "seq_len": "8192",
    "num_gpus": "8",
    "tp": "1",
    "pp": "1",
    "cp": "1",
    "ep": "1",
    "micro_batch": "2",
    "global_batch": "128",
    "zero_stage": "DDP (FSDP=0)",
}
CS_2509 = "FP8 (precision column absent for 25.09; primary presumably per-tensor/current scaling)"


def _run(config_id: str, tokens_per_gpu: float, **fields: str) -> PublishedRun:
    return PublishedRun(
        source="megatron_bridge_2025",
        config_id=config_id,
        fields=fields,
        metrics={"tokens_per_s_per_gpu": tokens_per_gpu},
        notes="",
    )


def test_dense_rows_and_their_recipes() -> None:
    cs = convert_bridge(
        _run(
            "mb_25.11_Pre-Training_DGX-GB200_LLAMA3_8B_8_FP8-CS_128_tp1pp1cp1vpn/aep1_primary",
            31508,
            gpu="GB200",
            precision="FP8-CS",
            **LLAMA,
        )
    )
    par = cs.document["parallelism"]
    assert (par["precision"], par["fp8_recipe"], par["zero_stage"]) == ("fp8", "tensorwise", 1)
    assert cs.document["hardware"]["gpu"] == "gb200"
    assert cs.document["training"]["framework"] == "nemo"
    assert cs.measured_iteration_time_s == pytest.approx(128 * 8192 / (31508 * 8))
    assert cs.release == "25.11"
    mx = convert_bridge(
        _run(
            "mb_25.11_Pre-Training_DGX-GB300_LLAMA3_8B_8_FP8-MX_128_tp1pp1cp1vpn/aep1_alt",
            36108,
            gpu="GB300",
            precision="FP8-MX",
            **LLAMA,
        )
    )
    assert mx.document["parallelism"]["precision"] == "mxfp8"
    old = convert_bridge(
        _run(
            "mb_25.09_Pre-Training_DGX-GB200_LLAMA3_8B_8_FP8_128_tp1pp1cp1vpn/aep1_primary",
            31357,
            gpu="GB200",
            precision=CS_2509,
            **LLAMA,
        )
    )
    assert old.document["parallelism"]["fp8_recipe"] == "tensorwise"
    assert any("25.09 states no precision" in a for a in old.assumptions)
    # the same scenario in two containers: both kept, one per release
    kept, dropped = deduplicate([cs, old])
    assert (len(kept), dropped) == (2, [])
    for case in (cs, mx, old):
        parse_scenario(case.document)
    # the container is the scenario's framework release: the calibration keys runs by it
    assert [parse_scenario(c.document).training.framework_version for c in (cs, old)] == [
        "25.11",
        "25.09",
    ]


def test_moe_rows_routing_and_the_deepseek_layout() -> None:
    deepseek = convert_bridge(
        _run(
            "mb_25.11_Pre-Training_DGX-GB200_DeepSeekV3_(w/o_MTP)_256_BF16_4096_tp1pp4cp1vp4ep64_primary",
            3139,
            model_name="DeepSeekV3 (w/o MTP)",
            layers="61",
            seq_len="4096",
            moe_experts="256 routed + 1 shared",
            gpu="GB200",
            num_gpus="256",
            tp="1",
            pp="4",
            cp="1",
            ep="64",
            vp="4",
            micro_batch="1",
            global_batch="4096",
            zero_stage="DDP (FSDP=0)",
            precision="BF16",
        )
    )
    model, par = deepseek.document["model"], deepseek.document["parallelism"]
    assert model["mtp_num_layers"] == 0
    assert model["moe_router_force_load_balancing"]
    assert model["moe_token_dispatcher_type"] == "flex"
    assert par["pipeline_layout"] == "Et*4|(t*4|)*14tL"  # 16 chunks, no MTP
    assert par["recompute_modules"] == ["mla_up_proj"]
    parse_scenario(deepseek.document)
    qwen = convert_bridge(
        _run(
            "mb_25.09_Pre-Training_DGX-B200_Qwen3_30B_a3B_(tokendrop)_8_FP8_512_tp1pp1cp1vp1ep8_primary",
            18066,
            model_name="Qwen3_30B_a3B (tokendrop)",
            layers="48",
            seq_len="4096",
            moe_experts="128",
            gpu="B200",
            num_gpus="8",
            tp="1",
            pp="1",
            cp="1",
            ep="8",
            vp="1",
            micro_batch="1",
            global_batch="512",
            zero_stage="DDP (FSDP=0)",
            precision=CS_2509,
        )
    )
    assert qwen.document["model"]["moe_expert_capacity_factor"] == 1.0
    assert qwen.document["model"]["moe_pad_expert_input_to_capacity"]  # apply_moe_token_drop
    assert "moe_router_force_load_balancing" not in qwen.document["model"]
    assert qwen.document["parallelism"]["expert_parallel"] == 8
    parse_scenario(qwen.document)
