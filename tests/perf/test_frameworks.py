"""Framework profiles: each property moves the prediction the documented way."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planner.errors import SpecError
from planner.perf import batch, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.frameworks import FRAMEWORK_PROFILES, profile_of
from planner.perf.operators import layer_ops, layer_times, operator_times
from planner.perf.optable import OperatorTable
from planner.scenario import parse_scenario
from planner.specs.scenario import Framework, Scenario


def _scenario(
    framework: str, gpu: str = "h100-sxm", preset: str = "llama3-8b", **par: Any
) -> Scenario:
    parallelism = {"tensor_parallel": 1, "global_batch_size": 64, "zero_stage": 3, **par}
    return parse_scenario(
        {
            "model": {"preset": preset},
            "hardware": {"gpu": gpu, "num_gpus": 8 * parallelism["tensor_parallel"]},
            "parallelism": parallelism,
            "training": {"framework": framework},
        }
    )


def test_every_framework_has_a_profile() -> None:
    assert set(FRAMEWORK_PROFILES) == set(Framework)
    assert profile_of(Framework.MEGATRON).fused_attention


def test_eager_stack_is_slower_than_transformer_engine_on_hopper() -> None:
    te = predict(_scenario("megatron"))
    eager = predict(_scenario("fsdp"))
    assert eager.breakdown.compute_s > te.breakdown.compute_s


def test_flash_attention_2_penalty_only_beyond_ampere() -> None:
    """On A100 both stacks run FlashAttention-2: only the element-wise traffic differs."""
    ratio_a100 = (
        predict(_scenario("fsdp", "a100-80gb")).breakdown.compute_s
        / predict(_scenario("megatron", "a100-80gb")).breakdown.compute_s
    )
    ratio_h100 = (
        predict(_scenario("fsdp")).breakdown.compute_s
        / predict(_scenario("megatron")).breakdown.compute_s
    )
    assert 1.0 < ratio_a100 < ratio_h100


def test_te_tp_overlap_hides_tensor_parallel_communication() -> None:
    te = predict(_scenario("megatron", tensor_parallel=8, sequence_parallel=True))
    eager = predict(_scenario("fsdp", tensor_parallel=8, sequence_parallel=True))
    assert te.breakdown.tp_comm_exposed_s < eager.breakdown.tp_comm_exposed_s


def test_fp8_tensor_parallel_all_gathers_where_stated_under_tensorwise() -> None:
    """Older torchtitan (torchao's float8 tensor-parallel styles) all-gathers FP8 under
    tensorwise float8; current torchtitan (no tensorwise recipe, dtype-agnostic sharding since
    2026-04) and the other stacks gather 16-bit values."""

    def tp_s(framework: str, **par: Any) -> float:
        layout = {"tensor_parallel": 8, "sequence_parallel": True, "micro_batch_size": 4, **par}
        return predict(_scenario(framework, **layout)).breakdown.tp_comm_exposed_s

    assert not profile_of(Framework.TORCHTITAN).fp8_tp_all_gather
    bf16 = tp_s("torchtitan")
    fp8 = {"precision": "fp8", "fp8_recipe": "tensorwise"}
    tensorwise = tp_s("torchtitan", fp8_tp_all_gather=True, **fp8)
    # the layers' all-gathers (half of their collectives' bytes) move one byte per element;
    # the reduce-scatters and the embedding's / LM head's collectives stay 16-bit
    assert 0.7 * bf16 < tensorwise < 0.8 * bf16
    assert tp_s("torchtitan", **fp8) == pytest.approx(bf16)  # current torchtitan
    # a delayed-scaling recipe (torchao's float8 all-gather needs dynamic scaling) and a stack
    # that gathers 16-bit values keep the 16-bit all-gathers
    delayed = {"precision": "fp8", "fp8_recipe": "delayed", "fp8_tp_all_gather": True}
    assert tp_s("torchtitan", **delayed) == pytest.approx(bf16)
    assert tp_s("fsdp", **fp8) == pytest.approx(tp_s("fsdp"))


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_torchtitan_op_level_sac_never_raises_activations(recompute: str) -> None:
    none = predict(_scenario("torchtitan", recompute="none", micro_batch_size=2))
    other = predict(_scenario("torchtitan", recompute=recompute, micro_batch_size=2))
    assert other.memory.activations_bytes <= none.memory.activations_bytes


def test_eager_loss_holds_more_logit_bytes_than_megatron() -> None:
    megatron = predict(_scenario("megatron", precision="fp8"))
    fsdp = predict(_scenario("fsdp", precision="fp8"))
    assert fsdp.memory.activations_bytes > megatron.memory.activations_bytes


@pytest.mark.parametrize("framework", ["torchtitan", "fsdp", "llm_foundry"])
def test_only_stacks_that_name_the_first_microbatch_cache_fp8_weights(framework: str) -> None:
    """TE caches a quantised weight only given ``is_first_microbatch`` (Megatron-Core passes
    it; llm-foundry's ``te.Linear`` and plain loops do not; torchao casts per use)."""
    same = {"zero_stage": 1}
    cached = predict(_scenario("megatron", precision="fp8", **same)).memory
    other_fp8 = predict(_scenario(framework, precision="fp8", **same)).memory
    other_bf16 = predict(_scenario(framework, precision="bf16", **same)).memory
    megatron_bf16 = predict(_scenario("megatron", precision="bf16", **same)).memory
    assert cached.weights_bytes > megatron_bf16.weights_bytes  # the 1-byte copy
    assert other_fp8.weights_bytes == other_bf16.weights_bytes


def test_llm_foundry_flash_attention_v1_is_slower_than_flash_attention_2() -> None:
    """llm-foundry 0.4 ships flash-attn 1.0.9 (FlashAttention-2 is ~2x faster, Dao 2023)."""
    par = {"micro_batch_size": 1}
    foundry = predict(_scenario("llm_foundry", "a100-80gb", **par))
    fsdp = predict(_scenario("fsdp", "a100-80gb", **par))
    assert profile_of(Framework.LLM_FOUNDRY).flash_attention_v1
    assert foundry.breakdown.compute_s > fsdp.breakdown.compute_s


def test_recompute_early_stop_skips_the_down_projection_forward_gemm() -> None:
    """Under full recompute with early stop, each dense layer re-runs its forward less the MLP
    down projection's GEMM: exactly that GEMM's time per layer and microbatch."""
    par = {"micro_batch_size": 2, "recompute": "full"}
    stops = ScenarioArrays.from_scenario(_scenario("llm_foundry", "a100-80gb", **par))
    whole = ScenarioArrays.from_scenario(
        _scenario("llm_foundry", "a100-80gb", recompute_early_stop=False, **par)
    )
    eff = DefaultEfficiency()
    table = OperatorTable(stops, eff)
    table.gemm(
        "down", stops.tokens_per_microbatch, stops.hidden_size, stops.ffn_hidden_size, lp=False
    )
    down_s = table.totals()["down"]
    assert stops.recompute_early_stop
    assert not whole.recompute_early_stop
    assert operator_times(stops, eff).dense_recompute_skipped_s == pytest.approx(down_s)
    t_stop = layer_times(operator_times(stops, eff), stops)
    t_whole = layer_times(operator_times(whole, eff), whole)
    assert t_stop.forward_s == pytest.approx(t_whole.forward_s)
    assert t_whole.total_s - t_stop.total_s == pytest.approx(down_s)


@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_recompute_early_stop_changes_nothing_without_full_recompute(recompute: str) -> None:
    par = {"micro_batch_size": 2, "recompute": recompute}
    stops = predict(_scenario("llm_foundry", "a100-80gb", **par))
    whole = predict(_scenario("llm_foundry", "a100-80gb", recompute_early_stop=False, **par))
    assert stops.iteration_time_s == whole.iteration_time_s


def test_recompute_early_stop_defaults_to_the_framework_and_yields_to_the_scenario() -> None:
    """llm-foundry (torch 2.1, non-reentrant checkpointing) stops early; Megatron's
    ``tensor_parallel.checkpoint`` re-runs the whole layer unless the scenario says otherwise."""
    full = {"recompute": "full"}
    assert ScenarioArrays.from_scenario(_scenario("llm_foundry", **full)).recompute_early_stop
    assert not ScenarioArrays.from_scenario(_scenario("megatron", **full)).recompute_early_stop
    assert ScenarioArrays.from_scenario(
        _scenario("megatron", recompute_early_stop=True, **full)
    ).recompute_early_stop
    foundry = predict(_scenario("llm_foundry", "a100-80gb", **full))
    whole = predict(_scenario("llm_foundry", "a100-80gb", recompute_early_stop=False, **full))
    assert foundry.iteration_time_s < whole.iteration_time_s


def test_recompute_early_stop_must_be_a_flag() -> None:
    with pytest.raises(SpecError, match="recompute_early_stop"):
        _scenario("llm_foundry", recompute="full", recompute_early_stop="yes")


def test_nemo_overlaps_interleaved_pipeline_p2p() -> None:
    par = {
        "tensor_parallel": 1,
        "pipeline_parallel": 4,
        "virtual_pipeline": 8,
        "zero_stage": 1,
        "global_batch_size": 128,
    }
    nemo = predict(_scenario("nemo", **par))
    megatron = predict(_scenario("megatron", **par))
    assert nemo.breakdown.pp_comm_exposed_s < megatron.breakdown.pp_comm_exposed_s


def test_deepspeed_zero3_per_tensor_gathers_cost_more_latency_than_fsdp() -> None:
    same = {"micro_batch_size": 1, "grad_reduce_in_fp32": True}  # same bytes, more collectives
    deepspeed = predict(_scenario("deepspeed", **same))
    fsdp = predict(_scenario("fsdp", **same))
    assert profile_of(Framework.DEEPSPEED).zero3_gather_per_tensor
    assert deepspeed.breakdown.dp_comm_exposed_s >= fsdp.breakdown.dp_comm_exposed_s


def test_loss_traffic_per_logit_follows_each_stacks_loss_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Megatron-Core's unfused fp32 vocab-parallel loss (52 B/logit) > eager
    ``F.cross_entropy(logits.float())`` (40) > flash-attn's fused loss in llm-foundry (10)."""
    megatron = profile_of(Framework.MEGATRON).loss_bytes_per_logit
    eager = profile_of(Framework.TORCHTITAN).loss_bytes_per_logit
    foundry = profile_of(Framework.LLM_FOUNDRY).loss_bytes_per_logit
    assert megatron > eager > foundry > 0.0
    slow = predict(_scenario("megatron")).breakdown.compute_s
    fused = replace(profile_of(Framework.MEGATRON), loss_bytes_per_logit=foundry)
    monkeypatch.setattr(batch, "profile_of", lambda framework: fused)
    assert predict(_scenario("megatron")).breakdown.compute_s < slow


def test_automodel_loss_is_eager_cross_entropy_on_16_bit_logits() -> None:
    """Automodel's benchmark recipes run ``F.cross_entropy`` without the fp32 upcast: log-softmax
    (2 + 2 read, 2 written), the dense nll gradient (2) and its backward (2 + 2 read, 2
    written), 14 bytes per logit against the 40 of the upcast loss; not a fused kernel."""
    automodel = profile_of(Framework.AUTOMODEL)
    assert (automodel.loss_bytes_per_logit, automodel.fused_cross_entropy) == (14.0, False)
    assert not automodel.loss_upcast_fp32
    assert profile_of(Framework.TORCHTITAN).loss_upcast_fp32


def test_gradient_reduction_precision_follows_the_stack_and_the_scenario() -> None:
    """bf16 Megatron reduces fp32 gradients (Megatron-LM ``arguments.py``), fp16 Megatron and
    DeepSpeed 16-bit ones; ``parallelism.grad_reduce_in_fp32`` overrides the default."""

    def dp_s(framework: str, **par: Any) -> float:
        scenario = _scenario(framework, zero_stage=1, global_batch_size=8, **par)
        return predict(scenario).breakdown.dp_comm_exposed_s

    fp32 = dp_s("megatron")
    assert dp_s("megatron", precision="fp16") < fp32
    assert dp_s("megatron", grad_reduce_in_fp32=False) < fp32
    assert dp_s("megatron", precision="fp16", grad_reduce_in_fp32=True) == pytest.approx(fp32)
    assert dp_s("deepspeed") < dp_s("deepspeed", grad_reduce_in_fp32=True)
    with pytest.raises(SpecError, match="grad_reduce_in_fp32"):
        _scenario("megatron", grad_reduce_in_fp32="yes")


def test_deepspeed_zero3_short_prefetch_and_recompute_regather_expose_more_gathers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeepSpeed's 5e7-parameter prefetch hides less of each tensor's gather than FSDP's
    whole-block prefetch, and full recompute gathers the parameters once more."""
    deepspeed = profile_of(Framework.DEEPSPEED)
    assert deepspeed.zero3_prefetch_params == 5e7
    assert deepspeed.zero3_regather_on_recompute
    # Llama 3 70B: ~97M parameters per tensor, beyond the 5e7 prefetch
    scenario = _scenario("deepspeed", preset="llama3-70b", micro_batch_size=1, recompute="full")
    real = predict(scenario).breakdown.dp_comm_exposed_s
    for change in ({"zero3_prefetch_params": 0.0}, {"zero3_regather_on_recompute": False}):
        patched = replace(deepspeed, **change)  # type: ignore[arg-type]
        monkeypatch.setattr(batch, "profile_of", lambda framework, p=patched: p)
        assert predict(scenario).breakdown.dp_comm_exposed_s < real


def test_deepspeed_2021_lock_step_puts_reduce_scatters_and_copies_on_the_critical_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeepSpeed 0.3-0.4 synchronises the device at every fetch: the gradient reduce-scatters
    and the host-launched per-rank copies of its list collectives cannot hide under compute."""
    deepspeed = profile_of(Framework.DEEPSPEED)
    assert deepspeed.zero3_lock_step
    assert not any(
        p.zero3_lock_step for f, p in FRAMEWORK_PROFILES.items() if f != Framework.DEEPSPEED
    )
    scenario = _scenario("deepspeed", preset="llama3-70b", micro_batch_size=1, recompute="full")
    real = predict(scenario).breakdown.dp_comm_exposed_s
    patched = replace(deepspeed, zero3_lock_step=False)
    monkeypatch.setattr(batch, "profile_of", lambda framework: patched)
    assert predict(scenario).breakdown.dp_comm_exposed_s < real


def test_data_parallel_overlap_can_be_switched_off() -> None:
    """``overlap_grad_reduce`` / ``overlap_param_gather`` false: the whole reduction / gather
    is exposed (Megatron-LM without ``--overlap-grad-reduce``)."""

    def dp_s(**par: Any) -> float:
        scenario = _scenario("megatron", zero_stage=1, global_batch_size=8, **par)
        return predict(scenario).breakdown.dp_comm_exposed_s

    both = dp_s()
    assert dp_s(overlap_grad_reduce=True, overlap_param_gather=True) == both
    no_grad = dp_s(overlap_grad_reduce=False)
    no_gather = dp_s(overlap_param_gather=False)
    assert no_grad > both
    assert no_gather > both
    assert dp_s(overlap_grad_reduce=False, overlap_param_gather=False) > max(no_grad, no_gather)


def test_tensor_parallel_overlap_follows_the_scenario_then_the_framework() -> None:
    """``tp_comm_overlap`` false: the tensor-parallel collectives are not split under the
    GEMMs (Megatron-LM without ``--tp-comm-overlap``, its own default), so more of them is
    exposed than under the ``megatron`` profile's userbuffers; unset: the profile's choice."""

    def tp_s(framework: str, **par: Any) -> float:
        scenario = _scenario(framework, tensor_parallel=8, sequence_parallel=True, **par)
        return predict(scenario).breakdown.tp_comm_exposed_s

    assert profile_of(Framework.MEGATRON).tp_comm_overlap
    assert not profile_of(Framework.FSDP).tp_comm_overlap
    megatron = tp_s("megatron")
    assert tp_s("megatron", tp_comm_overlap=True) == megatron
    assert tp_s("megatron", tp_comm_overlap=False) > 1.5 * megatron
    assert tp_s("fsdp", tp_comm_overlap=True) < tp_s("fsdp")
    with pytest.raises(SpecError, match=r"parallelism\.tp_comm_overlap"):
        _scenario("megatron", tp_comm_overlap="yes")


def test_tensor_parallel_overlap_needs_sequence_parallel_layers() -> None:
    """NeMo and Megatron-Bridge switch the chunked overlap off with a warning when sequence
    parallelism is off: stated or left to the profile, it hides nothing more than no overlap
    does there, and still hides its share once the layers are sequence-parallel."""

    def tp_s(**par: Any) -> float:
        scenario = _scenario("nemo", tensor_parallel=8, **par)
        return predict(scenario).breakdown.tp_comm_exposed_s

    assert profile_of(Framework.NEMO).tp_comm_overlap
    plain = tp_s(sequence_parallel=False, tp_comm_overlap=False)
    assert tp_s(sequence_parallel=False) == pytest.approx(plain, rel=1e-12)
    assert tp_s(sequence_parallel=False, tp_comm_overlap=True) == pytest.approx(plain, rel=1e-12)
    assert tp_s(sequence_parallel=True) < 0.7 * tp_s(sequence_parallel=True, tp_comm_overlap=False)


def _gpt3_interleaved(framework: str, virtual_pipeline: int) -> Scenario:
    """GPT-3 175B as NeMo 24.07's 128-GPU row runs it: TP 4, PP 8, distributed optimizer."""
    parallelism: dict[str, Any] = {
        "tensor_parallel": 4,
        "pipeline_parallel": 8,
        "sequence_parallel": True,
        "zero_stage": 1,
        "micro_batch_size": 1,
        "global_batch_size": 256,
        "precision": "fp8",
    }
    if virtual_pipeline > 1:
        parallelism["virtual_pipeline"] = virtual_pipeline
    return parse_scenario(
        {
            "model": {"preset": "gpt3-175b"},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 128},
            "parallelism": parallelism,
            "training": {"framework": framework},
        }
    )


def test_nemo_reduces_each_interleaved_chunk_after_its_last_backward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NeMo's distributed Adam syncs gradients (and parameters) per model chunk under the
    interleaved schedule (Megatron-Core 0.8 ``grad_sync_func``): more of the data-parallel
    exchange hides than behind the last microbatch alone; without interleaving nothing
    changes."""
    nemo = profile_of(Framework.NEMO)
    assert nemo.chunk_grad_sync
    assert not profile_of(Framework.MEGATRON).chunk_grad_sync
    chunked = predict(_gpt3_interleaved("nemo", 6)).breakdown.dp_comm_exposed_s
    plain_1f1b = predict(_gpt3_interleaved("nemo", 1)).breakdown.dp_comm_exposed_s
    whole = replace(nemo, chunk_grad_sync=False)
    monkeypatch.setattr(batch, "profile_of", lambda framework: whole)
    assert predict(_gpt3_interleaved("nemo", 6)).breakdown.dp_comm_exposed_s > chunked
    assert predict(_gpt3_interleaved("nemo", 1)).breakdown.dp_comm_exposed_s == plain_1f1b


def test_chunked_sync_exposes_the_last_chunk_or_the_backlog() -> None:
    """``max(D/v, D - (v-1)·p·t/v)``, never below the share no overlap hides."""
    from types import SimpleNamespace
    from typing import cast

    from planner.perf.batch import ScenarioArrays
    from planner.perf.data import _exposed

    a = cast(
        ScenarioArrays,
        SimpleNamespace(virtual_pipeline=4.0, pipeline_parallel=4.0, num_microbatches=8.0),
    )
    assert _exposed(1.0, 0.15, 0.1, a, True) == pytest.approx(0.7)  # backlog: 1 - 3·4·0.1/4
    assert _exposed(1.0, 0.15, 1.0, a, True) == pytest.approx(0.25)  # the last chunk alone
    assert _exposed(1.0, 0.3, 1.0, a, True) == pytest.approx(0.3)
    assert _exposed(1.0, 0.15, 0.1, a, False) == pytest.approx(0.9)  # whole stage: 1 - 0.1


def _fine_grained_moe(framework: str) -> Scenario:
    """Qwen3-30B-A3B (128 experts of 768, top-8) at expert parallel 8 with 512-token
    microbatches: 256 tokens per local expert, whose weight gradients are memory-bound."""
    return parse_scenario(
        {
            "model": {
                "preset": "qwen3-30b-a3b",
                "seq_length": 512,
                "moe_router_force_load_balancing": True,
            },
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {
                "expert_parallel": 8,
                "global_batch_size": 64,
                "zero_stage": 1,
            },
            "training": {"framework": framework},
        }
    )


def test_fused_wgrad_accumulation_reads_and_writes_the_fp32_gradient_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Megatron-Core's weight-gradient GEMMs add into the fp32 ``main_grad`` buffer (8 bytes
    per weight element per microbatch): with 256 tokens per expert that traffic, not the
    FLOPs, sets the experts' weight-gradient time (measured: ``benchmarks/moe_layer_h100.py``);
    a stack that writes a 16-bit gradient moves a quarter of it."""
    assert profile_of(Framework.MEGATRON).wgrad_accumulation_fusion
    assert profile_of(Framework.NEMO).wgrad_accumulation_fusion
    assert not profile_of(Framework.FSDP).wgrad_accumulation_fusion
    scenario = _fine_grained_moe("megatron")
    fused = predict(scenario).breakdown.compute_s
    plain = replace(profile_of(Framework.MEGATRON), wgrad_accumulation_fusion=False)
    monkeypatch.setattr(batch, "profile_of", lambda framework: plain)
    written = predict(scenario).breakdown.compute_s
    assert fused > written
    # the difference is the buffer traffic of the weight gradients, (8 - 2) bytes per element
    # per microbatch: at least the experts' at the datasheet bandwidth; the attention and output
    # weights add about a third (512 tokens leave their gradients memory-bound too)
    model = scenario.model
    expert_weights = 3 * model.hidden_size * model.moe_ffn_hidden_size * model.num_experts / 8
    experts_s = (
        6.0
        * expert_weights
        * model.num_layers
        * 8
        / (scenario.hardware.gpu.hbm_bandwidth_bytes_per_s)
    )
    assert experts_s < fused - written < 1.6 * experts_s


def test_products_of_two_activations_keep_a_16_bit_output_under_wgrad_fusion() -> None:
    """Only weight gradients add into the gradient buffer: the backward products of the
    attention scores without flash attention (batched, activation by activation) write their
    16-bit output, while a linear layer's weight gradient reads and writes the fp32 buffer."""
    scenario = _fine_grained_moe("megatron")
    table = OperatorTable(ScenarioArrays.from_scenario(scenario), DefaultEfficiency())
    table.gemm("dense_backward_s", 512, 512, 128, count=4, lp=False, backward=True, batched=True)
    table.gemm("dense_backward_s", 512, 2048, 1024, lp=False, backward=True)
    assert [float(b) for b in table.gemm_out_bytes] == [2.0, 2.0, 2.0, 8.0]


def _titan_arrays(**par: Any) -> ScenarioArrays:
    layout = {"micro_batch_size": 2, **par}
    return ScenarioArrays.from_scenario(_scenario("torchtitan", **layout))


def test_torchtitan_op_level_sac_reruns_the_even_matmuls_not_the_attention_kernel() -> None:
    """torchtitan's op-level SAC saves the attention kernel's outputs and re-runs ``wk``,
    ``wo`` and ``w3`` (the 2nd, 4th and 6th ``aten.mm`` of a Llama block) with the element-wise
    forward around them; Megatron's selective recompute re-runs the attention core."""
    eff = DefaultEfficiency()
    a = _titan_arrays(recompute="selective", separate_qkv_projections=True)
    times = operator_times(a, eff)
    layer = layer_times(times, a)
    again = layer.total_s - times.dense_forward_s - times.dense_backward_s
    assert again == pytest.approx(times.dense_module_recompute_s)
    assert times.dense_recompute_s > 0.0  # the attention kernel's forward, not re-run here
    matmuls = OperatorTable(a, eff)
    tok, h, kv, f = 2 * 8192, 4096, 1024, 14336
    for n, k in ((kv, h), (h, h), (f, h)):
        matmuls.gemm("again", tok, n, k, lp=False)
    three = matmuls.totals()["again"]
    # the three matmuls and the norms, residual add, rotary embedding and SwiGLU around them
    assert three < times.dense_module_recompute_s < 1.5 * three
    assert operator_times(_titan_arrays(recompute="none"), eff).dense_module_recompute_s == 0.0
    megatron = ScenarioArrays.from_scenario(
        _scenario("megatron", micro_batch_size=2, recompute="selective")
    )
    megatron_times = operator_times(megatron, eff)
    megatron_again = layer_times(megatron_times, megatron).total_s - (
        megatron_times.dense_forward_s + megatron_times.dense_backward_s
    )
    assert megatron_again == pytest.approx(megatron_times.dense_recompute_s)


def test_torchtitan_op_level_sac_gathers_the_tensor_parallel_inputs_again() -> None:
    """The sequence-parallel all-gathers before the re-run matmuls are not saved (the
    reduce-scatters are): torchtitan's selective recompute repeats the attention's and the
    MLP's all-gather; a stack without op-level SAC repeats none under selective recompute."""

    def tp_s(framework: str, recompute: str) -> float:
        layout = {"tensor_parallel": 8, "micro_batch_size": 2, "recompute": recompute}
        return predict(_scenario(framework, **layout)).breakdown.tp_comm_exposed_s

    assert tp_s("torchtitan", "selective") > tp_s("torchtitan", "none")
    assert tp_s("fsdp", "selective") == pytest.approx(tp_s("fsdp", "none"))
    # two all-gathers of the four collective pairs' eight collectives per layer
    extra = tp_s("torchtitan", "selective") / tp_s("torchtitan", "none") - 1.0
    assert 0.15 < extra < 0.25


def test_torchtitan_fuses_query_key_value_and_keeps_gate_and_up_apart() -> None:
    """Current torchtitan builds one ``wqkv`` (``fuse_qkv`` default since 3396a4b37) beside
    separate ``w1`` / ``w3``; a scenario of an older checkout states its ``wq`` / ``wk`` /
    ``wv``, and the gate/up split yields to the scenario too."""
    titan = profile_of(Framework.TORCHTITAN)
    assert not titan.separate_qkv_projections
    assert titan.separate_gate_up_projections
    assert not profile_of(Framework.MEGATRON).separate_gate_up_projections
    current = _titan_arrays()
    assert not current.separate_qkv_projections
    assert current.separate_gate_up_projections
    older = _titan_arrays(separate_qkv_projections=True, separate_gate_up_projections=False)
    assert older.separate_qkv_projections
    assert not older.separate_gate_up_projections
    stated = ScenarioArrays.from_scenario(_scenario("megatron", separate_qkv_projections=True))
    assert stated.separate_qkv_projections


@pytest.mark.parametrize(
    "field", ["separate_qkv_projections", "separate_gate_up_projections", "fp8_tp_all_gather"]
)
def test_framework_code_fields_must_be_flags(field: str) -> None:
    with pytest.raises(SpecError, match=field):
        _scenario("torchtitan", **{field: "yes"})


@pytest.mark.parametrize(
    ("field", "more_gemms"), [("separate_qkv_projections", 2), ("separate_gate_up_projections", 1)]
)
def test_separate_projections_cost_the_same_flops_in_more_gemms(
    field: str, more_gemms: int
) -> None:
    """Separate ``wq``/``wk``/``wv`` (or ``w1``/``w3``) linears: the same FLOPs as one fused
    projection in more, narrower GEMMs; under TP 8 the key and value GEMMs are 128 columns
    wide and memory-bound, so the attention's take longer (the MLP's halves, 1792 columns,
    stay compute-bound: no slower)."""
    eff = DefaultEfficiency()
    a = _titan_arrays(tensor_parallel=8)
    split, fused = replace(a, **{field: True}), replace(a, **{field: False})
    split_table, fused_table = OperatorTable(split, eff), OperatorTable(fused, eff)
    for table, arrays in ((split_table, split), (fused_table, fused)):
        layer_ops(table, arrays, eff, moe=False)
    for group in ("dense_forward_s", "dense_backward_s"):
        assert split_table.gemm_flops(group) == pytest.approx(fused_table.gemm_flops(group))

        def launches(table: OperatorTable, group: str = group) -> float:
            counts = zip(table.gemm_groups, table.gemm_count, strict=True)
            return float(sum(c for g, c in counts if g == group))

        per_direction = 1 if group == "dense_forward_s" else 2  # dgrad and wgrad
        assert launches(split_table) == launches(fused_table) + more_gemms * per_direction
        assert split_table.totals()[group] >= fused_table.totals()[group]
        if field == "separate_qkv_projections":
            assert split_table.totals()[group] > fused_table.totals()[group]


def test_torchtitan_op_level_sac_with_fused_qkv_reruns_wo_and_w3_not_wk() -> None:
    """With one ``wqkv`` the block's matmuls are ``wqkv, wo, w1, w3, w2``: the even ones are
    ``wo`` and ``w3``, so the re-run loses ``wk``'s GEMM (and its input's cast under FP8)."""
    eff = DefaultEfficiency()
    for precision in ("bf16", "fp8"):
        layout = {"recompute": "selective", "precision": precision}
        fused = operator_times(_titan_arrays(**layout), eff).dense_module_recompute_s
        split = operator_times(
            _titan_arrays(separate_qkv_projections=True, **layout), eff
        ).dense_module_recompute_s
        table = OperatorTable(_titan_arrays(**layout), eff)
        table.gemm("wk", 2 * 8192, 1024, 4096, lp=precision == "fp8")
        assert split - fused >= table.totals()["wk"] * (1.0 - 1e-9)


def test_compiled_loss_moves_fewer_bytes_than_the_eager_loss() -> None:
    """``training.compiled_loss``: 8 bytes per logit (two reads forward, a read and a 16-bit
    write backward) against the eager upcast loss's 40; a stack whose loss is already a fused
    kernel keeps its own count."""

    def compute_s(framework: str, compiled: bool) -> float:
        scenario = _scenario(framework, micro_batch_size=2, global_batch_size=16)  # 1 microbatch
        training = replace(scenario.training, compiled_loss=compiled)
        return predict(replace(scenario, training=training)).breakdown.compute_s

    tok, vocab = 2 * 8192, 128256
    saved = compute_s("torchtitan", False) - compute_s("torchtitan", True)
    hbm = 3.35e12  # h100-sxm
    assert (40.0 - 8.0) * tok * vocab / hbm < saved < 2.0 * (40.0 - 8.0) * tok * vocab / hbm
    assert compute_s("megatron", True) == pytest.approx(compute_s("megatron", False))


def test_torchtitan_async_tp_leaves_the_summed_input_gradients_reduce_scatters_whole() -> None:
    """torch's micro-pipelined TP splits a reduce-scatter only after one matmul; with separate
    projections the backward's input gradients of the attention and the MLP are sums of
    matmuls, so those two reduce-scatters per layer are not hidden the way the others are."""

    def tp_s(framework: str, overlap: bool) -> float:
        layout = {"tensor_parallel": 8, "micro_batch_size": 2, "tp_comm_overlap": overlap}
        return predict(_scenario(framework, **layout)).breakdown.tp_comm_exposed_s

    def split_qkv_s(overlap: bool) -> float:
        layout = {"tensor_parallel": 8, "micro_batch_size": 2, "tp_comm_overlap": overlap}
        scenario = _scenario("torchtitan", separate_qkv_projections=True, **layout)
        return predict(scenario).breakdown.tp_comm_exposed_s

    titan_hidden = tp_s("torchtitan", False) - tp_s("torchtitan", True)
    split_hidden = split_qkv_s(False) - split_qkv_s(True)
    fsdp_hidden = tp_s("fsdp", False) - tp_s("fsdp", True)
    assert tp_s("torchtitan", False) == pytest.approx(tp_s("fsdp", False))
    # separate wq / wk / wv and w1 / w3: two of the eight collectives of a layer stay whole,
    # about 3/4 of what fsdp hides; current torchtitan's fused wqkv: only the MLP's, 7/8
    assert 0.65 * fsdp_hidden < split_hidden < 0.85 * fsdp_hidden
    assert 0.8 * fsdp_hidden < titan_hidden < 0.95 * fsdp_hidden
