"""The pipeline schedule: steady state, bubble and point-to-point transfers of (interleaved) 1F1B.

Megatron-LM's 1F1B schedule and its interleaved variant (Narayanan et al. SC'21 §2.2): each of
the ``p`` stages holds ``L/p`` layers (in ``v`` chunks when interleaved); the first stage also
runs the embedding, the last the LM head and loss (both when ``p == 1``). The slowest of the two
sets the steady state, ``m`` microbatches of its per-microbatch time (compute plus the exposed
TP/CP/EP communication). The bubble is ``(p-1)/v`` times the mean stage's per-microbatch time.
Each microbatch crosses every stage boundary forward and backward with ``tok·h`` 16-bit
activations (``tok = b·S/c`` local tokens) scattered over the ``t`` tensor-parallel ranks
(Megatron's scatter-gather p2p): ``2·v·m`` transfers in the steady state plus ``2(p-1)`` in
warm-up and flush, over NVLink when the whole ``t·c·d·p`` layout fits one domain. With
overlapped p2p under the interleaved schedule (Megatron-Core ``overlap_p2p_comm``,
``planner.perf.frameworks``) a steady-state transfer shows only where it exceeds one chunk's
forward, plus its launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.context import ContextParallelTimes
from planner.perf.expert import ExpertParallelTimes
from planner.perf.memory import ACTIVATION_BYTES
from planner.perf.operators import LayerTimes, OperatorTimes
from planner.perf.ops import Real
from planner.perf.tensor import TensorParallelTimes

__all__ = ["PipelineSchedule", "pipeline_schedule"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineSchedule:
    """Seconds per iteration on the critical path of the slowest stage (numbers, or arrays of
    shape ``(n,)``): ``compute_s``, exposed ``tp_comm_s``, ``cp_comm_s``, ``ep_comm_s``, the
    ``bubble_s`` and the point-to-point ``p2p_s``; ``slowest_stage_s`` is that stage's time per
    microbatch (compute and exposed communication), the window ZeRO-3 hides its collectives in.
    """

    compute_s: Real
    tp_comm_s: Real
    cp_comm_s: Real
    ep_comm_s: Real
    bubble_s: Real
    p2p_s: Real
    slowest_stage_s: Real


def pipeline_schedule(
    a: ScenarioArrays,
    link: coll.Link,
    *,
    operators: OperatorTimes,
    layer: LayerTimes,
    tensor: TensorParallelTimes,
    context: ContextParallelTimes,
    expert: ExpertParallelTimes,
) -> PipelineSchedule:
    """The schedule of every scenario of ``a`` (module docstring)."""
    layers = a.num_layers / a.pipeline_parallel
    compute_mid = layers * (layer.total_s)  # the stage's transformer layers, per microbatch
    tp_mid, cp_mid, ep_mid = (
        layers * tensor.layer_s,
        layers * context.layer_s,
        layers * expert.layer_s,
    )
    single = a.pipeline_parallel == 1
    embedding, lm_head = operators.embedding_s, operators.lm_head_s
    compute_first = compute_mid + embedding + ops.where(single, lm_head, 0.0)
    compute_last = compute_mid + lm_head + ops.where(single, embedding, 0.0)
    tp_first = tp_mid + tensor.embedding_s + ops.where(single, tensor.lm_head_s, 0.0)
    tp_last = tp_mid + tensor.lm_head_s + ops.where(single, tensor.embedding_s, 0.0)
    # the multi-token-prediction layers run on the last stage (their compute is in lm_head_s)
    tp_last = tp_last + a.mtp_num_layers * tensor.layer_s
    ep_last = ep_mid + a.num_mtp_moe_layers * expert.moe_layer_s
    first_total = compute_first + tp_first + cp_mid + ep_mid
    last_total = compute_last + tp_last + cp_mid + ep_last
    first_slow = first_total >= last_total
    m = a.num_microbatches
    bubble = p2p = a.full(0.0)
    if not ops.all_(single):  # skipped when no scenario of the batch pipelines
        edges = (embedding + lm_head + tensor.embedding_s + tensor.lm_head_s) / a.pipeline_parallel
        mean_stage = (compute_mid + tp_mid + cp_mid + ep_mid) + edges
        bubble = ops.where(
            single, 0.0, (a.pipeline_parallel - 1.0) / a.virtual_pipeline * mean_stage
        )
        p2p = ops.where(single, 0.0, _p2p_s(a, link, layer))
    return PipelineSchedule(
        compute_s=m * ops.where(first_slow, compute_first, compute_last),
        tp_comm_s=m * ops.where(first_slow, tp_first, tp_last),
        cp_comm_s=m * cp_mid,
        ep_comm_s=m * ops.where(first_slow, ep_mid, ep_last),
        bubble_s=bubble,
        p2p_s=p2p,
        slowest_stage_s=ops.maximum(first_total, last_total),
    )


def _p2p_s(a: ScenarioArrays, link: coll.Link, layer: LayerTimes) -> Real:
    """Exposed point-to-point seconds per iteration (module docstring)."""
    tp, pp, vp = a.tensor_parallel, a.pipeline_parallel, a.virtual_pipeline
    inside = tp * a.context_parallel * a.data_parallel * pp <= a.nvlink_domain_size
    size = a.tokens_per_microbatch * a.hidden_size * ACTIVATION_BYTES / tp
    transfer = coll.p2p_time_s(size, inside=inside, link=link)
    chunk_forward = a.num_layers / pp / vp * layer.forward_s
    overlapped = ops.maximum(transfer - chunk_forward, 0.0) + link.base_latency_s
    steady = ops.where(a.pp_comm_overlap & (vp > 1), overlapped, transfer)
    return 2.0 * vp * a.num_microbatches * steady + 2.0 * (pp - 1.0) * transfer
