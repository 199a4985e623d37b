"""Achievable fractions of peak: the knobs calibration will learn (issue 3 replaces the defaults).

``EfficiencyModel`` is the interface the step model uses; ``DefaultEfficiency`` is a first,
hand-set version whose constants are rough fits to published Megatron-LM runs (Korthikanti et al.
2022 Table 5 on A100; Megatron-LM README 2024 H100 table; NeMo 24.07 FP8 H100 table), documented
with each constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from planner.specs.hardware import Precision
from planner.specs.scenario import Scenario


class CommKind(StrEnum):
    """Communication classes whose overlap with compute is modelled separately."""

    TENSOR = "tp"
    CONTEXT = "cp"
    EXPERT = "ep"
    DATA = "dp"


class EfficiencyModel(Protocol):
    """Fractions of hardware peaks a scenario achieves; all results lie in ``(0, 1]``."""

    def compute_efficiency(self, scenario: Scenario, *, precision: Precision) -> float:
        """Fraction of the dense ``precision`` tensor-core peak reached by the model's GEMMs."""
        ...

    def network_efficiency(self, scenario: Scenario, *, scale_up: bool) -> float:
        """Achieved bus bandwidth / link bandwidth for collectives (NVLink or NIC)."""
        ...

    def comm_overlap(self, scenario: Scenario, kind: CommKind) -> float:
        """Fraction of a communication class hidden behind compute, in ``[0, 1]``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DefaultEfficiency:
    """Size-dependent compute efficiency and constant network/overlap fractions.

    ``compute_efficiency = max_fraction · h_l/(h_l + half_width) · n/(n + half_tokens)`` with
    ``h_l = hidden_size / tensor_parallel`` (GEMM width per GPU) and ``n`` tokens per microbatch
    and GPU: small GEMMs run far from peak (roofline / wave quantisation), large ones saturate.
    ``max_fraction`` 0.72 reproduces Korthikanti et al. 2022 Table 5 (175B, 13.75 s) and the
    Megatron-LM 2024 H100 table within ~15 %. FP8 GEMMs reach a lower fraction of their (2x)
    peak (NeMo 24.07 H100 FP8: 39 % MFU vs ~47 % in BF16): ``fp8_factor`` 0.7. AMD MI300-series
    ``vendor_factor`` 0.7 (public MI300X training reports reach roughly 0.5 of BF16 peak).
    Network: NCCL busbw is ~80 % of NVLink and ~90 % of InfiniBand line rate (nccl-tests on DGX).
    Overlap: Megatron overlaps DP gradient reduce-scatter with backward (``--overlap-grad-reduce``)
    but TP collectives only with ``--tp-comm-overlap``; context-parallel KV exchange is
    pipelined with attention (Megatron-Core ring attention).
    """

    max_fraction: float = 0.72
    half_width: float = 128.0
    half_tokens: float = 128.0
    fp8_factor: float = 0.7
    vendor_factor_amd: float = 0.7
    scale_up_fraction: float = 0.8
    scale_out_fraction: float = 0.9
    tp_overlap: float = 0.2
    cp_overlap: float = 0.8
    ep_overlap: float = 0.2
    dp_overlap: float = 0.8

    def compute_efficiency(self, scenario: Scenario, *, precision: Precision) -> float:
        """See the class docstring; always in ``(0, max_fraction]``."""
        m, par = scenario.model, scenario.parallelism
        width = m.hidden_size / par.tensor_parallel
        tokens = par.micro_batch_size * m.seq_length / par.context_parallel
        eff = self.max_fraction * width / (width + self.half_width)
        eff *= tokens / (tokens + self.half_tokens)
        if precision in (Precision.FP8, Precision.MXFP8, Precision.NVFP4):
            eff *= self.fp8_factor
        if scenario.hardware.gpu.key.startswith("mi"):
            eff *= self.vendor_factor_amd
        return eff

    def network_efficiency(self, scenario: Scenario, *, scale_up: bool) -> float:
        """Constant busbw fraction per network tier."""
        return self.scale_up_fraction if scale_up else self.scale_out_fraction

    def comm_overlap(self, scenario: Scenario, kind: CommKind) -> float:
        """Constant hidden fraction per communication class."""
        return {
            CommKind.TENSOR: self.tp_overlap,
            CommKind.CONTEXT: self.cp_overlap,
            CommKind.EXPERT: self.ep_overlap,
            CommKind.DATA: self.dp_overlap,
        }[kind]
