"""The operator table: GEMMs and memory-bound kernels of one microbatch, timed in one vectorized
call each and summed per group (an ``OperatorTimes`` field name of ``planner.perf.operators``).

Each op takes ``max(FLOPs / achieved FLOP/s, bytes / achieved bytes/s, kernels ·
kernel_min_time_s)`` (``EfficiencyModel``). A GEMM reads its operands and writes its output:
``(a·(m·k + k·n) + o·m·n)`` bytes, ``a`` 1 for low-precision operands, else 2; ``o`` 2 (a
16-bit output), except a weight gradient under the framework's ``wgrad_accumulation_fusion``
(``planner.perf.frameworks``): the GEMM adds into the gradient buffer (``beta = 1``), reading and
writing it, ``o = 2·grad_bytes_per_param`` (8 for fp32 main gradients). With few tokens per GEMM
(a fine-grained expert's ``m`` of a few hundred) that traffic, not the FLOPs, sets the time: the
weight gradient of an ``(h, f)`` expert weight from ``m`` tokens does ``2·m·h·f`` FLOPs against
``8·h·f`` bytes, memory-bound on an H100 SXM (989 TFLOP/s dense bf16 over 3.35 TB/s, NVIDIA H100
datasheet: about 300 FLOP/byte) below ``m`` ≈ 1,200 (measured: ``benchmarks/moe_layer_h100.py``,
``wgrad``).

A block-scaled GEMM (MXFP8, NVFP4) adds Transformer Engine's two scale-swizzle kernels per
GEMM call (a grouped GEMM's call covers all its experts), one per operand, each at least
``kernel_min_time_s`` (``planner.perf.precision.scale_swizzle_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.ops import Flag, FloatArray, Real
from planner.perf.precision import gemm_relative_efficiency, scale_swizzle_bytes
from planner.specs.parallelism import Fp8Recipe

__all__ = ["LayerGroups", "OperatorTable"]

_BLOCKWISE = Fp8Recipe.BLOCKWISE.code


class OperatorTable:
    """Accumulates operator times per group (an ``OperatorTimes`` field name): GEMMs and
    memory-bound kernels are timed in one vectorized call each (shape ``(num_ops, n)``,
    ``(num_ops,)`` for one scenario). Shapes may be numbers or ``(n,)`` arrays; they are
    broadcast once, when timed."""

    def __init__(self, a: ScenarioArrays, eff: EfficiencyModel) -> None:
        self.a, self.eff = a, eff
        self.gemm_groups: list[str] = []
        self.gemm_m: list[Any] = []
        self.gemm_n: list[Any] = []
        self.gemm_k: list[Any] = []
        self.gemm_count: list[Any] = []
        self.gemm_low_precision: list[Any] = []
        self.gemm_batch: list[Any] = []
        self.gemm_out_bytes: list[Any] = []
        self.gemm_calls: list[Any] = []
        self.gemm_routed: list[Any] = []
        self.mem_groups: list[str] = []
        self.mem_bytes: list[Any] = []
        self.mem_kernels: list[Any] = []
        self.mem_routed: list[Any] = []
        self.has_routed = False
        self.extra: dict[str, Real] = {}
        self.routed_s: dict[str, Real] = {}
        """After ``totals``, once an op was registered with a ``routed`` share: per group, the
        seconds of its ops' routed shares (the routed experts' part of the group's seconds;
        empty when no op had one)."""
        # bytes per weight-gradient element: read and written in the gradient buffer's dtype
        # under gradient-accumulation fusion, else one 16-bit write (module docstring)
        self._wgrad_out_bytes: Real = ops.where(
            a.wgrad_accumulation_fusion, 2.0 * a.grad_bytes_per_param, 2.0
        )

    def gemm(
        self,
        group: str,
        m: Real,
        n: Real,
        k: Real,
        *,
        count: Real = 1.0,
        lp: Flag,
        backward: bool = False,
        batched: bool = False,
        per_launch: Real | None = None,
        wgrad: Flag = True,
        calls: Real | None = None,
        routed: Real | None = None,
    ) -> None:
        """Register ``count`` GEMMs ``(m x k) @ (k x n)`` (with ``backward``: their dgrad and,
        where ``wgrad`` (per scenario: false for frozen weights), their wgrad); ``lp``: in the
        low (FP8-class) GEMM precision; ``batched``: the ``count`` products run as one
        strided-batched launch; ``per_launch`` (per scenario, overrides ``batched``): products
        per launch, e.g. ``count`` for a grouped GEMM, 1 for one launch each; ``calls`` (per
        scenario): GEMM library calls a direction, each swizzling its operands' block scales
        once (a grouped GEMM: one call however many launches; default: one per launch);
        ``routed`` (0 to 1, per scenario): the share of their seconds that is the routed
        experts' (``routed_totals``)."""
        self.has_routed = self.has_routed or routed is not None
        shapes = ((m, n, k),) if not backward else ((m, k, n), (k, n, m))  # dgrad, wgrad
        batch = per_launch if per_launch is not None else (count if batched else 1.0)
        for i, (rows, cols, inner) in enumerate(shapes):
            self.gemm_groups.append(group)
            self.gemm_m.append(rows)
            self.gemm_n.append(cols)
            self.gemm_k.append(inner)
            # a frozen weight (``wgrad`` false for a scenario) has no weight-gradient product
            share = 1.0 if i == 0 or wgrad is True else ops.where(wgrad, 1.0, 0.0)
            self.gemm_count.append(count * share)
            self.gemm_low_precision.append(lp)
            self.gemm_batch.append(batch)
            per_direction = count / ops.maximum(batch, 1.0) if calls is None else calls
            self.gemm_calls.append(per_direction * share)
            self.gemm_routed.append(0.0 if routed is None else routed)
            # the second backward product is a weight gradient, except for batched products of
            # two activations (attention scores without flash attention)
            weight_grad = backward and i == 1 and not batched
            self.gemm_out_bytes.append(self._wgrad_out_bytes if weight_grad else 2.0)

    def mem(
        self, group: str, num_bytes: Real, kernels: Real, *, routed: Real | None = None
    ) -> None:
        """Register a memory-bound op moving ``num_bytes`` of HBM traffic in ``kernels``
        launches (each at least ``kernel_min_time_s``; a number, or per scenario); ``routed``
        as ``gemm``'s."""
        self.has_routed = self.has_routed or routed is not None
        self.mem_groups.append(group)
        self.mem_bytes.append(num_bytes)
        self.mem_kernels.append(kernels)
        self.mem_routed.append(0.0 if routed is None else routed)

    def add(self, group: str, seconds: Real) -> None:
        """Add ``seconds`` already timed elsewhere (flash attention) to ``group``."""
        self.extra[group] = self.extra.get(group, 0.0) + seconds

    def _table(self, column: list[Any], dtype: type[np.generic]) -> NDArray[Any]:
        """One row per op: ``(num_ops, n)``, or ``(num_ops,)`` when every entry is a number."""
        if self.a.scalar:
            return np.array(column, dtype=dtype)
        out = np.empty((len(column), self.a.num_scenarios), dtype=dtype)
        for i, value in enumerate(column):
            out[i] = value
        return out

    def gemm_flops(self, group: str) -> Real:
        """FLOPs of the GEMMs registered under ``group``, shape ``(n,)``."""
        total = self.a.full(0.0)
        for i, each in enumerate(self.gemm_groups):
            if each == group:
                m, n, k = self.gemm_m[i], self.gemm_n[i], self.gemm_k[i]
                total = total + 2.0 * m * n * k * self.gemm_count[i]
        return total

    @staticmethod
    def _sum_groups(groups: list[str], t: FloatArray, out: dict[str, Real]) -> None:
        index: dict[str, list[int]] = {}
        for i, g in enumerate(groups):
            index.setdefault(g, []).append(i)
        rows_t: Any = t.tolist() if t.ndim == 1 else t  # one scenario: Python floats
        for g, rows in index.items():
            # sequential rather than pairwise: ops that are zero for a scenario (and skipped
            # when no scenario of the batch has them) never change its rounding
            part = rows_t[rows[0]]
            for i in rows[1:]:
                part = part + rows_t[i]
            out[g] = out[g] + part if g in out else part

    def totals(self) -> dict[str, Real]:
        """Seconds per group; each op ``max(compute, memory, kernels · kernel_min)``. Sets
        ``routed_s``."""
        eff, a = self.eff, self.a
        kmin = eff.kernel_min_time_s
        out: dict[str, Real] = {}
        routed: dict[str, Real] = {}
        if self.gemm_groups:
            m = self._table(self.gemm_m, np.float64)
            n = self._table(self.gemm_n, np.float64)
            k = self._table(self.gemm_k, np.float64)
            cnt = self._table(self.gemm_count, np.float64)
            low = self._table(self.gemm_low_precision, np.bool_)
            batch = self._table(self.gemm_batch, np.float64)
            out_b = self._table(self.gemm_out_bytes, np.float64)
            rate = eff.gemm_flop_per_s(m, n, k, a.device, low_precision=low, batch=batch)
            if ops.any_(a.fp8_recipe == _BLOCKWISE):  # block scales promoted in the main loop
                rate = rate * np.where(low, gemm_relative_efficiency(a), 1.0)
            flops = 2.0 * m * n * k * cnt
            bytes_ = (np.where(low, 1.0, 2.0) * (m * k + k * n) + out_b * m * n) * cnt
            bw = eff.memory_bytes_per_s(bytes_, a.device)
            launches = cnt / np.maximum(batch, 1.0)
            t = np.maximum(np.maximum(flops / rate, bytes_ / bw), launches * kmin)
            swizzle = scale_swizzle_bytes(a)
            if ops.any_(swizzle > 0):  # one scale-swizzle kernel per operand and GEMM call
                calls = self._table(self.gemm_calls, np.float64)
                for elements in (m * k * cnt, k * n * cnt):
                    scale_b = np.where(low, 2.0 * swizzle * elements, 0.0)
                    swz_bw = eff.memory_bytes_per_s(np.maximum(scale_b, 1.0), a.device)
                    swz_t = np.maximum(scale_b / swz_bw, calls * kmin)
                    t = t + np.where(scale_b > 0, swz_t, 0.0)
            t = np.where((cnt > 0) & (m * n * k > 0), t, 0.0)
            self._sum_groups(self.gemm_groups, t, out)
            if self.has_routed:
                share = self._table(self.gemm_routed, np.float64)
                self._sum_groups(self.gemm_groups, t * share, routed)
        if self.mem_groups:
            b = self._table(self.mem_bytes, np.float64)
            kern = self._table(self.mem_kernels, np.float64)
            bw = eff.memory_bytes_per_s(np.maximum(b, 1.0), a.device)
            t = np.where(b > 0, np.maximum(b / bw, kern * kmin), 0.0)
            self._sum_groups(self.mem_groups, t, out)
            if self.has_routed:
                share = self._table(self.mem_routed, np.float64)
                self._sum_groups(self.mem_groups, t * share, routed)
        for g, sec in self.extra.items():
            out[g] = out[g] + sec if g in out else sec
        zero = a.full(0.0)
        self.routed_s = {g: v + zero for g, v in routed.items()}
        return {g: v + zero for g, v in out.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerGroups:
    """The ``OperatorTimes`` fields one layer kind's operators are registered under."""

    forward: str
    backward: str
    recompute: str
    module_recompute: str
