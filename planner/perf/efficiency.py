"""Achieved fractions of hardware peaks: the interface the step model times operators with.

``EfficiencyModel`` is the Protocol: given operator shapes (numpy arrays, one column per scenario
of a batch, or Python numbers for one scenario; ``planner.perf.ops``) and the device each
scenario runs on, it returns achieved FLOP/s, bytes/s and the
few communication/memory factors the engine needs. The calibration issue satisfies it with
sampled operator regressors; ``DefaultEfficiency`` is the analytic default:

* GEMM ``(M x K) @ (K x N)``: ``peak · arch_fraction · tile_eff · wave_eff · K/(K + k_half)``,
  where tile quantisation ``tile_eff = MN / (ceil(M/tm)·tm · ceil(N/tn)·tn)`` (tiles shrink to
  the next power of two >= a narrow dimension, never below ``gemm_tile_min``) and wave
  quantisation ``wave_eff = tiles / (ceil(tiles/SMs)·SMs)`` follow NVIDIA's "Matrix
  multiplication background" guide; a batched GEMM (``batch`` independent products in one
  strided-batched launch, e.g. unfused attention's ``baddbmm``/``bmm`` over batch x heads)
  spreads the tiles of all its products over the SMs, so ``tiles`` counts them all; a GEMM
  with fewer output tiles than SMs and an inner dimension longer than its output's sides
  splits K into ``min(floor(SMs/tiles), floor(K/max(M, N)))`` slices, each a tile of its own,
  reduced afterwards (cuBLAS/cuBLASLt split-K,
  ``CUBLASLT_ALGO_CONFIG_SPLITK_NUM``; CUTLASS "parallel split-K" for small-M·N, large-K
  GEMMs such as the weight gradients ``(h x h) = (h x tokens) @ (tokens x h)`` of small
  models), so the waves fill while each slice's shorter inner loop pays ``K/(K + k_half)``
  at ``K/split`` (the partial sums' reduction, ``split·M·N`` elements, is not counted: it is
  far below the operands' ``M·K + K·N``);
  FP8/MXFP8/NVFP4 GEMMs run at ``low_precision_gemm_relative_efficiency`` of that fraction of
  their own (higher) peak; on Blackwell at ``low_precision_gemm_relative_efficiency_blackwell``
  (its own fit on the Blackwell calibration rows: Blackwell's FP8 path differs, block-scaled
  MXFP8 in the tensor cores and no transposed FP8 copy, ``planner.perf.precision``).
* flash attention: the GEMM fraction of the 16-bit peak times a forward/backward factor and
  ``s/(s + seq_half)`` (FlashAttention-2, Dao 2023); FlashAttention-2 on Hopper/Blackwell (stacks
  without a fused native kernel, ``planner.perf.frameworks``) reaches only
  ``flash_attention2_hopper_relative_efficiency`` of that (Shah et al. 2024), and FlashAttention
  v1 (llm-foundry 0.4) ``flash_attention1_relative_efficiency`` of FlashAttention-2 (Dao 2023);
  heads narrower than 128 run at ``d/(d + head_dim_half)`` relative to 128 (FlashAttention-2,
  Dao 2023, Fig. 4-6). FlashAttention v1 has no such penalty: flash-attn 1.0.9 measured on an
  H100 SXM (``benchmarks/flash_attention_v1_h100.py``, causal, bf16) runs head dim 64 at
  1.09-1.38x the FLOP rate of head dim 128 (FlashAttention-2 through PyTorch SDPA on the same
  GPU: 0.89-0.94x); the narrow-head rate is taken equal to 128's, not the measured gain (no A100
  measurement is at hand, and the A100 rows of heads of 64 fit the equal rate). v1 is Ampere
  code (``mma.sync``/``ldmatrix``/``cp.async`` templates that flash-attn 1.0.9 also builds for
  sm_90): on Hopper it cannot use ``wgmma``/TMA, so its rate is its A100 rate scaled by SMs x
  clock (``flash_attention1_hopper_speedup``, 132 x 1.98 GHz over 108 x 1.41 GHz: measured, v1
  holds the H100's maximum 1980 MHz below its power limit, where a cuBLAS GEMM is capped at
  ~1365 MHz), not the Hopper tensor peak times the FlashAttention-2 Hopper factor.
* element-wise ops of eager (unfused) stacks move ``unfused_elementwise_traffic_factor`` times
  the bytes of fused kernels.
* memory-bound kernels: ``hbm_bw · hbm_peak_fraction · bytes/(bytes + memory_bytes_half)``.
* collectives: NCCL bus bandwidth fractions of NVLink and NIC line rates, a base latency.

All constants come from ``efficiency_constants.json`` (see ``planner.perf.constants``);
``DefaultEfficiency.from_constants({...})`` overrides any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol

import numpy as np

from planner.errors import CalibrationError
from planner.perf import ops
from planner.perf.constants import default_constants
from planner.perf.ops import Count, Flag, FloatArray, Real

__all__ = [
    "ARCHITECTURES",
    "CommKind",
    "DefaultEfficiency",
    "DeviceArrays",
    "EfficiencyModel",
]

ARCHITECTURES: tuple[str, ...] = ("ampere", "hopper", "blackwell", "cdna3")
"""GPU architectures the catalog uses; ``DeviceArrays.architecture`` indexes this tuple."""


class CommKind(StrEnum):
    """Communication classes whose overlap with compute is modelled separately."""

    TENSOR = "tp"
    TENSOR_USERBUFFERS = "tp_comm"
    """Tensor-parallel collectives split and overlapped with their GEMMs (TE userbuffers)."""
    CONTEXT = "cp"
    EXPERT = "ep"
    EXPERT_1F1B = "ep_1f1b"
    """The MoE token exchange under Megatron-Core's 1F1B all-to-all overlap
    (``--overlap-moe-expert-parallel-comm``)."""
    DATA = "dp"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceArrays:
    """The GPU of each scenario of a batch, as arrays of shape ``(n,)`` (SI units), or as
    Python numbers in the one-scenario form (``ScenarioArrays.from_scenario``).

    ``peak_flop_per_s`` is the dense peak of the scenario's GEMM precision,
    ``peak16_flop_per_s`` the 16-bit peak (attention, LM head under FP8 training);
    ``architecture`` indexes ``ARCHITECTURES``; ``gpu_index`` indexes ``gpu_keys`` (for
    per-SKU sampled models); ``sfu_exp2_per_s`` the special function units' base-2
    exponentials per second (``GpuSpec.sfu_exp2_per_s``; infinite where the catalog has no
    figure: no exponential bound on flash attention).
    """

    peak_flop_per_s: Real
    peak16_flop_per_s: Real
    low_precision: Flag
    hbm_bandwidth_bytes_per_s: Real
    num_sms: Real
    architecture: Count
    gpu_index: Count
    gpu_keys: tuple[str, ...]
    sfu_exp2_per_s: Real = float("inf")


class EfficiencyModel(Protocol):
    """Achieved throughputs of operators and collectives; see the module docstring.

    Shape arguments are arrays broadcastable against the device arrays (``(n,)``), typically
    ``(num_ops, n)``, or ``(num_ops,)`` against a one-scenario device of Python numbers;
    results have the broadcast shape and are strictly positive. Given Python numbers only
    (one scenario), a method returns a Python number (``planner.perf.ops``).
    """

    @property
    def kernel_min_time_s(self) -> float:
        """Least time of one kernel, seconds."""
        ...

    @property
    def collective_latency_s(self) -> float:
        """Fixed cost of one collective or p2p launch, seconds (per-hop latency: catalog)."""
        ...

    @property
    def moe_imbalance_factor(self) -> float:
        """Tokens on the busiest expert rank / average (>= 1)."""
        ...

    @property
    def memory_overhead_bytes(self) -> float:
        """Per-GPU bytes outside the modelled tensors (context, workspaces, NCCL buffers)."""
        ...

    @property
    def memory_fragmentation_fraction(self) -> float:
        """Allocator slack as a fraction of activation bytes."""
        ...

    def gemm_flop_per_s(
        self,
        m: Real,
        n: Real,
        k: Real,
        device: DeviceArrays,
        *,
        low_precision: Flag,
        batch: Real = 1.0,
    ) -> Real:
        """Achieved FLOP/s of ``(m x k) @ (k x n)`` GEMMs (in the GEMM precision when
        ``low_precision``, else 16-bit); ``batch`` products of that shape run as one
        strided-batched launch (1: a plain GEMM)."""
        ...

    def attention_flop_per_s(
        self,
        seq_kv: Real,
        device: DeviceArrays,
        *,
        backward: bool,
        fused: Flag = True,
        head_dim: Real | None = None,
        flash_v1: Flag = False,
    ) -> Real:
        """Achieved FLOP/s of flash attention (16-bit) over ``seq_kv`` keys, on executed FLOPs;
        ``fused`` False: FlashAttention-2 instead of the GPU generation's native fused kernel;
        ``flash_v1`` (with ``fused`` False): FlashAttention v1 instead of FlashAttention-2;
        ``head_dim`` (elements per head; None: 128) below 128 lowers the throughput."""
        ...

    def elementwise_traffic_factor(self, fused: Flag) -> Real:
        """HBM traffic of element-wise ops relative to fused kernels (1 where ``fused``)."""
        ...

    def memory_bytes_per_s(self, num_bytes: Real, device: DeviceArrays) -> Real:
        """Achieved HBM bytes/s of a memory-bound kernel moving ``num_bytes``."""
        ...

    def bus_bandwidth_fraction(self, *, scale_up: Flag) -> Real:
        """NCCL bus bandwidth / line rate, for NVLink (``scale_up``) or NIC collectives."""
        ...

    def comm_overlap(self, kind: CommKind) -> float:
        """Largest fraction of a communication class hidden behind compute, in ``[0, 1]``."""
        ...


_ARCH_KEYS = tuple(f"gemm_peak_fraction_{a}" for a in ARCHITECTURES)
_HOPPER = ARCHITECTURES.index("hopper")
_BLACKWELL = ARCHITECTURES.index("blackwell")
_A100_PEAK16_FLOP_PER_S = 108 * 2048 * 1.41e9
"""A100 SXM dense 16-bit tensor peak, 108 SMs x 2048 FLOP/clock x 1.41 GHz (A100 whitepaper;
the catalog's 312 TFLOP/s for ``a100-*``): the reference FlashAttention v1 is scaled from on
Hopper. Held here because the engine sees only the scenario's own GPU, not the catalog."""
_CDNA3 = ARCHITECTURES.index("cdna3")


@dataclass(frozen=True, slots=True)
class DefaultEfficiency:
    """The analytic default efficiency model (see the module docstring for the formulas).

    ``constants`` maps every name of ``efficiency_constants.json`` to its value; build it with
    ``DefaultEfficiency()`` (packaged values) or ``DefaultEfficiency.from_constants({...})``
    (packaged values with some overridden). Unknown names raise ``CalibrationError``.
    """

    constants: Mapping[str, float] = field(default_factory=default_constants)
    kernel_min_time_s: float = field(init=False)
    collective_latency_s: float = field(init=False)
    moe_imbalance_factor: float = field(init=False)
    memory_overhead_bytes: float = field(init=False)
    memory_fragmentation_fraction: float = field(init=False)
    _arch_fraction: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        known = default_constants()
        unknown = sorted(set(self.constants) - set(known))
        if unknown:
            raise CalibrationError(
                f"unknown efficiency constants {unknown}; known: {sorted(known)}"
            )
        merged = {**known, **{k: float(v) for k, v in self.constants.items()}}
        object.__setattr__(self, "constants", MappingProxyType(merged))
        object.__setattr__(self, "kernel_min_time_s", merged["kernel_min_time_s"])
        object.__setattr__(self, "collective_latency_s", merged["nccl_base_latency_s"])
        object.__setattr__(self, "moe_imbalance_factor", max(1.0, merged["moe_imbalance_factor"]))
        object.__setattr__(self, "memory_overhead_bytes", merged["memory_overhead_bytes"])
        object.__setattr__(
            self, "memory_fragmentation_fraction", merged["memory_fragmentation_fraction"]
        )
        object.__setattr__(self, "_arch_fraction", np.array([merged[k] for k in _ARCH_KEYS]))

    @classmethod
    def from_constants(cls, values: Mapping[str, float]) -> DefaultEfficiency:
        """The default model with ``values`` overriding the packaged constants by name."""
        return cls(dict(values))

    def _c(self, name: str) -> float:
        return self.constants[name]

    def gemm_flop_per_s(
        self,
        m: Real,
        n: Real,
        k: Real,
        device: DeviceArrays,
        *,
        low_precision: Flag,
        batch: Real = 1.0,
    ) -> Real:
        """Tile- and wave-quantised GEMM throughput (module docstring)."""
        m = ops.maximum(m, 1.0)
        n = ops.maximum(n, 1.0)
        k = ops.maximum(k, 1.0)
        # cuBLAS heuristics shrink the tile for narrow outputs: the next power of two >= the
        # dimension, at least 64, at most the large-GEMM tile.
        tmin = self._c("gemm_tile_min")
        tm = ops.minimum(ops.maximum(_next_pow2(m), tmin), self._c("gemm_tile_m"))
        tn = ops.minimum(ops.maximum(_next_pow2(n), tmin), self._c("gemm_tile_n"))
        rows = ops.ceil(m / tm)
        cols = ops.ceil(n / tn)
        tile_eff = m * n / (rows * cols * tm * tn)
        tiles = rows * cols * ops.maximum(batch, 1.0)
        sms = device.num_sms
        # split-K below one wave, for inner dimensions longer than the output's sides
        split = ops.minimum(ops.floor(sms / tiles), ops.floor(k / ops.maximum(m, n)))
        split = ops.maximum(split, 1.0)
        tiles = tiles * split
        wave_eff = tiles / (ops.ceil(tiles / sms) * sms)
        k_split = k / split
        k_eff = k_split / (k_split + self._c("gemm_k_half"))
        frac = ops.take(self._arch_fraction, device.architecture)
        peak = ops.where(low_precision, device.peak_flop_per_s, device.peak16_flop_per_s)
        lp_rel = ops.where(
            device.architecture == _BLACKWELL,
            self._c("low_precision_gemm_relative_efficiency_blackwell"),
            self._c("low_precision_gemm_relative_efficiency"),
        )
        lp = ops.where(low_precision, lp_rel, 1.0)
        return peak * frac * lp * tile_eff * wave_eff * k_eff

    def attention_flop_per_s(
        self,
        seq_kv: Real,
        device: DeviceArrays,
        *,
        backward: bool,
        fused: Flag = True,
        head_dim: Real | None = None,
        flash_v1: Flag = False,
    ) -> Real:
        """Flash-attention throughput on executed FLOPs (module docstring)."""
        rel = self._c(
            "attention_bwd_relative_efficiency" if backward else "attention_fwd_relative_efficiency"
        )
        frac = ops.take(self._arch_fraction, device.architecture)
        seq_eff = seq_kv / (seq_kv + self._c("attention_seq_half"))
        unfused = ops.logical_not(fused)
        v1 = unfused & flash_v1
        if head_dim is not None:  # narrower heads: less work per loaded tile, normalised at 128
            half = self._c("attention_head_dim_half")
            narrow = ops.minimum(head_dim / (head_dim + half) * (128.0 + half) / 128.0, 1.0)
            seq_eff = seq_eff * ops.where(v1, 1.0, narrow)  # v1: no narrow-head penalty
        arch = device.architecture
        fa2 = ops.where(
            unfused & (arch >= _HOPPER) & (arch < _CDNA3),
            self._c("flash_attention2_hopper_relative_efficiency"),
            1.0,
        )
        fa1 = ops.where(v1, self._c("flash_attention1_relative_efficiency"), 1.0)
        native = device.peak16_flop_per_s * frac * fa2
        # v1 on Hopper: its Ampere rate scaled by SMs x clock (module docstring)
        ampere = _A100_PEAK16_FLOP_PER_S * self._c("gemm_peak_fraction_ampere")
        native = ops.where(
            v1 & (arch == _HOPPER), ampere * self._c("flash_attention1_hopper_speedup"), native
        )
        return native * rel * seq_eff * fa1

    def elementwise_traffic_factor(self, fused: Flag) -> Real:
        """``unfused_elementwise_traffic_factor`` for eager stacks, 1 for fused ones."""
        return ops.where(fused, 1.0, self._c("unfused_elementwise_traffic_factor"))

    def memory_bytes_per_s(self, num_bytes: Real, device: DeviceArrays) -> Real:
        """Size-dependent streaming bandwidth (module docstring)."""
        size_eff = num_bytes / (num_bytes + self._c("memory_bytes_half"))
        out = device.hbm_bandwidth_bytes_per_s * self._c("hbm_peak_fraction") * size_eff
        return ops.maximum(out, 1.0)

    def bus_bandwidth_fraction(self, *, scale_up: Flag) -> Real:
        """``nvlink_busbw_fraction`` inside a domain, ``network_busbw_fraction`` across."""
        return ops.where(
            scale_up, self._c("nvlink_busbw_fraction"), self._c("network_busbw_fraction")
        )

    def comm_overlap(self, kind: CommKind) -> float:
        """``<kind>_overlap_fraction`` (CP ring exchange is timed explicitly: 1.0)."""
        if kind is CommKind.CONTEXT:
            return 1.0
        return self._c(f"{kind.value}_overlap_fraction")


def _next_pow2(x: Real) -> Real:
    """The least power of two >= ``x`` (``x >= 1``)."""
    return ops.exp2(ops.ceil(ops.log2(x)))
