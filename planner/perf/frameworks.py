"""What the training framework changes in the step model: documented kernel-level properties.

The scenario names its framework (``training.framework``); the engine reads three properties of
it, each a fact about the software stack, not a tuning knob (the constants they switch on live
in ``efficiency_constants.json``):

* ``fused_attention``: the attention core runs a Hopper-native fused kernel (cuDNN fused
  attention through Transformer Engine, FlashAttention-3 class: warp-specialised, asynchronous
  ``wgmma``/TMA) on Hopper and later GPUs. Megatron-Core and NeMo use Transformer Engine's
  ``DotProductAttention``, which picks cuDNN's fused attention on sm_90 (TE 1.x docs, "Attention
  backends"). PyTorch stacks (FSDP, torchtitan's ``F.scaled_dot_product_attention``,
  llm-foundry's ``flash_attn`` 2.x, DeepSpeed) run FlashAttention-2, which is written for
  Ampere and reaches ~35 % of the H100 peak (Shah et al. 2024, FlashAttention-3, Fig. 5-7).
  On Ampere every stack runs FlashAttention-2-class kernels, so the property changes nothing.
* ``fused_elementwise``: layer norms, bias+GeLU, bias+dropout+residual, rotary embeddings and
  the cross-entropy run as fused kernels (Transformer Engine / Apex / XLA fusion); eager
  PyTorch runs one kernel per op, each re-reading and re-writing its operands from HBM, which
  multiplies the element-wise traffic (``unfused_elementwise_traffic_factor``).
* ``tp_comm_overlap``: tensor-parallel all-gathers/reduce-scatters are split into chunks and
  overlapped with the GEMMs that consume/produce them (Transformer Engine userbuffers,
  Megatron-LM ``--tp-comm-overlap``; used by the Megatron-LM 2024 H100 and NeMo 24.07 H100
  recipes; Hopper and later). Otherwise only ``tp_overlap_fraction`` is hidden.

Memory (``planner.perf.memory``):

* ``fused_cross_entropy``: the loss is Megatron's fused vocab-parallel cross-entropy, which
  keeps one fp32 copy of the logits (4 bytes per logit). Eager ``F.cross_entropy(logits.float())``
  holds the 16-bit logits, their fp32 upcast and the fp32 log-softmax it saves for the backward
  at once: 10 bytes per logit at the loss (torchtitan ``train.py``, Dec 2024).
* ``fp8_weight_cache``: under FP8 training, Transformer Engine keeps a 1-byte copy of every
  linear weight across microbatches (``is_first_microbatch``); torchao's float8 linears
  (torchtitan) cast each weight when the layer runs and keep nothing.
* ``op_level_selective_recompute``: "selective" recompute means torchtitan's op-level selective
  activation checkpointing (``selective_ac_option = "op"``: save the outputs of matmuls, except
  every second one, and of the attention kernel; recompute element-wise ops), not Megatron's
  recompute of the attention core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from planner.specs.scenario import Framework

__all__ = ["FRAMEWORK_PROFILES", "FrameworkProfile", "profile_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkProfile:
    """Kernel-level properties of a training framework (see the module docstring)."""

    fused_attention: bool
    fused_elementwise: bool
    tp_comm_overlap: bool
    fused_cross_entropy: bool
    fp8_weight_cache: bool
    op_level_selective_recompute: bool = False


_TE_STACK = FrameworkProfile(
    fused_attention=True,
    fused_elementwise=True,
    tp_comm_overlap=True,
    fused_cross_entropy=True,
    fp8_weight_cache=True,
)
_EAGER_PYTORCH = FrameworkProfile(
    fused_attention=False,
    fused_elementwise=False,
    tp_comm_overlap=False,
    fused_cross_entropy=False,
    fp8_weight_cache=True,
)
_TORCHTITAN = FrameworkProfile(
    fused_attention=False,
    fused_elementwise=False,
    tp_comm_overlap=False,
    fused_cross_entropy=False,
    fp8_weight_cache=False,
    op_level_selective_recompute=True,
)

FRAMEWORK_PROFILES: Mapping[Framework, FrameworkProfile] = MappingProxyType(
    {
        Framework.MEGATRON: _TE_STACK,
        Framework.NEMO: _TE_STACK,
        Framework.TORCHTITAN: _TORCHTITAN,
        Framework.FSDP: _EAGER_PYTORCH,
        Framework.DEEPSPEED: _EAGER_PYTORCH,
        Framework.LLM_FOUNDRY: _EAGER_PYTORCH,
        # XLA fuses element-wise ops and ships cuDNN/Pallas attention; no collective-matmul
        # overlap assumed.
        Framework.MAXTEXT: FrameworkProfile(
            fused_attention=True,
            fused_elementwise=True,
            tp_comm_overlap=False,
            fused_cross_entropy=True,
            fp8_weight_cache=False,
        ),
        Framework.OTHER: _EAGER_PYTORCH,
    }
)
"""Profile of every framework the scenario format names."""


def profile_of(framework: Framework) -> FrameworkProfile:
    """The profile of ``framework`` (eager PyTorch for anything unlisted)."""
    return FRAMEWORK_PROFILES.get(framework, _EAGER_PYTORCH)
