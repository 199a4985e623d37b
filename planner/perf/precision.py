"""Low-precision training recipes: which GEMMs run in which format, what quantising costs.

Transformer Engine recipes (TE "Using FP8 and FP4 with Transformer Engine"; Megatron-LM
``--fp8-recipe``/``--fp4-recipe``), by ``Fp8Recipe.code`` (0: 16-bit training):

* ``delayed`` (``DelayedScaling``): one scale per tensor from an amax history; E4M3 forward,
  E5M2 gradients (HYBRID). Quantising an operand is one fused cast-transpose kernel: read 16
  bits, write the FP8 copy and, because Hopper's FP8 tensor cores take only the TN layout, a
  transposed FP8 copy for the GEMM that uses it transposed (X and dY for the weight gradient):
  4 bytes per element.
* ``tensorwise`` (``Float8CurrentScaling``; torchao's default float8): the scale comes from the
  current tensor's amax, one more read pass: 6 bytes per element.

The transposed FP8 copy is Hopper's: Transformer Engine makes one only where the GPU's FP8
GEMMs take the TN layout alone. ``Float8Quantizer`` (delayed) and
``Float8CurrentScalingQuantizer`` allocate the transpose only when
``columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()`` and let the one row-wise copy
serve both usages otherwise; ``nvte_is_non_tn_fp8_gemm_supported`` is true for compute
capability 10.0-11.x and >= 13.0, the data-centre Blackwell parts (NVIDIA/TransformerEngine
``transformer_engine/pytorch/csrc/quantizer.cpp`` ``create_tensor`` and
``transformer_engine/common/transformer_engine.cpp`` @ ``v2.7`` ``fedd9ddc739a`` and ``v2.9``
``70f536662ae1``, the TE of NeMo 25.09 and 25.11; ``pytorch/utils.py``
``is_non_tn_fp8_gemm_supported`` the same). On the catalog's ``blackwell`` GPUs (B200, B300,
GB200, GB300: sm_100 / sm_103) per-tensor casts therefore write one byte less per element
(``QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT``): delayed 3, current scaling 5. The block-scaled
recipes keep both copies on every GPU: their column-wise copy is a different quantisation, not
a transpose (``MXFP8Quantizer::create_tensor`` allocates column-wise data and scales whenever
``columnwise_usage``, whatever the GPU, same tag).
* ``blockwise`` (``Float8BlockScaling``; DeepSeek-AI 2024, DeepSeek-V3 §3.3.1: 1x128 tiles of
  activations, 128x128 blocks of weights): the amax is per block within the same pass, plus
  the fp32 scales (4 bytes per 128): 4.0625 bytes per element; the GEMM promotes its partial
  sums with the block scales on the CUDA cores every 128 of K (DeepSeek-V3 §3.3.2), which costs
  ``BLOCKWISE_GEMM_RELATIVE_EFFICIENCY`` of the FP8 GEMM's throughput on Hopper.
* ``mxfp8`` (``MXFP8BlockScaling``; OCP Microscaling Formats v1.0: 32-element blocks with an
  E8M0 scale): Blackwell's tensor cores apply the block scales themselves, so the GEMM runs at
  the FP8 rate; the row-wise and column-wise quantisations are separate copies (the blocks run
  along different dimensions): 4.0625 bytes per element, and 2 bytes per cached weight.
* ``nvfp4`` (``NVFP4BlockScaling``; NVIDIA 2025, "Pretraining Large Language Models with
  NVFP4", arXiv 2509.25149: 16-element blocks with E4M3 scales under a per-tensor fp32 scale,
  a random Hadamard transform on the weight-gradient operands, stochastic rounding of
  gradients): a tensor amax pass (2), the read (2) and two 4-bit copies with their scales
  (1.125): 5.125 bytes per element; 1.125 bytes per cached weight.

In every recipe the transformer's linear layers run all three GEMMs (forward, data gradient,
weight gradient) in the recipe's format; the attention core, the router and the LM head stay
16-bit (TE quantises ``Linear`` modules only; Megatron builds the output layer and the router
outside them). Saved GEMM inputs are kept in the recipe's format (``SAVED_INPUT_BYTES``).

Where a Transformer Engine ``LayerNormLinear`` computes the norm in front of the GEMM (stacks
whose profile says ``fp8_norm_fused_cast``, ``planner.perf.frameworks``), the norm kernel
quantises its own output (``NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT``), by the quantizer's type
(NVIDIA/TransformerEngine ``transformer_engine/pytorch/csrc/extensions/normalization.cpp``
``layernorm_fwd``/``rmsnorm_fwd`` @ ``d0067d0da6cb``, ``Impl``):

* ``delayed``: ``FULLY_FUSED``, the scale is known before the tensor exists, so the norm
  writes the FP8 copy instead of its 16-bit output (one byte less per element) and the
  backward makes the transposed copy the weight gradient needs with ``fp8_transpose`` (read
  and write one byte): 1 byte per element. TE 1.x the same (``_apply_normalization`` with
  ``fp8_out``, ``layernorm_linear.py`` ``tex.fp8_transpose(ln_out_total)`` @ ``v1.8``,
  ``3ec998e96c82``).
* ``tensorwise``: ``FUSED_NORM_AMAX_FP8``, the norm writes its 16-bit output and the amax in
  one pass, then the quantiser casts it (read 2, write the FP8 copy and its transpose): the
  separate amax read of an unfused cast is saved, 4 bytes per element.

Without the transposed copy (Blackwell, above) delayed scaling's fused norm adds nothing
beyond its own output (the byte it saves by writing FP8 instead of 16 bits is not taken off
the norm's traffic: 0) and current scaling's cast writes one copy: 3 bytes per element.
* ``blockwise``, ``mxfp8``: ``UNFUSED`` (the norm in 16 bits, then the recipe's cast), as
  without the fusion. ``nvfp4``: taken as unfused (its fused-amax path runs only without the
  random Hadamard transform).

Before every MXFP8 or NVFP4 GEMM Transformer Engine rearranges each operand's block scales into
the interleaved layout the block-scaled tensor cores read (``swizzle_scaling_factors``: a new
buffer and one ``nvte_swizzle_scaling_factors`` kernel per operand, called for A and B in
``te_general_gemm``; the grouped GEMM swizzles each operand list in one kernel,
``multi_tensor_swizzle_scaling_factors``; NVIDIA/TransformerEngine
``transformer_engine/pytorch/csrc/util.cpp`` and ``csrc/extensions/gemm.cpp`` @ ``v2.7``
``fedd9ddc739a`` and ``v2.9`` ``70f536662ae1``). The quantisers write the scales in row order
and nothing caches the swizzled copy, so each GEMM call, the cached weight's included, pays
two more kernels, each reading and writing its operand's scales
(``SCALE_SWIZZLE_BYTES_PER_ELEMENT`` per operand element each way: MXFP8 one E8M0 byte per 32,
NVFP4 one E4M3 byte per 16). The per-tensor recipes' scale is one number the GEMM takes as it
is (``swizzle_scaling_factors`` returns without a kernel for every other scaling mode), and
``blockwise`` on Hopper passes its fp32 block scales unchanged.
"""

from __future__ import annotations

import numpy as np

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import ARCHITECTURES
from planner.perf.ops import Flag, Real

__all__ = [
    "BLOCKWISE_GEMM_RELATIVE_EFFICIENCY",
    "NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT",
    "NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT",
    "QUANTIZE_BYTES_PER_ELEMENT",
    "QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT",
    "SAVED_INPUT_BYTES",
    "SCALE_SWIZZLE_BYTES_PER_ELEMENT",
    "WEIGHT_COPY_BYTES",
    "any_layout_fp8_gemms",
    "gemm_relative_efficiency",
    "norm_output_quantize_bytes",
    "quantize_bytes",
    "saved_input_bytes",
    "scale_swizzle_bytes",
    "weight_copy_bytes",
]

BLOCKWISE_GEMM_RELATIVE_EFFICIENCY = 0.9
"""Blockwise-scaled FP8 GEMM throughput relative to a per-tensor-scaled one on Hopper:
DeepGEMM (DeepSeek-AI 2025) reaches 1,300-1,550 of the H800's 1,979 FP8 TFLOP/s on large
training shapes with the block scales promoted on the CUDA cores, ~10 % below cuBLAS
per-tensor FP8 on the same shapes (DeepGEMM README, "Performance")."""

QUANTIZE_BYTES_PER_ELEMENT = (0.0, 4.0, 6.0, 4.0625, 4.0625, 5.125)
"""HBM bytes to quantise one element of a GEMM operand, by recipe code, on a GPU whose FP8
GEMMs take only the TN layout (Hopper: the per-tensor recipes write a transposed copy; module
docstring)."""
QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT = (0.0, 3.0, 5.0, 4.0625, 4.0625, 5.125)
"""``QUANTIZE_BYTES_PER_ELEMENT`` on a GPU whose FP8 GEMMs take any layout (Blackwell): the
per-tensor recipes write one FP8 copy (module docstring)."""
NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT = (0.0, 1.0, 4.0, 4.0625, 4.0625, 5.125)
"""HBM bytes to quantise one element of a norm's output that a TE ``LayerNormLinear`` feeds to
its GEMM, by recipe code, beyond the norm's own 16-bit traffic, TN-only GPUs (module
docstring)."""
NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT = (0.0, 0.0, 3.0, 4.0625, 4.0625, 5.125)
"""``NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT`` on a GPU whose FP8 GEMMs take any layout."""
WEIGHT_COPY_BYTES = (0.0, 1.0, 1.0, 1.03125, 2.0625, 1.125)
"""Bytes per weight of the quantised copy TE caches across microbatches (FP8 recipes: the
row-wise copy, the transpose made in the backward; MXFP8/NVFP4: both directions)."""
SAVED_INPUT_BYTES = (2.0, 1.0, 1.0, 1.03125, 1.03125, 0.5625)
"""Bytes per element of a GEMM input saved for the backward, by recipe code."""
SCALE_SWIZZLE_BYTES_PER_ELEMENT = (0.0, 0.0, 0.0, 0.0, 1.0 / 32.0, 1.0 / 16.0)
"""Block-scale bytes per GEMM-operand element that Transformer Engine swizzles (reads, then
writes again) in a kernel of its own before each GEMM, by recipe code; 0: no swizzle kernel
(module docstring)."""
_GEMM_RELATIVE = (1.0, 1.0, 1.0, BLOCKWISE_GEMM_RELATIVE_EFFICIENCY, 1.0, 1.0)

_QUANTIZE = np.array(QUANTIZE_BYTES_PER_ELEMENT)
_QUANTIZE_ANY = np.array(QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT)
_NORM_QUANTIZE = np.array(NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT)
_NORM_QUANTIZE_ANY = np.array(NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT)
_BLACKWELL = ARCHITECTURES.index("blackwell")
_WEIGHT = np.array(WEIGHT_COPY_BYTES)
_SAVED = np.array(SAVED_INPUT_BYTES)
_SWIZZLE = np.array(SCALE_SWIZZLE_BYTES_PER_ELEMENT)
_RELATIVE = np.array(_GEMM_RELATIVE)


def any_layout_fp8_gemms(a: ScenarioArrays) -> Flag:
    """Whether each scenario's GPU runs FP8 GEMMs in any layout, so that Transformer Engine
    makes no transposed FP8 copy (``nvte_is_non_tn_fp8_gemm_supported``: the catalog's
    ``blackwell`` parts; module docstring)."""
    return a.device.architecture == _BLACKWELL


def quantize_bytes(a: ScenarioArrays) -> Real:
    """HBM bytes per quantised GEMM-operand element of each scenario, by recipe and by whether
    the GPU's FP8 GEMMs take any layout (module docstring); 0 in 16-bit."""
    any_layout = any_layout_fp8_gemms(a)
    return ops.where(
        any_layout, ops.take(_QUANTIZE_ANY, a.fp8_recipe), ops.take(_QUANTIZE, a.fp8_recipe)
    )


def norm_output_quantize_bytes(a: ScenarioArrays) -> Real:
    """HBM bytes per quantised element of a GEMM operand that a norm produces (the QKV and
    dense FC1 inputs): the norm-fused cast where the stack fuses it (``fp8_norm_fused_cast``),
    else ``quantize_bytes``; by GPU as ``quantize_bytes``; 0 in 16-bit."""
    any_layout = any_layout_fp8_gemms(a)
    fused = ops.where(
        any_layout,
        ops.take(_NORM_QUANTIZE_ANY, a.fp8_recipe),
        ops.take(_NORM_QUANTIZE, a.fp8_recipe),
    )
    return ops.where(a.fp8_norm_fused_cast, fused, quantize_bytes(a))


def weight_copy_bytes(a: ScenarioArrays) -> Real:
    """Bytes per cached quantised weight of each scenario (0 in 16-bit)."""
    return ops.take(_WEIGHT, a.fp8_recipe)


def saved_input_bytes(a: ScenarioArrays) -> Real:
    """Bytes per saved GEMM-input element of each scenario (2 in 16-bit)."""
    return ops.take(_SAVED, a.fp8_recipe)


def gemm_relative_efficiency(a: ScenarioArrays) -> Real:
    """Low-precision GEMM throughput relative to per-tensor FP8 scaling (blockwise: less)."""
    return ops.take(_RELATIVE, a.fp8_recipe)


def scale_swizzle_bytes(a: ScenarioArrays) -> Real:
    """Block-scale bytes per GEMM-operand element that each scenario's recipe swizzles in a
    kernel of its own before every low-precision GEMM (read once, written once: MXFP8 1/32,
    NVFP4 1/16; module docstring); 0 where no swizzle kernel runs."""
    return ops.take(_SWIZZLE, a.fp8_recipe)
