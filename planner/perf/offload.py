"""Exposed time of activation offloading: the copies to host memory and back that the compute
stream waits for.

Megatron-Core's ``cpu_offloading`` (``parallelism.activation_offload_layers`` = ``N``, one
pipeline stage) hands the model's ``L`` layers (``config.num_layers``) to Transformer Engine's
``AsyncDoubleBufferGroupOffloadHandler`` (NVIDIA/Megatron-LM
``megatron/core/transformer/transformer_block.py`` @ ``d98e8a64dd``: ``get_cpu_offload_context(
cpu_offloading, cpu_offloading_num_layers, num_layers, ...)``; NVIDIA/TransformerEngine
``transformer_engine/pytorch/cpu_offload.py`` @ ``v2.7``). Its schedule, per microbatch:

* ``layer_window_map``: offloaded layer ``i`` has a window ending at layer
  ``w_i = (L // N)·(i + 1) − 1`` plus ``min(i + 1, L % N)``, so the windows end ``L // N`` or
  ``L // N + 1`` layers apart and the last one at layer ``L − 1``.
* Forward (``synchronize_on_group_commit_forward``): layer 0's copy starts on the
  device-to-host stream when layer 0 ends; when layer ``w_i`` ends, the compute stream waits
  for that stream (``wait_stream`` both ways) and layer ``i + 1``'s copy starts. Copy ``i`` thus
  runs beside the forward of layers ``w_{i-1} + 1 .. w_i`` (``w_0`` layers for copy 0) and what
  it does not finish in that time stalls the forward.
* Backward (``on_group_commit_backward``): reaching layer ``w_i``'s backward, the compute
  stream waits for the host-to-device stream and layer ``i``'s reload starts; the next wait is
  at layer ``w_{i-1}`` (for layer 0: before layer 0's backward). Reload ``i`` runs beside the
  backward of the same number of layers as copy ``i`` did in the forward.

So with ``q = L // N`` and ``r = L % N`` the ``N`` copies each way overlap ``q + 1`` layers
(``r − 1`` of them), ``q − 1`` layers (copy 0 when ``r = 0``) or ``q`` layers (the rest), and
each stalls for ``max(0, copy − overlapped compute)``. A copy moves one layer's kept activations
(``planner.perf.memory.layer_activations``: the larger of a dense and an MoE layer's) over the
GPU's host link at its catalog rate (``GpuSpec.host_link_bandwidth_bytes_per_s``, one direction,
the GPU's share of a link GPUs share) with no efficiency factor, so the stall is a lower bound:
no measured achieved fraction of a PCIe or NVLink-C2C copy is in the model, nor the HBM traffic
the copies take from the kernels beside them.
"""

from __future__ import annotations

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.ops import Real

__all__ = ["offload_exposed_s"]


def _stalls(copy_s: Real, layer_s: Real, offloaded: Real, layers: Real) -> Real:
    """Seconds one pass (forward or backward) of one microbatch waits for its ``offloaded``
    copies of ``copy_s`` each, every copy beside the compute of ``layer_s`` per layer of its
    window (module docstring: ``q + 1``, ``q`` or ``q − 1`` layers)."""
    per_copy = ops.maximum(offloaded, 1.0)
    q = ops.floor(layers / per_copy)
    r = layers - q * per_copy
    longer = ops.maximum(r - 1.0, 0.0)  # windows of q + 1 layers
    shorter = ops.where(r == 0, 1.0, 0.0)  # copy 0 beside q - 1 layers when N divides L
    regular = offloaded - longer - shorter

    def stall(window_layers: Real) -> Real:
        return ops.maximum(copy_s - window_layers * layer_s, 0.0)

    return longer * stall(q + 1.0) + regular * stall(q) + shorter * stall(q - 1.0)


def offload_exposed_s(
    a: ScenarioArrays, *, layer_bytes: Real, forward_s: Real, backward_s: Real
) -> Real:
    """Seconds per iteration the compute stream waits for activation-offload copies (module
    docstring), shape ``(B,)``; 0 where a scenario offloads nothing (``copy_s`` 0: no stall).
    Validation refuses offloading under pipeline parallelism and on a GPU without a host link.

    ``layer_bytes``: one layer's kept activations of one microbatch on one GPU, bytes;
    ``forward_s`` / ``backward_s``: one layer's forward / backward of one microbatch, s."""
    offloaded = a.activation_offload_layers
    # a GPU without a host link (NaN) is refused when it offloads: kept out of the others
    copy_s = ops.where(offloaded > 0, layer_bytes / a.host_link_bandwidth_bytes_per_s, 0.0)
    per_microbatch = _stalls(copy_s, forward_s, offloaded, a.num_layers) + _stalls(
        copy_s, backward_s, offloaded, a.num_layers
    )
    return a.num_microbatches * per_microbatch
