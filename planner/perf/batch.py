"""Structure of arrays over a batch of scenarios: the one input of the vectorized engine.

``ScenarioArrays.from_scenarios(scenarios)`` reads every field the engine needs once, into
float64 (or bool/int) arrays of shape ``(n,)``; everything downstream is numpy over that axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from planner.perf.efficiency import ARCHITECTURES, DeviceArrays
from planner.perf.frameworks import FrameworkProfile, profile_of
from planner.specs.hardware import Precision
from planner.specs.model import Activation
from planner.specs.parallelism import ParallelismSpec, Recompute
from planner.specs.scenario import Scenario

__all__ = ["ScenarioArrays"]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

_LOW_PRECISION = (Precision.FP8, Precision.MXFP8, Precision.NVFP4)
_RECOMPUTE_CODE = {Recompute.NONE: 0, Recompute.SELECTIVE: 1, Recompute.FULL: 2}


def _grad_reduce_in_fp32(par: ParallelismSpec, profile: FrameworkProfile) -> bool:
    """The scenario's ``grad_reduce_in_fp32``, else the framework's default: 16-bit under
    fp16 (loss scaling), the profile's choice otherwise (``planner.perf.frameworks``)."""
    if par.grad_reduce_in_fp32 is not None:
        return par.grad_reduce_in_fp32
    return profile.grad_reduce_in_fp32 and par.precision is not Precision.FP16


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioArrays:
    """Every number the engine reads, one array element per scenario (SI units, counts as float).

    Model: ``L`` layers, ``h`` hidden, ``heads``, ``q``/``kv`` query and key widths, ``f`` MLP
    width, ``V`` vocabulary, ``S`` sequence, ``gated`` (SwiGLU), ``dropout`` (GeLU GPT models
    train with dropout; SwiGLU/squared-ReLU models without), ``untied``, MoE ``E``, ``topk``,
    ``f_moe``, ``shared``, ``moe_layers``. Parallelism: ``t p c e d v`` degrees, ``sp``,
    ``b`` micro-batch, ``B`` global batch, ``m`` microbatches, ``recompute`` (0 none,
    1 selective, 2 full), ``zero``, ``flash``. Hardware: ``N`` GPUs, ``domain`` NVLink domain
    size, bandwidths and latencies, ``hbm_bytes``, ``device``. Framework: ``grad_bytes`` per
    parameter of the gradient buffer and its data-parallel reduction (4 fp32, 2 16-bit;
    ``parallelism.grad_reduce_in_fp32`` or the framework's default);
    ``fused_attn``, ``fused_ew``, ``tp_overlap``, ``logit_bytes`` (bytes per logit held at the
    loss), ``loss_traffic`` (HBM bytes per logit the loss moves, forward + backward), ``fp8_cache``,
    ``op_sac``, ``flash_v1``, ``z3_per_tensor``, ``z3_prefetch``, ``z3_regather``,
    ``pp_overlap`` the
    framework's properties (``planner.perf.frameworks``); ``dp_grad_overlap`` /
    ``dp_gather_overlap`` the scenario's ``overlap_grad_reduce`` / ``overlap_param_gather``
    (true unless set to false).
    """

    n: int
    L: FloatArray
    h: FloatArray
    heads: FloatArray
    q: FloatArray
    kv: FloatArray
    f: FloatArray
    V: FloatArray
    S: FloatArray
    gated: BoolArray
    dropout: BoolArray
    untied: BoolArray
    E: FloatArray
    topk: FloatArray
    f_moe: FloatArray
    shared: FloatArray
    moe_layers: FloatArray
    t: FloatArray
    p: FloatArray
    c: FloatArray
    e: FloatArray
    d: FloatArray
    v: FloatArray
    sp: BoolArray
    b: FloatArray
    B: FloatArray
    m: FloatArray
    recompute: NDArray[np.int64]
    zero: NDArray[np.int64]
    flash: BoolArray
    N: FloatArray
    domain: FloatArray
    up_bw: FloatArray
    out_bw: FloatArray
    up_lat: FloatArray
    out_lat: FloatArray
    hbm_bytes: FloatArray
    grad_bytes: FloatArray
    fused_attn: BoolArray
    fused_ew: BoolArray
    tp_overlap: BoolArray
    logit_bytes: FloatArray
    loss_traffic: FloatArray
    fp8_cache: BoolArray
    op_sac: BoolArray
    flash_v1: BoolArray
    z3_per_tensor: BoolArray
    z3_prefetch: FloatArray
    z3_regather: BoolArray
    pp_overlap: BoolArray
    dp_grad_overlap: BoolArray
    dp_gather_overlap: BoolArray
    total_tokens: FloatArray
    train_iters: FloatArray
    device: DeviceArrays

    @classmethod
    def from_scenarios(cls, scenarios: Sequence[Scenario]) -> ScenarioArrays:
        """Gather the fields of ``scenarios`` (validated ``Scenario`` values) into arrays."""
        ms = [s.model for s in scenarios]
        ps = [s.parallelism for s in scenarios]
        hs = [s.hardware for s in scenarios]
        gpus = [hw.gpu for hw in hs]

        def fa(values: list[float] | list[int]) -> FloatArray:
            return np.asarray(values, dtype=np.float64)

        def ba(values: list[bool]) -> BoolArray:
            return np.asarray(values, dtype=np.bool_)

        keys: dict[str, int] = {}
        gpu_index = [keys.setdefault(g.key, len(keys)) for g in gpus]
        low = [p.precision in _LOW_PRECISION for p in ps]
        peak = [g.peak_flop_per_s(p.precision) for g, p in zip(gpus, ps, strict=True)]
        peak16 = [
            g.peak_flop_per_s(Precision.BF16 if g.supports(Precision.BF16) else Precision.FP16)
            for g in gpus
        ]
        device = DeviceArrays(
            peak_flop_per_s=fa(peak),
            peak16_flop_per_s=fa(peak16),
            low_precision=ba(low),
            hbm_bandwidth_bytes_per_s=fa([g.hbm_bandwidth_bytes_per_s for g in gpus]),
            num_sms=fa([g.num_sms for g in gpus]),
            architecture=np.asarray([ARCHITECTURES.index(g.architecture) for g in gpus]),
            gpu_index=np.asarray(gpu_index, dtype=np.int64),
            gpu_keys=tuple(keys),
        )
        training = [s.training for s in scenarios]
        profiles = [profile_of(tr.framework) for tr in training]
        return cls(
            n=len(scenarios),
            L=fa([m.num_layers for m in ms]),
            h=fa([m.hidden_size for m in ms]),
            heads=fa([m.num_attention_heads for m in ms]),
            q=fa([m.query_width for m in ms]),
            kv=fa([m.kv_width for m in ms]),
            f=fa([m.ffn_hidden_size for m in ms]),
            V=fa([m.vocab_size for m in ms]),
            S=fa([m.seq_length for m in ms]),
            gated=ba([m.activation.is_gated for m in ms]),
            dropout=ba([m.activation is Activation.GELU for m in ms]),
            untied=ba([m.untie_embeddings for m in ms]),
            E=fa([m.num_experts for m in ms]),
            topk=fa([m.moe_router_topk for m in ms]),
            f_moe=fa([m.moe_ffn_hidden_size for m in ms]),
            shared=fa([m.num_shared_experts for m in ms]),
            moe_layers=fa([m.num_moe_layers for m in ms]),
            t=fa([p.tensor_parallel for p in ps]),
            p=fa([p.pipeline_parallel for p in ps]),
            c=fa([p.context_parallel for p in ps]),
            e=fa([p.expert_parallel for p in ps]),
            d=fa([p.data_parallel for p in ps]),
            v=fa([p.virtual_pipeline for p in ps]),
            sp=ba([p.sequence_parallel for p in ps]),
            b=fa([p.micro_batch_size for p in ps]),
            B=fa([p.global_batch_size for p in ps]),
            m=fa([p.num_microbatches for p in ps]),
            recompute=np.asarray([_RECOMPUTE_CODE[p.recompute] for p in ps], dtype=np.int64),
            zero=np.asarray([p.zero_stage for p in ps], dtype=np.int64),
            flash=ba([p.flash_attention for p in ps]),
            N=fa([hw.num_gpus for hw in hs]),
            domain=fa([hw.nvlink_domain_size for hw in hs]),
            up_bw=fa([hw.scale_up_bandwidth_bytes_per_s for hw in hs]),
            out_bw=fa([hw.inter_node_bandwidth_bytes_per_s for hw in hs]),
            up_lat=fa([g.scale_up_latency_s for g in gpus]),
            out_lat=fa([g.scale_out_latency_s for g in gpus]),
            hbm_bytes=fa([g.hbm_bytes for g in gpus]),
            grad_bytes=fa(
                [
                    4.0 if _grad_reduce_in_fp32(p, pr) else 2.0
                    for p, pr in zip(ps, profiles, strict=True)
                ]
            ),
            fused_attn=ba([pr.fused_attention for pr in profiles]),
            fused_ew=ba([pr.fused_elementwise for pr in profiles]),
            tp_overlap=ba([pr.tp_comm_overlap for pr in profiles]),
            logit_bytes=fa([4.0 if pr.fused_cross_entropy else 10.0 for pr in profiles]),
            loss_traffic=fa([pr.loss_bytes_per_logit for pr in profiles]),
            fp8_cache=ba([pr.fp8_weight_cache for pr in profiles]),
            op_sac=ba([pr.op_level_selective_recompute for pr in profiles]),
            flash_v1=ba([pr.flash_attention_v1 for pr in profiles]),
            z3_per_tensor=ba([pr.zero3_gather_per_tensor for pr in profiles]),
            z3_prefetch=fa([pr.zero3_prefetch_params for pr in profiles]),
            z3_regather=ba([pr.zero3_regather_on_recompute for pr in profiles]),
            pp_overlap=ba([pr.pp_comm_overlap for pr in profiles]),
            dp_grad_overlap=ba([p.overlap_grad_reduce is not False for p in ps]),
            dp_gather_overlap=ba([p.overlap_param_gather is not False for p in ps]),
            total_tokens=fa(
                [np.nan if tr.total_tokens is None else tr.total_tokens for tr in training]
            ),
            train_iters=fa(
                [np.nan if tr.train_iters is None else tr.train_iters for tr in training]
            ),
            device=device,
        )
