"""The optimizer step: Adam over the parameters a GPU owns, a memory-bound pass.

Adam (Kingma & Ba 2015) with fp32 master weights, as Megatron-LM and the PyTorch stacks run it
under mixed precision: per owned parameter the step reads the fp32 master weight, both moments
and the gradient, makes a gradient-norm pass, and writes the master weight, both moments and the
16-bit copy: ``ADAM_HBM_BYTES_PER_PARAM`` bytes of HBM traffic, less what a stack keeps
smaller (``FrameworkProfile.master_weight_bytes``, ``adam_moment_bytes``: NeMo Automodel's
``torch.optim.Adam`` updates the bf16 parameter with bf16 moments, no master: the in-place
update below, 20 bytes).
A scenario stating the optimizer's dtypes (``parallelism.main_params_dtype``, ``exp_avg_dtype``,
``exp_avg_sq_dtype``) moves the master and the moments at their bytes (an fp16 master, FP8
moments: 1 byte each, as Transformer Engine ``FusedAdam`` stores them); with no master
(``main_params_dtype: bf16``) the step updates the 16-bit weights in place,
``UPDATE_FIXED_BYTES_PER_PARAM`` plus twice the moments' bytes (20 with bf16 moments).
The gradient is read (by the norm pass and by Adam) at 4 bytes unless the stack reads a
16-bit reduced gradient as it is (``ScenarioArrays.optimizer_grad_bytes``: NeMo's distributed
Adam, Megatron-Core's precision-aware optimizer, and every optimizer without a master, which
updates the weights from their own gradients), each read then taking the gradient's bytes;
Megatron-Core's other optimizers first cast a 16-bit gradient (shard) to an fp32 copy
(``optimizer_grad_cast_bytes``: read it, write 4 bytes; ``FrameworkProfile.optimizer_grad_read``
cites both).
A GPU owns all its parameters at ZeRO-0 and ``1/(d·c)`` of its dense and
``1/max(d·c/e, 1)`` of its expert parameters when the optimizer is sharded (ZeRO >= 1;
Megatron's distributed optimizer, Rajbhandari et al. 2020). Low-precision training adds the
cast of every local weight to its quantised copy (read 16-bit, write the recipe's copy,
``planner.perf.precision.weight_copy_bytes``: 1 byte under FP8 recipes,
``FP8_CAST_BYTES_PER_PARAM`` = 3 in all). With FP8 parameters (``parallelism.fp8_param_gather``)
no 16-bit copy exists: each rank casts its fp32 master shard into its shard of the FP8
parameter (Megatron-Core ``quantize_param_shard`` -> Transformer Engine
``cast_master_weights_to_fp8``, ``megatron/core/fp8_utils.py`` @ ``core_v0.14.0``), an amax
pass and a cast over the owned parameters: read the fp32 master twice, write the recipe's
bytes (9 under FP8), and Adam writes no 16-bit copy. The step runs as a few fused
multi-tensor kernels (at least ``4 · kernel_min_time_s``). Composer's ``DecoupledAdamW``
(``FrameworkProfile.eager_decoupled_adamw``, llm-foundry) runs unfused per-parameter kernels
instead: ``5m + 11v + 2p + 3g`` bytes per owned parameter for first- and second-moment,
updated-parameter and gradient element sizes (84 in fp32), the stated dtypes where given.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.ops import Real
from planner.perf.parameters import LocalParameters
from planner.perf.precision import weight_copy_bytes

__all__ = [
    "ADAM_HBM_BYTES_PER_PARAM",
    "DECOUPLED_ADAMW_FIRST_MOMENT_ACCESSES",
    "DECOUPLED_ADAMW_GRADIENT_ACCESSES",
    "DECOUPLED_ADAMW_SECOND_MOMENT_ACCESSES",
    "FP8_CAST_BYTES_PER_PARAM",
    "FP8_PARAM_MASTER_READ_BYTES",
    "UPDATE_FIXED_BYTES_PER_PARAM",
    "OptimizerTimes",
    "master_bytes_per_param",
    "optimizer_times",
]

ADAM_HBM_BYTES_PER_PARAM = 34.0
"""Read fp32 master, m, v, grad (16); grad-norm pass (4); write master, m, v (12), 16-bit copy
(2): an fp32 gradient (module docstring for a 16-bit one)."""
FP8_CAST_BYTES_PER_PARAM = 3.0
"""Cast of a weight to its FP8 copy: read 2 bytes, write 1."""
FP8_PARAM_MASTER_READ_BYTES = 8.0
"""With FP8 parameters, bytes read per owned parameter to re-quantise it: the fp32 master shard
for the amax, then for the cast (module docstring)."""
DECOUPLED_ADAMW_FIRST_MOMENT_ACCESSES = 5.0
"""Composer's ``DecoupledAdamW``: element accesses of the first moment per owned parameter
(``mul_`` 2, ``add_`` 2, read by ``addcdiv_`` 1; ``FrameworkProfile.eager_decoupled_adamw``)."""
DECOUPLED_ADAMW_SECOND_MOMENT_ACCESSES = 11.0
"""... of the second moment and the ``denom`` built from it (``mul_`` 2, ``addcmul_`` 2,
``sqrt`` 2, the bias-correction divide 2, ``add_(eps)`` 2, read by ``addcdiv_`` 1)."""
DECOUPLED_ADAMW_GRADIENT_ACCESSES = 3.0
"""... of the gradient (read by ``add_``, by ``addcmul_`` and by the gradient-norm pass)."""
UPDATE_FIXED_BYTES_PER_PARAM = 12.0
"""Without a master (``parallelism.main_params_dtype: bf16``), bytes per owned parameter
besides the moments: read the gradient (4, as above) and the gradient-norm pass (4), read and
write the 16-bit weight (4); a 16-bit gradient reads 2 bytes twice less (module docstring)."""
_MIN_KERNELS = 4.0


@dataclass(frozen=True, slots=True, kw_only=True)
class OptimizerTimes:
    """The optimizer step per iteration, seconds (``step_s``; a number, or an array of shape
    ``(n,)``), and the HBM bytes it moves (``hbm_bytes``)."""

    step_s: Real
    hbm_bytes: Real


def master_bytes_per_param(a: ScenarioArrays) -> Real:
    """Bytes per owned parameter of the optimizer's master weight, shape ``(n,)``: the
    profile's ``zero3_master_weight_bytes`` under ZeRO-3, its ``master_weight_bytes``
    otherwise (``planner.perf.frameworks``). Read per scenario from the arrays, not the
    scenario, so a candidate of another ZeRO stage (``planner.perf.candidates``) gets its own."""
    return ops.where(a.zero_stage >= 3, a.zero3_master_weight_bytes, a.master_weight_bytes)


def optimizer_times(
    a: ScenarioArrays, eff: EfficiencyModel, params: LocalParameters
) -> OptimizerTimes:
    """The optimizer step of every scenario of ``a`` (module docstring); ``params`` are the
    parameters per GPU of the stage holding the most."""
    sharded = a.zero_stage >= 1
    dense_shards = ops.where(sharded, a.dense_data_parallel_size, 1.0)
    expert_shards = ops.where(sharded, a.expert_data_parallel_size, 1.0)
    owned = params.dense / dense_shards + params.expert / expert_shards
    # re-quantise the cached weight copy: read 16-bit, write the recipe's copy; FP8
    # parameters: the owned master shard, read for its amax and for the cast
    cast = (2.0 + weight_copy_bytes(a)) * (params.dense + params.expert)
    shard_cast = (FP8_PARAM_MASTER_READ_BYTES + weight_copy_bytes(a)) * owned
    cast = ops.where(a.fp8_param_gather, shard_cast, cast)
    # a master kept as a 16-bit remainder (or none) and 16-bit moments are read and written
    # at their own bytes
    # a 16-bit gradient read as it is saves its bytes twice (norm and step); one the stack
    # first casts to an fp32 copy costs that cast (FrameworkProfile.optimizer_grad_read). Both
    # are the Megatron-Core and Apex optimizers' below FSDP (ZeRO 3: PyTorch FSDP2 or
    # Megatron-FSDP, whose fp32 main-weight shards keep the fp32 gradient counted before)
    grad_saved = 2.0 * (4.0 - a.optimizer_grad_bytes)
    below_fsdp = a.zero_stage < 3
    adam = (
        ADAM_HBM_BYTES_PER_PARAM
        - 2.0 * (4.0 - master_bytes_per_param(a))
        - 2.0 * (8.0 - a.adam_moment_bytes)
        - ops.where(below_fsdp, grad_saved - a.optimizer_grad_cast_bytes, 0.0)
    )
    # no master: the step reads and writes the 16-bit weight itself, and writes no copy
    in_place = UPDATE_FIXED_BYTES_PER_PARAM + 2.0 * a.adam_moment_bytes - grad_saved
    adam = ops.where(a.optimizer_updates_weights, in_place, adam)
    # Composer's DecoupledAdamW: one eager kernel per operation (FrameworkProfile), the updated
    # parameter the master or, without one, the 16-bit weight
    first = a.adam_moment_bytes - a.exp_avg_sq_bytes
    updated = ops.where(a.optimizer_updates_weights, 2.0, master_bytes_per_param(a))
    eager = (
        DECOUPLED_ADAMW_FIRST_MOMENT_ACCESSES * first
        + DECOUPLED_ADAMW_SECOND_MOMENT_ACCESSES * a.exp_avg_sq_bytes
        + 2.0 * updated
        + DECOUPLED_ADAMW_GRADIENT_ACCESSES * a.optimizer_grad_bytes
    )
    adam = ops.where(a.eager_decoupled_adamw, eager, adam)
    adam = adam - ops.where(a.fp8_param_gather, 2.0, 0.0)  # no 16-bit copy to write
    hbm = adam * owned + ops.where(a.device.low_precision, cast, 0.0)
    seconds = hbm / eff.memory_bytes_per_s(hbm, a.device)
    return OptimizerTimes(
        step_s=ops.maximum(seconds, _MIN_KERNELS * eff.kernel_min_time_s), hbm_bytes=hbm
    )
