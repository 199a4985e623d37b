"""Uneven pipeline stages and MoE parallel folding, predicted as the frameworks run them, and the
interleaved schedule's bubble for any number of micro-batches."""

from __future__ import annotations

from typing import Any

import pytest

from planner.perf import DefaultEfficiency, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.engine import link_of
from planner.perf.operators import layer_times, operator_times
from planner.perf.parameters import stage_params
from planner.perf.tensor import tensor_parallel_times
from planner.scenario import parse_scenario
from planner.specs import Scenario

BOTH = {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}


def _scenario(
    preset: str, num_gpus: int, framework: str = "megatron", gpu: str = "h100-sxm", **par: Any
) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": preset},
            "hardware": {"gpu": gpu, "num_gpus": num_gpus},
            "parallelism": par,
            "training": {"framework": framework},
        }
    )


def _per_layer_s(s: Scenario) -> float:
    """Compute plus exposed TP communication of one transformer layer per microbatch."""
    a = ScenarioArrays.from_scenario(s)
    eff = DefaultEfficiency()
    layer = layer_times(operator_times(a, eff), a)
    return float(layer.total_s + tensor_parallel_times(a, eff, link_of(a, eff)).layer_s)


# ---- the issue's examples, accepted and predicted as uneven stages -------------------------


@pytest.mark.parametrize(
    ("preset", "gpus", "layout", "stages"),
    [
        (
            "llama3.1-405b",
            1024,
            {"tensor_parallel": 8, "pipeline_parallel": 8, "virtual_pipeline": 8, **BOTH},
            (15, 16, 15),
        ),
        (
            "llama3.1-405b",
            1024,
            {"tensor_parallel": 8, "pipeline_parallel": 16, "virtual_pipeline": 4, **BOTH},
            (7, 8, 7),
        ),
        (
            "qwen3-235b-a22b",
            256,
            {"tensor_parallel": 4, "pipeline_parallel": 8, "expert_parallel": 8, **BOTH},
            (11, 12, 11),
        ),
        (
            "qwen3-235b-a22b",
            256,
            {"tensor_parallel": 4, "pipeline_parallel": 4, "expert_parallel": 16, **BOTH},
            (23, 24, 23),
        ),
    ],
)
def test_issue_examples_are_predicted_with_their_uneven_stages(
    preset: str, gpus: int, layout: dict[str, Any], stages: tuple[int, int, int]
) -> None:
    s = _scenario(preset, gpus, global_batch_size=512, sequence_parallel=True, **layout)
    a = ScenarioArrays.from_scenario(s)
    assert (a.first_stage_layers, a.middle_stage_layers, a.last_stage_layers) == stages
    p = predict(s)
    # a middle rank holds one layer more than the ends: it sets the steady state
    m = a.num_microbatches
    assert p.breakdown.compute_s + p.breakdown.tp_comm_exposed_s == pytest.approx(
        m * stages[1] * _per_layer_s(s), rel=1e-12
    )
    # the same split given another way predicts the same: the first/last options where each
    # rank is one chunk (Megatron-Core wants them divisible by virtual_pipeline), else a layout
    plain = {k: v for k, v in layout.items() if not k.startswith("account_for")}
    vp = layout.get("virtual_pipeline", 1)
    if vp == 1:
        plain |= {
            "decoder_first_pipeline_num_layers": stages[0],
            "decoder_last_pipeline_num_layers": stages[2],
        }
    else:
        per_chunk = (stages[1]) // vp
        stages_total = layout["pipeline_parallel"] * vp
        plain["pipeline_layout"] = (
            f"E{'t' * (per_chunk - 1)}|({'t' * per_chunk}|)*{stages_total - 2},"
            f"{'t' * (per_chunk - 1)}L"
        )
    other = _scenario(preset, gpus, global_batch_size=512, sequence_parallel=True, **plain)
    assert predict(other) == p


def test_a_layout_string_predicts_as_the_options_it_spells() -> None:
    """Qwen3-235B-A22B, pipeline 8 x virtual 4, 94 layers: the embedding and loss each take a
    layer's place (Megatron-MoE-ModelZoo's split), as a layout string or the two options."""
    common = {"tensor_parallel": 4, "pipeline_parallel": 8, "expert_parallel": 8}
    common |= {"global_batch_size": 256, "sequence_parallel": True}
    spelled = _scenario("qwen3-235b-a22b", 256, pipeline_layout="Et*2|(ttt|)*30,ttL", **common)
    assert spelled.parallelism.virtual_pipeline == 4  # derived from the layout
    options = _scenario("qwen3-235b-a22b", 256, virtual_pipeline=4, **common, **BOTH)
    assert predict(spelled) == predict(options)


def test_qwen3_tp2_ep64_on_64_gpus_folds_the_experts() -> None:
    """Expert groups carved from all 64 ranks: expert tensor parallel 1 (unset: the only
    degree that folds), expert data parallel 1, each rank one expert pair of 128."""
    s = _scenario(
        "qwen3-235b-a22b", 64, tensor_parallel=2, expert_parallel=64, global_batch_size=512,
        sequence_parallel=True, recompute="full",
    )  # fmt: skip
    a = ScenarioArrays.from_scenario(s)
    assert (a.expert_tensor_parallel, a.expert_parallel, a.expert_data_parallel_size) == (1, 64, 1)
    stated = _scenario(
        "qwen3-235b-a22b", 64, tensor_parallel=2, expert_parallel=64, global_batch_size=512,
        sequence_parallel=True, recompute="full", expert_tensor_parallel=1,
    )  # fmt: skip
    assert predict(stated) == predict(s)
    # each rank holds 2 of the 128 experts whole: routed-expert parameters per GPU
    params = stage_params(a)
    per_expert = 3 * 4096 * 1536
    assert params.first_expert == pytest.approx(94 * 2 * per_expert)


def test_folding_changes_expert_gemm_shapes_not_their_flops() -> None:
    """Expert tensor parallel 1 instead of 2 (same ranks): each rank runs half the tokens
    through whole experts; the expert FLOPs per rank, the expert parameters held across the
    group and the model FLOPs stay, the expert weights per rank double and the expert
    all-to-all runs over ranks one apart instead of two."""
    base = {"tensor_parallel": 2, "expert_parallel": 8, "global_batch_size": 128}
    base |= {"sequence_parallel": True}
    split = _scenario("qwen3-30b-a3b", 16, expert_tensor_parallel=2, **base)
    whole = _scenario("qwen3-30b-a3b", 16, expert_tensor_parallel=1, **base)
    ps, pw = predict(split), predict(whole)
    assert pw.model_flops_per_iteration == ps.model_flops_per_iteration
    a_s, a_w = ScenarioArrays.from_scenario(split), ScenarioArrays.from_scenario(whole)
    assert stage_params(a_w).first_expert == pytest.approx(2 * stage_params(a_s).first_expert)
    assert a_w.expert_data_parallel_size == 2 * a_s.expert_data_parallel_size == 2


# ---- the engine on uneven stages -----------------------------------------------------------


def test_an_even_split_spelled_out_predicts_exactly_as_before() -> None:
    for preset, pp, vp in (("llama2-7b", 4, 1), ("llama2-7b", 4, 2), ("gpt3-175b", 8, 3)):
        layers = 32 if preset == "llama2-7b" else 96
        plain = _scenario(
            preset, 64, pipeline_parallel=pp, virtual_pipeline=vp, global_batch_size=64
        )
        counts = [layers // (pp * vp)] * (pp * vp)
        spelled = _scenario(
            preset, 64, pipeline_parallel=pp, pipeline_layout=counts, global_batch_size=64
        )
        assert predict(spelled) == predict(plain)


def test_the_slowest_stage_sets_the_steady_state_and_the_mean_sets_the_bubble() -> None:
    common = {"pipeline_parallel": 4, "global_batch_size": 32}
    even = _scenario("llama2-7b", 4, **common)
    heavy = _scenario("llama2-7b", 4, pipeline_layout=[6, 14, 6, 6], **common)
    pe, ph = predict(even), predict(heavy)
    m = 32
    assert ph.breakdown.compute_s == pytest.approx(m * 14 * _per_layer_s(heavy), rel=1e-12)
    assert ph.breakdown.compute_s > pe.breakdown.compute_s
    assert ph.breakdown.pp_bubble_s == pe.breakdown.pp_bubble_s  # the mean rank is the same
    # the optimizer and the memory follow the rank holding the most
    assert ph.breakdown.optimizer_s > pe.breakdown.optimizer_s
    assert ph.memory_per_gpu_bytes > pe.memory_per_gpu_bytes
    light_ends = _scenario("llama2-7b", 4, pipeline_layout=[7, 9, 9, 7], **common)
    a = ScenarioArrays.from_scenario(light_ends)
    assert (a.first_stage_layers, a.middle_stage_layers, a.last_stage_layers) == (7, 9, 7)


def test_torchtitan_runs_a_non_dividing_model_with_its_default_split() -> None:
    s = _scenario("llama3.1-405b", 512, "torchtitan", tensor_parallel=8, pipeline_parallel=8,
                  virtual_pipeline=2, global_batch_size=64)  # fmt: skip
    a = ScenarioArrays.from_scenario(s)
    # 128 effective layers over 16 stages of 8: the first and last one layer lighter
    assert (a.first_stage_layers, a.middle_stage_layers, a.last_stage_layers) == (15, 16, 15)
    assert predict(s).iteration_time_s > 0


# ---- the interleaved bubble with fewer micro-batches than stages ---------------------------


def simulate_interleaved(
    p: int, v: int, m: int, forward: float = 1.0, backward: float = 2.0
) -> float:
    """Makespan of the depth-first interleaved schedule with ``m <= p`` microbatches, each
    model chunk ``forward`` + ``backward`` per microbatch: every rank runs its chunks in
    Megatron-Core's schedule-table order (``get_schedule_table``: chunk 0 of every microbatch,
    then chunk 1, ...), the warm-up forwards (``get_pp_rank_microbatches``) then one forward,
    one backward; each chunk waits for its input from the previous virtual stage."""
    done: dict[tuple[str, int, int, int], float] = {}
    order: dict[int, list[tuple[str, int, int]]] = {}
    for r in range(p):
        fwd = [("F", c, mb) for c in range(v) for mb in range(m)]
        bwd = [("B", c, mb) for c in reversed(range(v)) for mb in range(m)]
        warm = min(2 * (p - r - 1) + (v - 1) * m, m * v)
        seq, rest = fwd[:warm], fwd[warm:]
        while rest:
            seq += [rest.pop(0), bwd.pop(0)]
        order[r] = seq + bwd
    free, pos = [0.0] * p, [0] * p

    def needs(r: int, kind: str, c: int, mb: int) -> tuple[str, int, int, int] | None:
        if kind == "F":
            return ("F", c, mb, r - 1) if r else (("F", c - 1, mb, p - 1) if c else None)
        if r < p - 1:
            return ("B", c, mb, r + 1)
        return ("B", c + 1, mb, 0) if c < v - 1 else ("F", c, mb, r)

    moved = True
    while moved:
        moved = False
        for r in range(p):
            if pos[r] == len(order[r]):
                continue
            kind, c, mb = order[r][pos[r]]
            dep = needs(r, kind, c, mb)
            if dep is not None and dep not in done:
                continue
            start = max(free[r], done[dep] if dep is not None else 0.0)
            free[r] = done[(kind, c, mb, r)] = start + (forward if kind == "F" else backward)
            pos[r] += 1
            moved = True
    assert pos == [len(order[r]) for r in range(p)]
    return max(free)


@pytest.mark.parametrize(("p", "v"), [(4, 2), (4, 3), (8, 4), (8, 2)])
def test_interleaved_bubble_with_fewer_microbatches_than_stages(p: int, v: int) -> None:
    """The engine's bubble, in units of one rank's per-microbatch time ``T``, against the
    simulated schedule: ``(p - m)·T + (m - 1)·T/v`` for ``m <= p`` (one microbatch walks every
    chunk in turn: no gain from interleaving), ``(p - 1)·T/v`` from ``m = p`` on."""
    layers = 8 * p * v

    def bubble(vp: int, m: int) -> float:
        s = parse_scenario(
            {
                "model": {"preset": "llama2-7b", "num_layers": layers},
                "hardware": {"gpu": "h100-sxm", "num_gpus": p},
                "parallelism": {
                    "pipeline_parallel": p,
                    "virtual_pipeline": vp,
                    "global_batch_size": m,
                },
                "training": {"framework": "torchtitan"},  # torch's schedule runs m < p in one round
            }
        )
        return predict(s).breakdown.pp_bubble_s

    per_rank = bubble(1, 1) / (p - 1)  # T: without interleaving the bubble is (p-1)·T
    for m in range(1, p + 1):
        chunk = 3.0  # forward 1 + backward 2 per chunk; T = v·chunk
        simulated = (simulate_interleaved(p, v, m) - m * v * chunk) / (v * chunk)
        assert simulated == pytest.approx((p - m) + (m - 1) / v, abs=1e-12)
        assert bubble(v, m) / per_rank == pytest.approx(simulated, rel=1e-9)
    assert bubble(v, 2 * p) / per_rank == pytest.approx((p - 1) / v, rel=1e-9)


def test_one_microbatch_gains_nothing_from_interleaving() -> None:
    """The issue's case: GPT-3 175B on 16,384 GPUs with one microbatch per pipeline. Megatron-
    Core refuses the interleaved schedule there; a framework that runs it pays the full bubble
    (before the uneven stages were modelled the planner predicted 1.66 s with virtual pipeline
    24, 2.66 s without)."""
    common = {"tensor_parallel": 8, "pipeline_parallel": 4, "global_batch_size": 512}
    with pytest.raises(Exception, match="multiple of pipeline_parallel"):
        _scenario("gpt3-175b", 16384, gpu="a100-80gb", virtual_pipeline=24, **common)
    plain = predict(_scenario("gpt3-175b", 16384, "torchtitan", gpu="a100-80gb", **common))
    interleaved = predict(
        _scenario("gpt3-175b", 16384, "torchtitan", gpu="a100-80gb", virtual_pipeline=24, **common)
    )
    assert interleaved.breakdown.pp_bubble_s == pytest.approx(plain.breakdown.pp_bubble_s)
    assert interleaved.iteration_time_s >= plain.iteration_time_s


def test_zero2_reduce_scatters_every_microbatch() -> None:
    """ZeRO-2 keeps only its gradient shard, so each microbatch's gradients are reduced as
    its backward produces them (Megatron-FSDP optim_grads, DeepSpeed stage 2, FSDP
    SHARD_GRAD_OP); ZeRO-1 accumulates locally and reduces once. With one microbatch both
    pay the same; each further microbatch adds one reduction to ZeRO-2 only."""

    def dp(zero: int, m: int) -> float:
        s = _scenario("llama2-13b", 64, tensor_parallel=4, pipeline_parallel=2,
                      zero_stage=zero, global_batch_size=8 * m)  # fmt: skip
        return predict(s).breakdown.dp_comm_exposed_s

    assert dp(2, 1) == pytest.approx(dp(1, 1), rel=1e-12)
    one_more = dp(2, 2) - dp(1, 2)
    assert one_more > 0
    assert dp(2, 4) - dp(1, 4) == pytest.approx(3 * one_more, rel=1e-9)
