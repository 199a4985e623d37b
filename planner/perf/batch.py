"""Structure of arrays over a batch of scenarios: the one input of the engine.

``ScenarioArrays.from_scenarios(scenarios)`` reads every field the engine needs once, into
float64 (or bool/int) arrays of shape ``(n,)``; ``ScenarioArrays.from_scenario(scenario)``
reads the same fields of one scenario as Python ``float``/``bool``/``int`` (the one-scenario
form). The engine computes both forms with the same code (``planner.perf.ops``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.perf.efficiency import ARCHITECTURES, DeviceArrays
from planner.perf.frameworks import FrameworkProfile, profile_of
from planner.perf.ops import Count, Flag, Real
from planner.specs.hardware import Precision
from planner.specs.model import Activation
from planner.specs.parallelism import ParallelismSpec
from planner.specs.scenario import Scenario

__all__ = ["ScenarioArrays"]

_LOW_PRECISION = (Precision.FP8, Precision.MXFP8, Precision.NVFP4)


def _grad_reduce_in_fp32(par: ParallelismSpec, profile: FrameworkProfile) -> bool:
    """The scenario's ``grad_reduce_in_fp32``, else the framework's default: 16-bit under
    fp16 (loss scaling), the profile's choice otherwise (``planner.perf.frameworks``)."""
    if par.grad_reduce_in_fp32 is not None:
        return par.grad_reduce_in_fp32
    return profile.grad_reduce_in_fp32 and par.precision is not Precision.FP16


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioArrays:
    """Every number the engine reads (SI units, counts as float): one array element per
    scenario, or one Python number each in the one-scenario form.

    Model: ``L`` layers, ``h`` hidden, ``heads``, ``q``/``kv`` query and key widths, ``f`` MLP
    width, ``V`` vocabulary, ``S`` sequence, ``gated`` (SwiGLU), ``dropout`` (GeLU GPT models
    train with dropout; SwiGLU/squared-ReLU models without), ``untied``, MoE ``E``, ``topk``,
    ``f_moe``, ``shared``, ``moe_layers``. Parallelism: ``t p c e d v`` degrees, ``sp``,
    ``b`` micro-batch, ``B`` global batch, ``m`` microbatches, ``recompute``
    (``Recompute.code``), ``zero``, ``flash``. Hardware: ``N`` GPUs, ``domain`` NVLink domain
    size, bandwidths and latencies, ``hbm_bytes``, ``device``. Framework: ``grad_bytes`` per
    parameter of the gradient buffer and its data-parallel reduction (4 fp32, 2 16-bit;
    ``parallelism.grad_reduce_in_fp32`` or the framework's default);
    ``fused_attn``, ``fused_ew``, ``tp_overlap``, ``fused_loss`` (a fused cross-entropy
    kernel), ``loss_traffic`` (HBM bytes per logit the loss moves, forward + backward),
    ``fp8_cache``, ``op_sac``, ``flash_v1``, ``z3_per_tensor``, ``z3_prefetch``,
    ``z3_regather``, ``pp_overlap`` the framework's properties (``planner.perf.frameworks``);
    ``dp_grad_overlap`` /
    ``dp_gather_overlap`` the scenario's ``overlap_grad_reduce`` / ``overlap_param_gather``
    (true unless set to false).
    """

    n: int
    L: Real
    h: Real
    heads: Real
    q: Real
    kv: Real
    f: Real
    V: Real
    S: Real
    gated: Flag
    dropout: Flag
    untied: Flag
    E: Real
    topk: Real
    f_moe: Real
    shared: Real
    moe_layers: Real
    t: Real
    p: Real
    c: Real
    e: Real
    d: Real
    v: Real
    sp: Flag
    b: Real
    B: Real
    m: Real
    recompute: Count
    zero: Count
    flash: Flag
    N: Real
    domain: Real
    up_bw: Real
    out_bw: Real
    up_lat: Real
    out_lat: Real
    hbm_bytes: Real
    grad_bytes: Real
    fused_attn: Flag
    fused_ew: Flag
    tp_overlap: Flag
    fused_loss: Flag
    loss_traffic: Real
    fp8_cache: Flag
    op_sac: Flag
    flash_v1: Flag
    z3_per_tensor: Flag
    z3_prefetch: Real
    z3_regather: Flag
    pp_overlap: Flag
    dp_grad_overlap: Flag
    dp_gather_overlap: Flag
    total_tokens: Real
    train_iters: Real
    device: DeviceArrays

    @property
    def scalar(self) -> bool:
        """True for the one-scenario form (Python numbers instead of arrays)."""
        return not isinstance(self.L, np.ndarray)

    def full(self, value: float) -> Real:
        """``value`` for every scenario: the number itself, or an array of shape ``(n,)``."""
        return value if self.scalar else np.full(self.n, value)

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> ScenarioArrays:
        """The one-scenario form of a validated ``Scenario``: every field a Python number."""
        values = {
            name: kind(value) for (name, kind), value in zip(_COLUMNS, _row(scenario), strict=True)
        }
        device = DeviceArrays(
            **{name: values.pop(name) for name in _DEVICE_COLUMNS},
            gpu_index=0,
            gpu_keys=(scenario.hardware.gpu.key,),
        )
        return cls(n=1, device=device, **values)

    @classmethod
    def from_scenarios(cls, scenarios: Sequence[Scenario]) -> ScenarioArrays:
        """Gather the fields of ``scenarios`` (validated ``Scenario`` values) into arrays."""
        n = len(scenarios)
        # one (n, columns) float64 conversion, transposed so that each column is contiguous
        table = np.array([_row(s) for s in scenarios], dtype=np.float64)
        table = table.reshape(n, len(_COLUMNS)).T.copy()
        values: dict[str, Any] = {
            name: table[j] if kind is float else table[j].astype(_DTYPES[kind])
            for j, (name, kind) in enumerate(_COLUMNS)
        }
        keys: dict[str, int] = {}
        gpu_index = [keys.setdefault(s.hardware.gpu.key, len(keys)) for s in scenarios]
        device = DeviceArrays(
            **{name: values.pop(name) for name in _DEVICE_COLUMNS},
            gpu_index=np.asarray(gpu_index, dtype=np.int64),
            gpu_keys=tuple(keys),
        )
        return cls(n=n, device=device, **values)


_DTYPES: dict[Callable[[Any], Any], Any] = {bool: np.bool_, int: np.int64}

_COLUMNS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    *((name, float) for name in ("L", "h", "heads", "q", "kv", "f", "V", "S")),
    *((name, bool) for name in ("gated", "dropout", "untied")),
    *((name, float) for name in ("E", "topk", "f_moe", "shared", "moe_layers")),
    *((name, float) for name in ("t", "p", "c", "e", "d", "v")),
    ("sp", bool),
    *((name, float) for name in ("b", "B", "m")),
    ("recompute", int),
    ("zero", int),
    ("flash", bool),
    *((name, float) for name in ("N", "domain", "up_bw", "out_bw", "up_lat", "out_lat")),
    ("hbm_bytes", float),
    ("grad_bytes", float),
    *((name, bool) for name in ("fused_attn", "fused_ew", "tp_overlap")),
    ("fused_loss", bool),
    ("loss_traffic", float),
    *((name, bool) for name in ("fp8_cache", "op_sac", "flash_v1", "z3_per_tensor")),
    ("z3_prefetch", float),
    ("z3_regather", bool),
    ("pp_overlap", bool),
    ("dp_grad_overlap", bool),
    ("dp_gather_overlap", bool),
    ("total_tokens", float),
    ("train_iters", float),
    ("peak_flop_per_s", float),
    ("peak16_flop_per_s", float),
    ("low_precision", bool),
    ("hbm_bandwidth_bytes_per_s", float),
    ("num_sms", float),
    ("architecture", int),
)
"""Every field ``_row`` reads, in its order, with the Python type of the one-scenario form."""

_DEVICE_COLUMNS = (
    "peak_flop_per_s",
    "peak16_flop_per_s",
    "low_precision",
    "hbm_bandwidth_bytes_per_s",
    "num_sms",
    "architecture",
)


def _row(s: Scenario) -> tuple[Any, ...]:
    """The values of ``_COLUMNS`` for one scenario, numbers as read (the caller converts)."""
    m, p, hw, tr = s.model, s.parallelism, s.hardware, s.training
    g = hw.gpu
    pr = profile_of(tr.framework)
    peaks = dict(g.dense_peak_flop_per_s)
    return (
        m.num_layers,
        m.hidden_size,
        m.num_attention_heads,
        m.query_width,
        m.kv_width,
        m.ffn_hidden_size,
        m.vocab_size,
        m.seq_length,
        m.activation.is_gated,
        m.activation is Activation.GELU,
        m.untie_embeddings,
        m.num_experts,
        m.moe_router_topk,
        m.moe_ffn_hidden_size,
        m.num_shared_experts,
        m.num_moe_layers,
        p.tensor_parallel,
        p.pipeline_parallel,
        p.context_parallel,
        p.expert_parallel,
        p.data_parallel,
        p.virtual_pipeline,
        p.sequence_parallel,
        p.micro_batch_size,
        p.global_batch_size,
        p.num_microbatches,
        p.recompute.code,
        p.zero_stage,
        p.flash_attention,
        hw.num_gpus,
        hw.nvlink_domain_size,
        hw.scale_up_bandwidth_bytes_per_s,
        hw.inter_node_bandwidth_bytes_per_s,
        g.scale_up_latency_s,
        g.scale_out_latency_s,
        g.hbm_bytes,
        4.0 if _grad_reduce_in_fp32(p, pr) else 2.0,
        pr.fused_attention,
        pr.fused_elementwise,
        pr.tp_comm_overlap,
        pr.fused_cross_entropy,
        pr.loss_bytes_per_logit,
        pr.fp8_weight_cache,
        pr.op_level_selective_recompute,
        pr.flash_attention_v1,
        pr.zero3_gather_per_tensor,
        pr.zero3_prefetch_params,
        pr.zero3_regather_on_recompute,
        pr.pp_comm_overlap,
        p.overlap_grad_reduce is not False,
        p.overlap_param_gather is not False,
        math.nan if tr.total_tokens is None else tr.total_tokens,
        math.nan if tr.train_iters is None else tr.train_iters,
        g.peak_flop_per_s(p.precision),
        peaks[Precision.BF16] if Precision.BF16 in peaks else peaks[Precision.FP16],
        p.precision in _LOW_PRECISION,
        g.hbm_bandwidth_bytes_per_s,
        g.num_sms,
        ARCHITECTURES.index(g.architecture),
    )
