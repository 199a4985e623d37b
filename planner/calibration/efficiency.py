"""``CalibratedEfficiency``: the engine's ``EfficiencyModel`` answered from sampled operators.

For scenarios that run on the calibrated device (``device_key``, a catalog GPU key) and shapes
inside the sampled domain, the achieved throughputs come from the fitted operator models of a
``Calibration`` (Zhang et al. 2025: one regressor per operator, sampled on the target GPU):

* ``gemm_flop_per_s``: ``2mnk / t_gemm(m, n, k)`` (16-bit GEMMs; FP8 GEMMs fall back unless
  the calibration sampled them, which the harness does not yet);
* ``attention_flop_per_s``: executed causal FLOPs / ``t_attention`` for ``batch·heads`` =
  ``attention_batch_heads`` (the Protocol does not pass it; default: the geometric middle of
  the sampled range);
* ``memory_bytes_per_s``: ``num_bytes / t_memory(num_bytes / engine_bytes_per_element)``, the
  pooled streaming model (the Protocol does not say which op asks);
* ``kernel_min_time_s``: the fastest sampled memory-bound call;
* ``collective_latency_s`` and ``bus_bandwidth_fraction``: from the fitted all-reduce curve
  (alpha; busbw / the tier's line rate when ``line_rate_bytes_per_s`` is given).

Everything else (and every query for another device, a low-precision GEMM, or a shape outside
the sampled domain) is answered by ``fallback`` (``DefaultEfficiency()``). ``describe()``
lists which Protocol members are calibrated and which fall back, and counts, per member, the
queries answered each way since construction or ``reset_usage()``: the provenance a prediction
made with this model should carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from planner.calibration.collectives import Collective, Tier
from planner.calibration.model import MEMORY_MODEL, Calibration, FittedOperator
from planner.calibration.ops import DTYPE_BYTES, OpKind, Pass, op_flops
from planner.errors import CalibrationError
from planner.perf import ops
from planner.perf.efficiency import CommKind, DefaultEfficiency, DeviceArrays, EfficiencyModel
from planner.perf.ops import Flag, Real

__all__ = ["CalibratedEfficiency", "EfficiencyProvenanceJson", "OperatorUseJson"]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

_OTHER_DEVICE = "other device"
_OUTSIDE = "outside sampled domain"
_LOW_PRECISION = "low-precision GEMM not sampled"
_BATCHED = "batched GEMM not sampled"
_NOT_FITTED = "operator not fitted"


class OperatorUseJson(TypedDict):
    """One operator of ``EfficiencyProvenanceJson``: its selected model and held-out mean
    absolute percentage error (a ratio; NaN when none was held out)."""

    model: str
    held_out_mape: float


class EfficiencyProvenanceJson(TypedDict):
    """``CalibratedEfficiency.describe``: the model's name, the scenarios' device key, the
    calibration's sampling metadata, the sampled dtype, the attention batch-heads used, the
    calibrated and fallback members, the fallback model's class name, each operator's model
    and the query counts per member (``calibrated`` and each fallback reason)."""

    efficiency_model: str
    device_key: str
    calibration: dict[str, object]
    dtype: str
    attention_batch_heads: float
    calibrated: list[str]
    fallback: list[str]
    fallback_model: str
    operators: dict[str, OperatorUseJson]
    queries: dict[str, dict[str, int]]


_ALWAYS_FALLBACK = (
    "moe_imbalance_factor",
    "memory_overhead_bytes",
    "memory_fragmentation_fraction",
    "elementwise_traffic_factor",
    "comm_overlap",
)


class CalibratedEfficiency:
    """An ``EfficiencyModel`` backed by a ``Calibration`` of one device (module docstring).

    ``device_key`` is the catalog key scenarios on the calibrated device carry
    (``DeviceArrays.gpu_keys``); ``dtype`` the sampled dtype used for GEMM/attention queries
    (default: 16-bit if sampled, else the calibration's only dtype); ``engine_bytes_per_element``
    the element size the engine counts memory traffic in (16-bit activations: 2).
    ``line_rate_bytes_per_s`` maps tier (``"scale_up"``/``"scale_out"``) to the per-GPU line
    rate the engine multiplies ``bus_bandwidth_fraction`` with. The Protocol's scalar members
    (``kernel_min_time_s``, ``collective_latency_s``, ``bus_bandwidth_fraction``) cannot differ
    between the scenarios of a batch: with ``calibrated_scalars`` (default) they come from the
    calibration for *every* scenario, so use the model on batches of the calibrated device, or
    pass False to keep the fallback's values. Raises ``CalibrationError`` when ``dtype`` was
    not sampled.
    """

    def __init__(
        self,
        calibration: Calibration,
        *,
        device_key: str,
        fallback: EfficiencyModel | None = None,
        dtype: str | None = None,
        engine_bytes_per_element: float = 2.0,
        attention_batch_heads: float | None = None,
        line_rate_bytes_per_s: Mapping[str, float] | None = None,
        calibrated_scalars: bool = True,
    ) -> None:
        self.calibration = calibration
        self.device_key = device_key
        self.fallback: EfficiencyModel = fallback if fallback is not None else DefaultEfficiency()
        sampled = sorted({d for op in calibration.operators.values() for d in op.dtypes})
        if dtype is None:
            sixteen = [d for d in sampled if DTYPE_BYTES[d] == 2.0]
            dtype = sixteen[0] if sixteen else (sampled[0] if sampled else "bfloat16")
        elif dtype not in sampled:
            raise CalibrationError(f"dtype {dtype!r} was not sampled; sampled: {sampled}")
        self.dtype = dtype
        self.dtype_bytes = DTYPE_BYTES[dtype]
        self.engine_bytes_per_element = engine_bytes_per_element
        attn = calibration.operator("attention/fwd")
        if attention_batch_heads is None and attn is not None:
            lo, hi = attn.domain_low[0], attn.domain_high[0]  # log2_batch_heads
            attention_batch_heads = float(2.0 ** round((lo + hi) / 2.0))
        self.attention_batch_heads = attention_batch_heads or 1.0
        self.line_rate_bytes_per_s = dict(line_rate_bytes_per_s or {})
        self.calibrated_scalars = calibrated_scalars
        self._usage: dict[str, dict[str, int]] = {}

    # ---- provenance ---------------------------------------------------------------------
    def _count(self, member: str, mask: BoolArray, reasons: Mapping[str, BoolArray]) -> None:
        entry = self._usage.setdefault(member, {"calibrated": 0})
        entry["calibrated"] += int(np.count_nonzero(mask))
        for reason, where in reasons.items():
            hits = int(np.count_nonzero(where))
            if hits:
                entry[reason] = entry.get(reason, 0) + hits

    def reset_usage(self) -> None:
        """Forget the query counts ``describe()`` reports."""
        self._usage.clear()

    def _members(self) -> tuple[list[str], list[str]]:
        cal = self.calibration
        calibrated: list[str] = []
        if cal.operator("gemm/fwd") is not None:
            calibrated.append("gemm_flop_per_s")
        if cal.operator("attention/fwd") is not None and cal.operator("attention/bwd") is not None:
            calibrated.append("attention_flop_per_s")
        if cal.operator(MEMORY_MODEL) is not None:
            calibrated.append("memory_bytes_per_s")
        if "kernel_min_time_s" in cal.measured and self.calibrated_scalars:
            calibrated.append("kernel_min_time_s")
        if self._all_reduce() is not None and self.calibrated_scalars:
            calibrated.append("collective_latency_s")
            if self.line_rate_bytes_per_s:
                calibrated.append("bus_bandwidth_fraction")
        everything = [
            "gemm_flop_per_s",
            "attention_flop_per_s",
            "memory_bytes_per_s",
            "kernel_min_time_s",
            "collective_latency_s",
            "bus_bandwidth_fraction",
            *_ALWAYS_FALLBACK,
        ]
        return calibrated, [m for m in everything if m not in calibrated]

    def describe(self) -> EfficiencyProvenanceJson:
        """Provenance: the calibration used, calibrated vs fallback members, query counts."""
        calibrated, fallback = self._members()
        dev = self.calibration.device
        return {
            "efficiency_model": "CalibratedEfficiency",
            "device_key": self.device_key,
            "calibration": {
                k: dev.get(k)
                for k in (
                    "device",
                    "device_name",
                    "torch_version",
                    "cuda_version",
                    "num_threads",
                    "hostname",
                    "sampled_from",
                    "sampled_to",
                )
                if k in dev
            },
            "dtype": self.dtype,
            "attention_batch_heads": self.attention_batch_heads,
            "calibrated": calibrated,
            "fallback": fallback,
            "fallback_model": type(self.fallback).__name__,
            "operators": {
                name: {"model": op.regressor.selected_, "held_out_mape": op.held_out.mape}
                for name, op in self.calibration.operators.items()
            },
            "queries": {k: dict(v) for k, v in sorted(self._usage.items())},
        }

    # ---- helpers ------------------------------------------------------------------------
    def _mine(self, device: DeviceArrays) -> BoolArray:
        keys = np.asarray([k == self.device_key for k in device.gpu_keys], dtype=np.bool_)
        out: BoolArray = keys[device.gpu_index] if keys.size else np.zeros(0, dtype=np.bool_)
        return out

    def _predict(
        self, op: FittedOperator, dims: Mapping[str, FloatArray], shape: tuple[int, ...]
    ) -> tuple[FloatArray, BoolArray]:
        """(seconds, inside domain) of calls with broadcast ``dims``, shape ``shape``."""
        full = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for k, v in dims.items()}
        x = op.features(full, self.dtype_bytes)
        inside = op.in_domain(x)
        t = np.ones(x.shape[0])
        if inside.any():
            t[inside] = op.predict_time_s(x[inside])
        return t.reshape(shape), inside.reshape(shape)

    def _all_reduce(self) -> Any:
        return self.calibration.collective(Collective.ALL_REDUCE)

    # ---- EfficiencyModel ----------------------------------------------------------------
    @property
    def kernel_min_time_s(self) -> float:
        """The fastest sampled memory-bound call (fallback's when not measured)."""
        value = self.calibration.measured.get("kernel_min_time_s")
        if value is None or not self.calibrated_scalars:
            return self.fallback.kernel_min_time_s
        return float(value)

    @property
    def collective_latency_s(self) -> float:
        """Alpha of the fitted all-reduce curve (smallest group), else the fallback's."""
        ar = self._all_reduce()
        if ar is None or not self.calibrated_scalars:
            return self.fallback.collective_latency_s
        return float(ar.alpha_s)

    @property
    def moe_imbalance_factor(self) -> float:
        """Fallback's (not sampled)."""
        return self.fallback.moe_imbalance_factor

    @property
    def memory_overhead_bytes(self) -> float:
        """Fallback's (not sampled)."""
        return self.fallback.memory_overhead_bytes

    @property
    def memory_fragmentation_fraction(self) -> float:
        """Fallback's (not sampled)."""
        return self.fallback.memory_fragmentation_fraction

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
        """``2mnk / t_gemm`` on the calibrated device inside the domain, else fallback
        (batched launches, ``batch`` > 1, always fall back: the samples time plain GEMMs)."""
        base = self.fallback.gemm_flop_per_s(
            m, n, k, device, low_precision=low_precision, batch=batch
        )
        shape = np.shape(base)
        mine = np.broadcast_to(self._mine(device), shape)
        low = np.broadcast_to(np.asarray(low_precision, dtype=np.bool_), shape)
        op = self.calibration.operator("gemm/fwd")
        if op is None:
            self._count("gemm_flop_per_s", np.zeros(shape, bool), {_NOT_FITTED: mine})
            return base
        mm, nn, kk = (np.maximum(np.broadcast_to(v, shape), 1.0) for v in (m, n, k))
        t, inside = self._predict(op, {"m": mm, "n": nn, "k": kk}, shape)
        batched = np.broadcast_to(np.asarray(batch) > 1.0, shape)
        plain = mine & ~low & ~batched
        use = plain & inside
        self._count(
            "gemm_flop_per_s",
            use,
            {
                _OTHER_DEVICE: ~mine,
                _LOW_PRECISION: mine & low,
                _BATCHED: mine & ~low & batched,
                _OUTSIDE: plain & ~inside,
            },
        )
        out: FloatArray = np.where(use, 2.0 * mm * nn * kk / t, base)
        return ops.unbox(out)

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
        """Executed FLOPs / ``t_attention`` at ``attention_batch_heads`` (module docstring);
        ``fused``/``flash_v1`` only matter for the fallback: the sampled kernel is whatever
        the device's PyTorch picks."""
        base = self.fallback.attention_flop_per_s(
            seq_kv, device, backward=backward, fused=fused, head_dim=head_dim, flash_v1=flash_v1
        )
        shape = np.shape(base)
        mine = np.broadcast_to(self._mine(device), shape)
        pass_ = Pass.BACKWARD if backward else Pass.FORWARD
        op = self.calibration.operator(f"attention/{pass_}")
        if op is None:
            self._count("attention_flop_per_s", np.zeros(shape, bool), {_NOT_FITTED: mine})
            return base
        hd = np.asarray(128.0 if head_dim is None else head_dim, dtype=np.float64)
        dims = {
            "batch": np.asarray(self.attention_batch_heads),
            "heads": np.asarray(1.0),
            "seq": np.maximum(np.asarray(seq_kv, dtype=np.float64), 1.0),
            "head_dim": np.maximum(hd, 1.0),
        }
        t, inside = self._predict(op, dims, shape)
        full = {k: np.broadcast_to(v, shape) for k, v in dims.items()}
        flops = op_flops(OpKind.ATTENTION, pass_, full)
        use = mine & inside
        self._count("attention_flop_per_s", use, {_OTHER_DEVICE: ~mine, _OUTSIDE: mine & ~inside})
        out: FloatArray = np.where(use, flops / t, base)
        return ops.unbox(out)

    def elementwise_traffic_factor(self, fused: Flag) -> Real:
        """Fallback's (the sampled ops are eager PyTorch kernels either way)."""
        return self.fallback.elementwise_traffic_factor(fused)

    def memory_bytes_per_s(self, num_bytes: Real, device: DeviceArrays) -> Real:
        """``num_bytes / t_memory`` from the pooled streaming model (module docstring)."""
        base = self.fallback.memory_bytes_per_s(num_bytes, device)
        shape = np.shape(base)
        mine = np.broadcast_to(self._mine(device), shape)
        op = self.calibration.operator(MEMORY_MODEL)
        if op is None:
            self._count("memory_bytes_per_s", np.zeros(shape, bool), {_NOT_FITTED: mine})
            return base
        nb = np.maximum(np.broadcast_to(np.asarray(num_bytes, dtype=np.float64), shape), 1.0)
        t, inside = self._predict(op, {"elements": nb / self.engine_bytes_per_element}, shape)
        use = mine & inside
        self._count("memory_bytes_per_s", use, {_OTHER_DEVICE: ~mine, _OUTSIDE: mine & ~inside})
        out: FloatArray = np.where(use, nb / t, base)
        return ops.unbox(out)

    def bus_bandwidth_fraction(self, *, scale_up: Flag) -> Real:
        """Fitted all-reduce busbw / the tier's line rate, where both are known."""
        base = self.fallback.bus_bandwidth_fraction(scale_up=scale_up)
        if not self.calibrated_scalars:
            return base
        up = np.asarray(scale_up, dtype=np.bool_)
        out = np.array(base, dtype=np.float64, copy=True)
        for tier, where in ((Tier.SCALE_UP, up), (Tier.SCALE_OUT, ~up)):
            model = self.calibration.collective(Collective.ALL_REDUCE, tier=tier)
            rate = self.line_rate_bytes_per_s.get(str(tier))
            if model is None or rate is None or not math.isfinite(model.bus_bandwidth_bytes_per_s):
                continue
            out = np.where(where, model.bus_bandwidth_bytes_per_s / rate, out)
        return ops.unbox(out)

    def comm_overlap(self, kind: CommKind) -> float:
        """Fallback's (overlap is a property of the framework, not of a sampled operator)."""
        return self.fallback.comm_overlap(kind)


def _protocol_check(model: CalibratedEfficiency) -> EfficiencyModel:
    return model  # mypy: CalibratedEfficiency satisfies the engine's Protocol
