"""LoRA fine-tuning: the adapters' operators, parameters and FLOPs on a frozen base.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") adds to a frozen
linear layer ``W (in -> out)`` a trainable ``B·A`` of rank ``r`` (``A: in -> r``,
``B: r -> out``). The base runs its forward and, for the activations' gradient, its data-
gradient GEMM, but no weight-gradient GEMM, no gradient buffer, no fp32 master and no optimizer
state (``planner.perf.operators``, ``memory``, ``optimizer``); the adapters run all three GEMMs
and carry the full mixed-precision states. NeMo's LoRA (``nemo.collections.llm.peft.LoRA``,
``ParallelLinearAdapter``) splits the adapters with the tensor-parallel layer they adapt:
for a column-parallel layer (``linear_qkv``, ``linear_fc1``) ``A`` is whole on every rank and
``B`` column-parallel, for a row-parallel one (``linear_proj``, ``linear_fc2``) ``A`` is
row-parallel and ``B`` whole: ``r·(in + out/t)`` or ``r·(in/t + out)`` parameters per GPU. Its
output is added to the base layer's (``tok·out`` 16-bit values read and written). Dense layers
take all targets; MoE layers the attention ones (``linear_qkv``, ``linear_proj``; the routed
experts stay frozen).
"""

from __future__ import annotations

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.ops import Flag, Real
from planner.perf.optable import OperatorTable

__all__ = ["adapter_flops_per_token", "adapter_params_per_gpu", "lora_ops"]


def _targets(a: ScenarioArrays, *, moe: bool) -> list[tuple[Flag, Real, Real, bool]]:
    """``(adapted, in, out, column_parallel)`` of each LoRA target of a dense or MoE layer."""
    hidden = a.hidden_size
    qkv_out = ops.where(a.multi_latent_attention, a.attention_down_width, a.attention_in_width)
    out: list[tuple[Flag, Real, Real, bool]] = [
        (a.lora_linear_qkv, hidden, qkv_out, True),
        (a.lora_linear_proj, a.attention_out_width, hidden, False),
    ]
    if not moe:
        n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
        ffn = a.ffn_hidden_size
        out += [
            (a.lora_linear_fc1, hidden, n_up * ffn, True),
            (a.lora_linear_fc2, ffn, hidden, False),
        ]
    return out


def lora_ops(
    table: OperatorTable, a: ScenarioArrays, forward: str, backward: str, *, moe: bool
) -> None:
    """Register the adapters of one dense or MoE layer (module docstring): ``A`` and ``B``
    forward, their data and weight gradients, and the add of their output."""
    tp, tokens, r = a.tensor_parallel, a.tokens_per_microbatch, a.lora_rank
    for adapted, width_in, width_out, column in _targets(a, moe=moe):
        on = ops.where(adapted & (r > 0), 1.0, 0.0)
        a_in = width_in if column else width_in / tp
        b_out = width_out / tp if column else width_out
        for group, bwd in ((forward, False), (backward, True)):
            table.gemm(group, tokens, r, a_in, count=on, lp=False, backward=bwd)
            table.gemm(group, tokens, b_out, r, count=on, lp=False, backward=bwd)
        table.mem(forward, on * 6.0 * tokens * width_out / tp, 1.0)  # base + adapter outputs
        table.mem(backward, on * 4.0 * tokens * width_out / tp, 1.0)


def _per_layer(a: ScenarioArrays, *, moe: bool, per_gpu: bool) -> Real:
    """Adapter parameters of one dense or MoE layer, whole or per GPU."""
    tp, r = a.tensor_parallel, a.lora_rank
    total: Real = a.full(0.0)
    for adapted, width_in, width_out, column in _targets(a, moe=moe):
        if per_gpu:
            size = width_in + width_out / tp if column else width_in / tp + width_out
        else:
            size = width_in + width_out
        total = total + ops.where(adapted, r * size, 0.0)
    return total


def adapter_params_per_gpu(a: ScenarioArrays) -> Real:
    """LoRA parameters one GPU holds (a pipeline stage's ``L/p`` layers, MoE layers by their
    share), 0 when not LoRA training."""
    moe = a.num_moe_layers / a.num_layers
    layer = (1.0 - moe) * _per_layer(a, moe=False, per_gpu=True)
    layer = layer + moe * _per_layer(a, moe=True, per_gpu=True)
    return a.num_layers / a.pipeline_parallel * layer


def adapter_flops_per_token(a: ScenarioArrays) -> Real:
    """Forward FLOPs per token of every layer's adapters, ``2·r·(in + out)`` each."""
    dense_layers = a.num_layers - a.num_moe_layers
    return 2.0 * (
        dense_layers * _per_layer(a, moe=False, per_gpu=False)
        + a.num_moe_layers * _per_layer(a, moe=True, per_gpu=False)
    )
