"""The pipeline schedule: steady state, bubble and point-to-point transfers of (interleaved) 1F1B.

Megatron-LM's 1F1B schedule and its interleaved variant (Narayanan et al. SC'21 §2.2): the
``p`` pipeline ranks hold the transformer layers as the framework splits them
(``planner.specs.pipeline_split``: ``L/p`` each for an even split; uneven first/last stages,
an explicit layout, a framework's default split otherwise), in ``v`` chunks when interleaved;
the first rank also runs the embedding, the last the LM head and loss (both when ``p == 1``).
Each rank's per-microbatch time is its layers' compute plus their exposed TP/CP/EP
communication, plus its edge operators; the slowest of rank 0, the busiest middle rank and
rank ``p-1`` sets the steady state, ``m`` microbatches of its time.

The bubble uses the mean rank time ``T`` (the whole model's per-microbatch time over ``p``;
an uneven split moves layers between ranks but not this mean): with ``m >= p`` microbatches,
``(p-1)·T/v`` (SC'21 §2.2.1-2.2.2). With ``m < p`` (runs where the framework allows it,
e.g. torch's ``ScheduleInterleaved1F1B`` in one round) the interleaved schedule cannot fill
the pipeline: Megatron-Core's schedule table (``get_schedule_table`` in
``pipeline_parallel/schedules.py``: all ``m`` microbatches of a group run chunk 0, then chunk
1, ...) has microbatch 0 walk all ``v·p`` chunks in turn, each rank idle until it returns, so
the forward ends after ``(v·p + m - 1)`` chunk times and the backward likewise: bubble
``(p - m)·T + (m - 1)·T/v`` (``(p-1)·T`` for ``m = 1``, as without interleaving; the
non-interleaved 1F1B bubble ``(p-1)·T`` holds for every ``m``).

A framework that runs the schedule more than once per iteration pays each run's fill and
drain: ``r = pipeline_schedule_runs`` runs of ``m/r`` microbatches each
(``parallelism.pipeline_batch_size``; NeMo Automodel calls ``schedule.step`` once per
gradient-accumulation step, NVIDIA-NeMo/Automodel ``nemo_automodel/recipes/llm/train_ft.py``
@ ``2c236e081``, ``_run_train_optim_step`` → ``_forward_backward_step``) have ``r`` bubbles of
``m/r`` microbatches and ``r`` warm-ups and flushes of point-to-point transfers; the steady
state still runs all ``m`` microbatches. Megatron-LM runs one schedule over all ``m``
(``r = 1``).

Each microbatch crosses every stage boundary forward and backward with ``tok·h`` 16-bit
activations (``tok = b·S/c`` local tokens) scattered over the ``t`` tensor-parallel ranks
(Megatron's scatter-gather p2p): ``2·v·m`` transfers in the steady state plus ``2(p-1)`` in
warm-up and flush, over NVLink when the whole ``t·c·d·p`` layout fits one domain. With
overlapped p2p under the interleaved schedule (Megatron-Core ``overlap_p2p_comm``,
``planner.perf.frameworks``) a steady-state transfer shows only where it exceeds one chunk's
forward, plus its launch.

Why every transfer sits on the critical path, and in what order (Megatron-Core
``pipeline_parallel/p2p_communication.py``): without overlap, ``_communicate`` posts each
step's sends and receives in one ``batch_isend_irecv`` group (the send to the next stage and
the receive from it run concurrently, full duplex: one transfer time per exchange), waits for
them, and with ``batch_p2p_sync`` (the default) calls ``torch.cuda.synchronize()``; the 1F1B
warm-up sends each of the first ``p-1`` microbatches through every stage before the first
backward, and the flush returns them, ``2(p-1)`` transfers no steady state hides (Narayanan
et al. SC'21 §2.2). With ``overlap_p2p_comm`` (no batching) ``_p2p_ops`` orders the calls by
rank parity, even ranks sending before receiving and odd ranks the reverse, so that two
neighbours never both wait on a receive; sends and receives to the same neighbour share one
NCCL stream and follow each other, which is what the overlapped chunk's compute must cover.
Every transfer pays the ``Simple`` protocol's base and hop latency (``collectives.p2p_time_s``):
with tens of stages the warm-up and flush add ``2(p-1)`` of them to the bubble.
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
    microbatch (compute and exposed communication), the window ZeRO-3 hides its collectives in;
    ``moe_routed_s`` the part of ``compute_s + bubble_s`` the routed experts take
    (``LayerTimes.moe_routed_s``: the slowest stage's MoE layers, its multi-token-prediction
    MoE layers on the last stage, and their share of the mean stage in the bubble).
    """

    compute_s: Real
    tp_comm_s: Real
    cp_comm_s: Real
    ep_comm_s: Real
    bubble_s: Real
    p2p_s: Real
    slowest_stage_s: Real
    moe_routed_s: Real


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
    layers = a.num_layers / a.pipeline_parallel  # the mean rank's transformer layers
    single = a.pipeline_parallel == 1
    embedding, lm_head = operators.embedding_s, operators.lm_head_s
    stages = {
        "first": _Stage(a.first_stage_layers, layer, tensor, context, expert),
        "last": _Stage(a.last_stage_layers, layer, tensor, context, expert),
        "middle": _Stage(a.middle_stage_layers, layer, tensor, context, expert),
    }
    first, last, middle = stages["first"], stages["last"], stages["middle"]
    compute_first = first.compute + embedding + ops.where(single, lm_head, 0.0)
    compute_last = last.compute + lm_head + ops.where(single, embedding, 0.0)
    tp_first = first.tp + tensor.embedding_s + ops.where(single, tensor.lm_head_s, 0.0)
    tp_last = last.tp + tensor.lm_head_s + ops.where(single, tensor.embedding_s, 0.0)
    # the multi-token-prediction layers run on the last stage (their compute is in lm_head_s)
    tp_last = tp_last + a.mtp_num_layers * tensor.layer_s
    ep_last = last.ep + a.num_mtp_moe_layers * expert.moe_layer_s
    first_total = compute_first + tp_first + first.cp + first.ep
    last_total = compute_last + tp_last + last.cp + ep_last
    middle_total = middle.compute + middle.tp + middle.cp + middle.ep
    first_slow = first_total >= last_total
    middle_slow = middle_total > ops.maximum(first_total, last_total)

    def slowest(on_first: Real, on_last: Real, on_middle: Real) -> Real:
        return ops.where(middle_slow, on_middle, ops.where(first_slow, on_first, on_last))

    m = a.num_microbatches
    # the routed experts' part of the slowest stage (the MTP layers are in lm_head_s)
    mtp_routed = a.num_mtp_moe_layers * layer.moe_layer_routed_s
    first_routed = first.routed + ops.where(single, mtp_routed, 0.0)
    routed = m * slowest(first_routed, last.routed + mtp_routed, middle.routed)
    bubble = p2p = a.full(0.0)
    if not ops.all_(single):  # skipped when no scenario of the batch pipelines
        edges = (embedding + lm_head + tensor.embedding_s + tensor.lm_head_s) / a.pipeline_parallel
        mean_stage = (
            layers * layer.total_s
            + layers * tensor.layer_s
            + layers * context.layer_s
            + layers * expert.layer_s
        ) + edges
        bubble = ops.where(single, 0.0, a.pipeline_schedule_runs * _bubble_s(a, mean_stage))
        # the bubble is linear in the mean stage: the routed experts' part of it
        routed_stage = layers * layer.moe_routed_s + mtp_routed / a.pipeline_parallel
        routed_bubble = a.pipeline_schedule_runs * _bubble_s(a, routed_stage)
        routed = routed + ops.where(single, 0.0, routed_bubble)
        p2p = ops.where(single, 0.0, _p2p_s(a, link, layer))
    return PipelineSchedule(
        compute_s=m * slowest(compute_first, compute_last, middle.compute),
        tp_comm_s=m * slowest(tp_first, tp_last, middle.tp),
        cp_comm_s=m * slowest(first.cp, last.cp, middle.cp),
        ep_comm_s=m * slowest(first.ep, ep_last, middle.ep),
        bubble_s=bubble,
        p2p_s=p2p,
        slowest_stage_s=ops.maximum(ops.maximum(first_total, last_total), middle_total),
        moe_routed_s=routed,
    )


class _Stage:
    """Per-microbatch seconds of one rank's transformer layers: compute and exposed TP, CP
    and EP communication, and the routed experts' part of the compute (``layers`` times the
    per-layer terms)."""

    __slots__ = ("compute", "cp", "ep", "routed", "tp")

    def __init__(
        self,
        layers: Real,
        layer: LayerTimes,
        tensor: TensorParallelTimes,
        context: ContextParallelTimes,
        expert: ExpertParallelTimes,
    ) -> None:
        self.compute = layers * layer.total_s
        self.tp = layers * tensor.layer_s
        self.cp = layers * context.layer_s
        self.ep = layers * expert.layer_s
        self.routed = layers * layer.moe_routed_s


def _bubble_s(a: ScenarioArrays, mean_stage: Real) -> Real:
    """Pipeline bubble seconds of one run of the schedule from the mean rank's
    per-microbatch time (module docstring): ``(p-1)·T/v``, or ``(p-m)·T + (m-1)·T/v`` when an
    interleaved schedule has fewer microbatches ``m`` in the run than ranks."""
    p, v = a.pipeline_parallel, a.virtual_pipeline
    m = a.num_microbatches / a.pipeline_schedule_runs
    full = (p - 1.0) / v * mean_stage
    if ops.all_((m >= p) | (v == 1)):  # the pipeline fills: SC'21's bubble
        return full
    starved = (p - m) * mean_stage + (m - 1.0) / v * mean_stage
    out: Real = ops.where((m >= p) | (v == 1), full, starved)
    return out


def _p2p_s(a: ScenarioArrays, link: coll.Link, layer: LayerTimes) -> Real:
    """Exposed point-to-point seconds per iteration (module docstring)."""
    tp, pp, vp = a.tensor_parallel, a.pipeline_parallel, a.virtual_pipeline
    inside = tp * a.context_parallel * a.data_parallel * pp <= a.nvlink_domain_size
    size = a.tokens_per_microbatch * a.hidden_size * ACTIVATION_BYTES / tp
    transfer = coll.p2p_time_s(size, inside=inside, link=link)
    chunk_forward = a.num_layers / pp / vp * layer.forward_s
    overlapped = ops.maximum(transfer - chunk_forward, 0.0) + link.base_latency_s
    steady = ops.where(a.pp_comm_overlap & (vp > 1), overlapped, transfer)
    warm_up_and_flush = a.pipeline_schedule_runs * 2.0 * (pp - 1.0) * transfer
    return 2.0 * vp * a.num_microbatches * steady + warm_up_and_flush
