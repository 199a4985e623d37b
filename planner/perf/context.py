"""Context-parallel communication: the ring exchange of keys and values around attention.

Context parallelism splits the sequence over ``c`` ranks; attention runs as ring attention
(Liu et al. 2023; Megatron-Core/Transformer Engine ``cp_comm_type = "p2p"``): in each of
``c - 1`` steps every rank sends its current K,V block (``tok·(k + v)/t`` 16-bit values,
``tok = b·S/c`` local tokens; ``k``/``v`` the key and value widths: ``kv`` each under GQA, the
per-head up-projected keys and values under multi-latent attention) to the next rank while it
computes attention over the block it holds, so each step's transfer hides behind that step's
share of the attention core (``1/c`` of it). The backward sends K,V and their gradients (twice
the bytes) behind the backward attention (``FLASH_BWD_FLOP_RATIO`` times the forward's work).
Without flash attention no step overlaps. Recompute (selective or full) repeats the forward
exchange. The ring stays on NVLink when the ``c`` ranks, ``t`` apart in Megatron-Core's rank
order, share one domain.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.memory import ACTIVATION_BYTES
from planner.perf.operators import FLASH_BWD_FLOP_RATIO, LayerTimes
from planner.perf.ops import Real
from planner.specs.parallelism import Recompute

__all__ = ["ContextParallelTimes", "context_parallel_times"]

_SELECTIVE = Recompute.SELECTIVE.code


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextParallelTimes:
    """Exposed context-parallel communication of one transformer layer per microbatch,
    seconds (``layer_s``; a number, or an array of shape ``(n,)``; 0 without CP)."""

    layer_s: Real


def context_parallel_times(
    a: ScenarioArrays, link: coll.Link, layer: LayerTimes
) -> ContextParallelTimes:
    """Context-parallel communication of every scenario of ``a`` (module docstring)."""
    cp = a.context_parallel
    if not ops.any_(cp > 1):  # skipped when no scenario of the batch has CP
        return ContextParallelTimes(layer_s=a.full(0.0))
    kv_width = a.attention_k_width + a.attention_v_width
    kv_bytes = a.tokens_per_microbatch * kv_width / a.tensor_parallel * ACTIVATION_BYTES
    inside = coll.placement(cp, a.tensor_parallel, a.nvlink_domain_size) >= cp
    step_forward = coll.p2p_time_s(kv_bytes, inside=inside, link=link)
    step_backward = coll.p2p_time_s(2.0 * kv_bytes, inside=inside, link=link)
    attention_step = ops.where(a.flash_attention, layer.attention_forward_s, 0.0) / cp
    forward = (cp - 1.0) * ops.maximum(step_forward - attention_step, 0.0)
    backward = (cp - 1.0) * ops.maximum(step_backward - FLASH_BWD_FLOP_RATIO * attention_step, 0.0)
    again = ops.where(a.recompute >= _SELECTIVE, 2.0, 1.0)
    return ContextParallelTimes(layer_s=ops.where(cp > 1, forward * again + backward, 0.0))
