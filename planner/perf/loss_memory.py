"""Memory the loss holds on the stage that computes it (``planner.perf.memory`` adds it to that
stage's peak).

The stage computing the loss peaks in the loss's backward, before any layer is re-run (so the
loss and a full-recompute working set are never held together): it holds the final norm's
input and the LM head's input (``2·tok·h/t`` each with SP; a DTensor ``ColwiseParallel`` head
saves its all-gathered input, ``2·tok·h``) and the loss buffers, bytes per logit ``tok·V/t``:
a fused loss 4 (Megatron's fused vocab-parallel cross-entropy works in place, flash-attn's keeps
the 16-bit logits and writes the 16-bit gradient); eager ``F.cross_entropy(logits.float())``
12 (its backward holds the saved fp32 log-softmax, the dense fp32 ``nll_loss`` gradient and
``_log_softmax_backward_data``'s fp32 output at once, more than the 10 of its forward: 16-bit
logits, fp32 upcast, fp32 log-softmax), 6 without the upcast (the same three tensors in 16
bits: NeMo Automodel's ``MaskedCrossEntropy(fp32_upcast=False)``); 16 with tensor
parallelism, where eager stacks compute the loss with DTensor ``loss_parallel``
(``torch/distributed/tensor/parallel/loss.py``: the backward ``(grad_input + torch.exp(x)) *
grad_output`` holds four fp32 logit-sized tensors). A loss run under torch.compile
(``training.compiled_loss``) holds ``COMPILED_LOSS_PEAK_BYTES_PER_LOGIT``.
"""

from __future__ import annotations

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.ops import Real

__all__ = [
    "ACTIVATION_BYTES",
    "COMPILED_LOSS_BYTES_PER_LOGIT",
    "COMPILED_LOSS_PEAK_BYTES_PER_LOGIT",
    "EAGER_16BIT_LOSS_PEAK_BYTES_PER_LOGIT",
    "EAGER_LOSS_PEAK_BYTES_PER_LOGIT",
    "FUSED_LOSS_BYTES_PER_LOGIT",
    "LOSS_PARALLEL_PEAK_BYTES_PER_LOGIT",
    "loss_bytes_per_logit_arr",
    "loss_peak_bytes_arr",
]

ACTIVATION_BYTES = 2.0
"""16-bit activations and activation gradients, kept and sent between GPUs (also under FP8
training: Transformer Engine casts only the GEMM inputs)."""
FUSED_LOSS_BYTES_PER_LOGIT = 4.0
"""A fused loss (``fused_cross_entropy`` in ``planner.perf.frameworks``): Megatron's fused
vocab-parallel cross-entropy keeps one fp32 copy of the logits and works in place."""
EAGER_LOSS_PEAK_BYTES_PER_LOGIT = 12.0
"""Eager ``F.cross_entropy(logits.float())``, peak in its backward: saved fp32 log-softmax,
dense fp32 ``nll_loss`` gradient and the fp32 ``_log_softmax_backward_data`` output."""
EAGER_16BIT_LOSS_PEAK_BYTES_PER_LOGIT = 6.0
"""Eager ``F.cross_entropy`` on the 16-bit logits (no upcast), peak in its backward: saved
16-bit log-softmax, dense 16-bit ``nll_loss`` gradient and the 16-bit
``_log_softmax_backward_data`` output."""
COMPILED_LOSS_PEAK_BYTES_PER_LOGIT = 4.0
"""``F.cross_entropy(logits.float())`` under torch.compile, peak in its backward: Inductor's
decompositions turn the log-softmax into max, subtract, exp, sum and log, and the min-cut
partitioner keeps for the backward the 16-bit logits and two fp32 values per token (the max
and the log of the sum), not an fp32 log-softmax; the backward is one point-wise kernel that
writes the 16-bit gradient: 2 + 2 bytes per logit. Traced on PyTorch 2.13 (``aot_function``
with ``select_decomp_table()`` and ``min_cut_rematerialization_partition(compiler="inductor")``
on torchtitan's ``cross_entropy_loss``, ``torchtitan/components/loss.py`` @ ``820504e2``)."""
COMPILED_LOSS_BYTES_PER_LOGIT = 8.0
"""HBM bytes per logit a compiled loss moves (``loss_bytes_per_logit`` of an eager one): the
forward's reductions read the 16-bit logits twice (the max, then the sum of exponentials),
the backward's point-wise kernel reads them once and writes the 16-bit gradient."""
LOSS_PARALLEL_PEAK_BYTES_PER_LOGIT = 16.0
"""DTensor ``loss_parallel`` backward ``(grad_input + torch.exp(x)) * grad_output``: saved fp32
log-softmax, ``grad_input``, the fp32 sum and the fp32 product at once."""


def loss_bytes_per_logit_arr(a: ScenarioArrays) -> Real:
    """Peak bytes per logit the loss holds (forward or backward; module docstring).

    A fused loss holds ``FUSED_LOSS_BYTES_PER_LOGIT``; the eager ``F.cross_entropy`` peaks in
    its backward at ``EAGER_LOSS_PEAK_BYTES_PER_LOGIT``, or ``LOSS_PARALLEL_PEAK_BYTES_PER_LOGIT``
    under tensor parallelism (DTensor ``loss_parallel``); without the fp32 upcast
    (``loss_upcast_fp32`` false) at ``EAGER_16BIT_LOSS_PEAK_BYTES_PER_LOGIT``; compiled
    (``compiled_loss``) at ``COMPILED_LOSS_PEAK_BYTES_PER_LOGIT``."""
    upcast = ops.where(
        a.tensor_parallel > 1, LOSS_PARALLEL_PEAK_BYTES_PER_LOGIT, EAGER_LOSS_PEAK_BYTES_PER_LOGIT
    )
    eager = ops.where(a.loss_upcast_fp32, upcast, EAGER_16BIT_LOSS_PEAK_BYTES_PER_LOGIT)
    eager = ops.where(a.compiled_loss, COMPILED_LOSS_PEAK_BYTES_PER_LOGIT, eager)
    out: Real = ops.where(a.fused_cross_entropy, FUSED_LOSS_BYTES_PER_LOGIT, eager)
    return out


def loss_peak_bytes_arr(a: ScenarioArrays) -> Real:
    """Bytes the stage computing the loss holds at the loss on top of the layers' activations:
    the loss buffers (``loss_bytes_per_logit_arr · tok·V/t``), the final norm's input and the
    LM head's saved input (all-gathered under a DTensor head: eager loss with ``t > 1``)."""
    tok = a.tokens_per_microbatch
    t_sp = ops.where(a.sequence_parallel, a.tensor_parallel, 1.0)
    eager_tp = ops.logical_not(a.fused_cross_entropy) & (a.tensor_parallel > 1)
    head_input = ACTIVATION_BYTES * tok * a.hidden_size / ops.where(eager_tp, 1.0, t_sp)
    norm_input = ACTIVATION_BYTES * tok * a.hidden_size / t_sp
    out: Real = (
        loss_bytes_per_logit_arr(a) * tok * a.vocab_size / a.tensor_parallel
        + head_input
        + norm_input
    )
    return out
