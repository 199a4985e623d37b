"""The Megatron-Bridge 2025 converter on rows copied from
``megatron_bridge_2025.csv`` (NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md``
@ ``067f987df03b``; the file itself is in the workplace's shared data, which tests do not read):
precision recipes, routing, the DeepSeek-V3 pipeline layout, measured time and releases."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.accuracy.bridge import convert_bridge
from benchmarks.accuracy.cases import Case
from benchmarks.accuracy.convert import deduplicate
from benchmarks.accuracy.runs import PublishedRun
from planner.perf import predict
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
GPT_OSS_2511 = {
    "model_name": "GPT OSS 120B",
    "layers": "36",
    "seq_len": "4096",
    "moe_experts": "128",
    "num_gpus": "64",
    "tp": "1",
    "cp": "1",
    "ep": "8",
    "micro_batch": "4",
    "global_batch": "512",
    "zero_stage": "DDP (FSDP=0)",
    "precision": "BF16",
}
"""The cells the 25.11 GPT-OSS 120B rows on B200 and H100 share as the page states them."""
CS_2509 = "FP8 (precision column absent for 25.09; primary presumably per-tensor/current scaling)"


def _run(config_id: str, tokens_per_gpu: float, **fields: str) -> PublishedRun:
    return PublishedRun(
        source="megatron_bridge_2025",
        config_id=config_id,
        fields=fields,
        metrics={"tokens_per_s_per_gpu": tokens_per_gpu},
        notes="",
    )


def _llama(config_id: str, tokens_per_gpu: float, gpu: str, precision: str) -> Case:
    return convert_bridge(_run(config_id, tokens_per_gpu, gpu=gpu, precision=precision, **LLAMA))


def test_dense_rows_and_their_recipes() -> None:
    cs = _llama(
        "mb_25.11_Pre-Training_DGX-GB200_LLAMA3_8B_8_FP8-CS_128_tp1pp1cp1vpn/aep1_primary",
        31508,
        "GB200",
        "FP8-CS",
    )
    par = cs.document["parallelism"]
    assert (par["precision"], par["fp8_recipe"], par["zero_stage"]) == ("fp8", "tensorwise", 1)
    assert cs.document["hardware"]["gpu"] == "gb200"
    assert cs.document["training"]["framework"] == "nemo"
    assert cs.measured_iteration_time_s == pytest.approx(128 * 8192 / (31508 * 8))
    assert cs.release == "25.11"
    mx = _llama(
        "mb_25.11_Pre-Training_DGX-GB300_LLAMA3_8B_8_FP8-MX_128_tp1pp1cp1vpn/aep1_alt",
        36108,
        "GB300",
        "FP8-MX",
    )
    assert mx.document["parallelism"]["precision"] == "mxfp8"
    old = _llama(
        "mb_25.09_Pre-Training_DGX-GB200_LLAMA3_8B_8_FP8_128_tp1pp1cp1vpn/aep1_primary",
        31357,
        "GB200",
        CS_2509,
    )
    assert old.document["parallelism"]["fp8_recipe"] == "tensorwise"
    assert not any("precision" in a for a in old.assumptions)  # read in the scripts, not assumed
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


LLAMA_8B_TAIL = "tp1pp1cp1vpn/aep1_alt"
BLOCK_2509 = (
    "FP8 blockwise (parenthetical: 32x32 on GB200/B200; 128x128 weights + 1x128 activations"
    " on H100)"
)


def test_the_2509_cells_in_parentheses_ran_mxfp8_on_blackwell_and_blockwise_on_h100() -> None:
    """25.09's second figures: the ``fp8_mx`` key of the release's perf matrices on B200 and
    GB200 (their layouts), subchannel ``fp8_ss`` (128x128 / 1x128 blocks) on H100."""
    gb200, h100 = (
        _llama(
            f"mb_25.09_Pre-Training_DGX-{system}_LLAMA3_8B_8_FP8_128_{LLAMA_8B_TAIL}",
            t,
            g,
            BLOCK_2509,
        )
        for system, t, g in (("GB200", 29925, "GB200"), ("H100", 14079, "H100-SXM"))
    )
    assert gb200.document["parallelism"]["precision"] == "mxfp8"
    assert gb200.document["parallelism"]["fp8_recipe"] == "mxfp8"  # bf16_with_mxfp8_mixed's
    par = h100.document["parallelism"]
    assert (par["precision"], par["fp8_recipe"]) == ("fp8", "blockwise")
    for case in (gb200, h100):
        parse_scenario(case.document)


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


DEEPSEEK_2509 = {
    "layers": "61",
    "seq_len": "4096",
    "moe_experts": "256 routed + 1 shared",
    "cp": "1",
    "micro_batch": "1",
    "zero_stage": "DDP (FSDP=0)",
    "precision": CS_2509,
}


def _deepseek_2509(
    gpu: str, routing: str, tokens: float, gpus: str, tp: str, pp: str, vp: str, ep: str, gbs: str
) -> Case:
    """A 25.09 DeepSeek-V3 row as the CSV holds it."""
    layout = f"tp{tp}pp{pp}cp1vp{vp}ep{ep}"
    system = gpu.partition("-")[0]
    config = f"mb_25.09_Pre-Training_DGX-{system}_DeepSeekV3_{routing}_{gpus}_FP8_{gbs}"
    return convert_bridge(
        _run(
            f"{config}_{layout}_primary",
            tokens,
            model_name=f"DeepSeekV3 {routing}",
            gpu=gpu,
            num_gpus=gpus,
            tp=tp,
            pp=pp,
            vp=vp,
            ep=ep,
            global_batch=gbs,
            **DEEPSEEK_2509,
        )
    )


def test_each_container_scripts_knobs_per_gpu() -> None:
    """25.09's ``run_script.py`` (Megatron-Bridge v0.1.0rc3): DeepSeek-V3 on H100 with DeepEP,
    the 1F1B all-to-all overlap, ``mla_up_proj`` + ``mlp`` recompute and no overlapped
    gradient reduction; token drop on B200 disables DeepEP. 25.11 (v0.2.0): Qwen3 on H100
    overlaps its all-to-all."""
    h100 = _deepseek_2509("H100-SXM", "(dropless)", 1297, "1024", "2", "8", "4", "64", "8192")
    model, par = h100.document["model"], h100.document["parallelism"]
    assert model["moe_token_dispatcher_type"] == "flex"
    assert model["overlap_moe_expert_parallel_comm"] is True
    assert par["recompute_modules"] == ["mla_up_proj", "mlp"]
    assert par["overlap_grad_reduce"] is False
    assert par["grad_reduce_in_fp32"] is False
    assert par["pipeline_layout"] == "Et|(tt|)*30mL"
    assert any("v0.1.0rc3" in a for a in h100.assumptions)
    b200 = _deepseek_2509("B200", "(tokendrop)", 2265, "256", "1", "16", "1", "8", "2048")
    model, par = b200.document["model"], b200.document["parallelism"]
    assert model["moe_token_dispatcher_type"] == "alltoall"
    assert "overlap_moe_expert_parallel_comm" not in model
    assert par["recompute_modules"] == ["mla_up_proj"]
    assert "overlap_grad_reduce" not in par
    qwen = convert_bridge(
        _run(
            "mb_25.11_Pre-Training_DGX-H100_Qwen3_30B_a3B_16_FP8-CS_512_tp1pp2cp1vp24ep8_primary",
            5275,
            model_name="Qwen3_30B_a3B",
            layers="48",
            seq_len="4096",
            moe_experts="128",
            gpu="H100-SXM",
            num_gpus="16",
            tp="1",
            pp="2",
            cp="1",
            ep="8",
            vp="24",
            micro_batch="2",
            global_batch="512",
            zero_stage="DDP (FSDP=0)",
            precision="FP8-CS",
        )
    )
    assert qwen.document["model"]["overlap_moe_expert_parallel_comm"] is True
    assert qwen.document["model"]["moe_token_dispatcher_type"] == "alltoall"
    assert "recompute_modules" not in qwen.document["parallelism"]
    for case in (h100, b200, qwen):
        parse_scenario(case.document)


def test_an_alternate_cells_micro_batch_follows_its_stated_ga() -> None:
    """25.09 GB200 Llama3 70B, alternate (MXFP8) cell: TP 2 PP 4 on 64 GPUs (DP 8), GBS 128,
    GA 16; the page's single MBS cell (2) is the primary's."""
    fields = {**LLAMA, "model_name": "LLAMA3_70B", "num_gpus": "64", "tp": "2", "pp": "4"}
    fields.update(vp="5", gpu="GB200", precision=BLOCK_2509)
    config = "mb_25.09_Pre-Training_DGX-GB200_LLAMA3_70B_64_FP8_128_tp2pp4cp1vp5ep1"
    alt = PublishedRun(
        source="megatron_bridge_2025",
        config_id=f"{config}_alt",
        fields=fields,
        metrics={"tokens_per_s_per_gpu": 3546},
        notes="container 25.09; GA=16; SOURCE INCONSISTENCY: dp*MBS*GA=256 != GBS=128",
    )
    assert convert_bridge(alt).document["parallelism"]["micro_batch_size"] == 1
    primary = replace(alt, config_id=f"{config}_primary")  # a primary cell keeps its MBS
    assert convert_bridge(primary).document["parallelism"]["micro_batch_size"] == 2
    consistent = replace(alt, notes="GA=8")
    assert convert_bridge(consistent).document["parallelism"]["micro_batch_size"] == 2


def test_megatron_fsdp_rows_offload_activations_and_keep_fp8_weights() -> None:
    """Every FP8-CS / FP8-MX recipe keeps FP8 weights (``fp8_param_gather``, both releases'
    ``mixed_precision.py``); the GB200/GB300 Megatron-FSDP layouts offload the activations of
    the layers their configs name (25.09 GB200 Llama3 70B: 40 of 80) and then fit the GPU; a
    row of another layout (pipeline parallel) offloads none."""
    fields = {**LLAMA, "model_name": "LLAMA3_70B", "layers": "80", "hidden": "8192"}
    fields.update(heads="64", num_gpus="64", gpu="GB200", precision=CS_2509)
    fields.update(zero_stage="Megatron-FSDP (FSDP column=64)")
    config = "mb_25.09_Pre-Training_DGX-GB200_LLAMA3_70B_64_FP8_128_tp1pp1cp1vp1ep1_primary"
    fsdp = convert_bridge(_run(config, 1994, **fields))
    par = fsdp.document["parallelism"]
    assert (par["zero_stage"], par["activation_offload_layers"]) == (3, 40)
    assert par["megatron_fsdp"] is True  # the scripts' optim_grads_params
    assert par["fp8_param_gather"] is True
    assert any("offloaded" in a for a in fsdp.assumptions)
    scenario = parse_scenario(fsdp.document)
    assert predict(scenario).fits_in_memory
    offloaded = replace(
        scenario, parallelism=replace(scenario.parallelism, activation_offload_layers=0)
    )
    assert not predict(offloaded).fits_in_memory
    ddp = {**fields, "zero_stage": "DDP (FSDP=0)", "tp": "2", "pp": "4", "vp": "5"}
    pipelined = convert_bridge(_run(config.replace("tp1pp1cp1vp1", "tp2pp4cp1vp5"), 1, **ddp))
    assert "activation_offload_layers" not in pipelined.document["parallelism"]
    assert "megatron_fsdp" not in pipelined.document["parallelism"]
    mx = _llama(
        "mb_25.11_Pre-Training_DGX-GB300_LLAMA3_8B_8_FP8-MX_128_tp1pp1cp1vpn/aep1_alt",
        36108,
        "GB300",
        "FP8-MX",
    )
    assert mx.document["parallelism"]["fp8_param_gather"] is True
    h100 = _llama(
        f"mb_25.09_Pre-Training_DGX-H100_LLAMA3_8B_8_FP8_128_{LLAMA_8B_TAIL}",
        14079,
        "H100-SXM",
        BLOCK_2509,
    )
    assert h100.document["parallelism"]["fp8_param_gather"] is False  # the subchannel recipe's


def test_a_row_at_odds_with_its_own_ga_takes_the_configs_micro_batch() -> None:
    """25.11 H100 GPT-OSS 120B: DP 16, MBS 4 and GA 2 make 128, not the GBS 512; the
    release's config runs micro-batch 1 (``BASE_GPT_OSS_120B_CONFIG``), which divides it. A
    row stating another micro-batch keeps its own."""
    config = "mb_25.11_Pre-Training_DGX-H100_GPT_OSS_120B_64_BF16_512_tp1pp4cp1vp1ep8_primary"
    fields = {**GPT_OSS_2511, "gpu": "H100-SXM", "pp": "4"}
    odd = replace(_run(config, 1441, **fields), notes="GA=2; SOURCE INCONSISTENCY")
    case = convert_bridge(odd)
    assert case.document["parallelism"]["micro_batch_size"] == 1
    assert any("micro_batch_size 1" in a for a in case.assumptions)
    # a row stating another micro-batch (16 x 8 x 4 = 512) keeps its own
    own = replace(odd, fields={**fields, "micro_batch": "8"}, notes="GA=4")
    assert convert_bridge(own).document["parallelism"]["micro_batch_size"] == 8


def test_the_2511_b200_gpt_oss_row_runs_its_configs_expert_parallel_size() -> None:
    """25.11 B200 GPT-OSS 120B: the page states EP 8, the release's B200 config sets 64
    (``GPT_OSS_120B_B200_BF16_BASE_CONFIG`` @ ``v0.2.0``), which the next container measured
    at the row's throughput; the H100 row keeps its stated EP 8 (its config's)."""
    config = "mb_25.11_Pre-Training_DGX-B200_GPT_OSS_120B_64_BF16_512_tp1pp1cp1vp1ep8_primary"
    b200_run = _run(config, 8213, gpu="B200", pp="1", gpus_per_node="8", **GPT_OSS_2511)
    b200 = convert_bridge(replace(b200_run, notes="GA=2"))
    assert b200.document["parallelism"]["expert_parallel"] == 64
    assert b200.document["parallelism"]["micro_batch_size"] == 4
    assert any("expert_parallel 64" in a for a in b200.assumptions)
    stating_64 = convert_bridge(_run(config, 1, gpu="B200", pp="1", **{**GPT_OSS_2511, "ep": "64"}))
    assert not any("expert_parallel 64 of" in a for a in stating_64.assumptions)
    h100_id = config.replace("B200", "H100").replace("pp1", "pp4")
    h100 = convert_bridge(_run(h100_id, 5630, gpu="H100-SXM", pp="4", **GPT_OSS_2511))
    assert h100.document["parallelism"]["expert_parallel"] == 8
    # the all-to-all of 64 ranks crosses the eight nodes: more exposed expert-parallel time
    # than the same row at its stated EP 8
    stated = dict(b200.document, parallelism={**b200.document["parallelism"], "expert_parallel": 8})
    exposed = [
        predict(parse_scenario(doc)).breakdown.ep_comm_exposed_s for doc in (b200.document, stated)
    ]
    assert exposed[0] > exposed[1]


def test_the_2511_fp8_mx_configs_that_turn_the_parameter_gather_overlap_off() -> None:
    """25.11 (``v0.2.0``): the Llama3 70B / Llama3.1 405B configs on B200, GB200, GB300 and
    DeepSeek-V3 on GB200, GB300 turn ``overlap_param_gather`` off under ``fp8_mx``; FP8-CS
    rows, 25.09 rows and other models keep it."""
    fields = {**LLAMA, "model_name": "LLAMA3.1_405B", "layers": "126", "hidden": "16384"}
    fields.update(heads="128", num_gpus="128", gpu="B200", tp="4", pp="8", cp="2", vp="8")
    fields.update(micro_batch="1", global_batch="64")
    config = "mb_25.11_Pre-Training_DGX-B200_LLAMA3.1_405B_128_FP8-MX_64_tp4pp8cp2vp8ep1_alt"
    mx = convert_bridge(_run(config, 1, precision="FP8-MX", **fields))
    assert mx.document["parallelism"]["overlap_param_gather"] is False
    assert any("parameter gather" in a for a in mx.assumptions)
    cs = convert_bridge(_run(config.replace("MX", "CS"), 1, precision="FP8-CS", **fields))
    assert "overlap_param_gather" not in cs.document["parallelism"]
    older = convert_bridge(_run(config.replace("25.11", "25.09"), 1, precision="FP8-MX", **fields))
    assert "overlap_param_gather" not in older.document["parallelism"]
    small = _llama(
        "mb_25.11_Pre-Training_DGX-B200_LLAMA3_8B_8_FP8-MX_128_tp1pp1cp1vpn/aep1_alt",
        1,
        "B200",
        "FP8-MX",
    )
    assert "overlap_param_gather" not in small.document["parallelism"]
    exposed = predict(parse_scenario(mx.document)).iteration_time_s
    overlapped = {
        k: v for k, v in mx.document["parallelism"].items() if k != "overlap_param_gather"
    }
    hidden = predict(parse_scenario(mx.document | {"parallelism": overlapped})).iteration_time_s
    assert exposed > hidden


def test_the_configs_that_recompute_their_first_layers() -> None:
    """25.11 H100 Llama3 8B: full recompute of the first 5 layers
    (``LLAMA3_8B_H100_FP8_CS_BASE_CONFIG`` ``recompute_num_layers=5``); the same model on
    GB200 and the BF16 rows recompute nothing."""
    config = f"mb_25.11_Pre-Training_DGX-H100_LLAMA3_8B_8_FP8-CS_128_{LLAMA_8B_TAIL}"
    h100 = _llama(config, 1, "H100-SXM", "FP8-CS")
    par = h100.document["parallelism"]
    assert (par["recompute"], par["recompute_num_layers"]) == ("full", 5)
    assert any("first 5 layers" in a for a in h100.assumptions)
    parse_scenario(h100.document)
    bf16 = _llama(config.replace("FP8-CS", "BF16"), 1, "H100-SXM", "BF16")
    assert bf16.document["parallelism"]["recompute"] == "none"
    gb200 = _llama(config.replace("H100", "GB200"), 1, "GB200", "FP8-CS")
    assert "recompute_num_layers" not in gb200.document["parallelism"]


def test_a_row_repeating_the_previous_releases_layout_takes_the_configs() -> None:
    """25.11 H100 Qwen3-30B states 25.09's MBS 2 / VP 24 / GA 32; 25.11's config
    (``QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG``, Megatron-Bridge ``v0.2.0``) runs micro-batch 1
    and VP 12. A row stating another layout keeps its own, and so does 25.09's."""
    fields = {
        "model_name": "Qwen3_30B_a3B",
        "layers": "48",
        "seq_len": "4096",
        "moe_experts": "128",
        "gpu": "H100-SXM",
        "num_gpus": "16",
        "tp": "1",
        "pp": "2",
        "cp": "1",
        "ep": "8",
        "vp": "24",
        "micro_batch": "2",
        "global_batch": "512",
        "zero_stage": "DDP (FSDP=0)",
        "precision": "FP8-CS",
    }
    config = "mb_25.11_Pre-Training_DGX-H100_Qwen3_30B_a3B_16_FP8-CS_512_tp1pp2cp1vp24ep8_primary"
    case = convert_bridge(replace(_run(config, 5275, **fields), notes="GA=32"))
    par = case.document["parallelism"]
    assert (par["micro_batch_size"], par["virtual_pipeline"]) == (1, 12)
    assert any("repeats the previous release's layout" in a for a in case.assumptions)
    parse_scenario(case.document)
    own = convert_bridge(_run(config, 5275, **{**fields, "vp": "6", "micro_batch": "4"}))
    assert (
        own.document["parallelism"]["micro_batch_size"],
        own.document["parallelism"]["virtual_pipeline"],
    ) == (4, 6)
    previous = config.replace("25.11", "25.09").replace(
        "Qwen3_30B_a3B_16_FP8-CS", "Qwen3_30B_a3B_(tokendrop)_16_FP8"
    )
    padded = convert_bridge(
        _run(
            previous,
            10494,
            **{**fields, "model_name": "Qwen3_30B_a3B (tokendrop)", "precision": CS_2509},
        )
    )
    par = padded.document["parallelism"]
    assert (par["micro_batch_size"], par["virtual_pipeline"]) == (2, 24)
