"""GPU catalog entries and the cluster a scenario runs on (SI units throughout)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from planner.errors import SpecError
from planner.specs._checks import require_int, require_number


class Precision(StrEnum):
    """Datatype of the matrix multiplications (Megatron ``--bf16``, ``--fp16``, ``--fp8-format``;
    ``mxfp8``/``nvfp4`` are Blackwell block-scaled formats)."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"


_ARCHITECTURES = ("ampere", "hopper", "blackwell", "cdna3")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """One GPU SKU from the catalog (``planner/catalog/gpus.yaml``), in SI units.

    ``dense_peak_flop_per_s`` pairs each supported precision with its dense (no 2:4 sparsity)
    tensor-core peak, FLOP/s. Bandwidths are per GPU and one direction, bytes/s:
    ``scale_up_bandwidth_bytes_per_s`` inside an NVLink / Infinity Fabric domain of
    ``nvlink_domain_size`` GPUs, ``scale_out_bandwidth_bytes_per_s`` over the NICs,
    ``host_link_bandwidth_bytes_per_s`` to host memory (PCIe or NVLink-C2C, the GPU's share
    when GPUs share it; None where the catalog has no figure), the rate of activation-offload
    copies (``planner.perf.offload``). ``sfu_exp2_per_s`` is the special function units'
    rate of base-2 exponentials (``MUFU.EX2``), per second: the softmax's exponential in flash
    attention (``planner.perf.attention``); None where the catalog has no figure.
    ``architecture`` (``ampere``, ``hopper``, ``blackwell``, ``cdna3``) and ``num_sms``
    (streaming multiprocessors / compute units) drive the GEMM efficiency model;
    ``scale_up_latency_s`` / ``scale_out_latency_s`` are the per-hop latencies of a collective
    step over NVLink and over the NIC. ``sources`` maps each value's name to its public source.
    """

    key: str
    name: str
    dense_peak_flop_per_s: tuple[tuple[Precision, float], ...]
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    scale_up_bandwidth_bytes_per_s: float
    nvlink_domain_size: int
    gpus_per_node: int
    scale_out_bandwidth_bytes_per_s: float
    architecture: str = "hopper"
    num_sms: int = 132
    scale_up_latency_s: float = 1e-6
    scale_out_latency_s: float = 4e-6
    host_link_bandwidth_bytes_per_s: float | None = None
    sfu_exp2_per_s: float | None = None
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        path = f"gpu[{self.key}]"
        if not self.dense_peak_flop_per_s:
            raise SpecError(f"{path}.dense_peak_flop_per_s", "needs at least one precision")
        for precision, peak in self.dense_peak_flop_per_s:
            require_number(f"{path}.dense_peak_flop_per_s.{precision}", peak)
        for name in (
            "hbm_bytes",
            "hbm_bandwidth_bytes_per_s",
            "scale_up_bandwidth_bytes_per_s",
            "scale_out_bandwidth_bytes_per_s",
            "scale_up_latency_s",
            "scale_out_latency_s",
        ):
            require_number(f"{path}.{name}", getattr(self, name))
        if self.host_link_bandwidth_bytes_per_s is not None:
            require_number(
                f"{path}.host_link_bandwidth_bytes_per_s", self.host_link_bandwidth_bytes_per_s
            )
        if self.sfu_exp2_per_s is not None:
            require_number(f"{path}.sfu_exp2_per_s", self.sfu_exp2_per_s)
        require_int(f"{path}.num_sms", self.num_sms)
        if self.architecture not in _ARCHITECTURES:
            raise SpecError(
                f"{path}.architecture",
                f"must be one of {', '.join(_ARCHITECTURES)}, got {self.architecture!r}",
            )
        require_int(f"{path}.nvlink_domain_size", self.nvlink_domain_size)
        require_int(f"{path}.gpus_per_node", self.gpus_per_node)

    @property
    def precisions(self) -> tuple[Precision, ...]:
        """The precisions this GPU has tensor-core support for."""
        return tuple(p for p, _ in self.dense_peak_flop_per_s)

    def supports(self, precision: Precision) -> bool:
        """True when the GPU has a tensor-core peak for ``precision``."""
        return precision in self.precisions

    def peak_flop_per_s(self, precision: Precision) -> float:
        """Dense tensor-core peak for ``precision``, FLOP/s; ``SpecError`` when unsupported."""
        for p, peak in self.dense_peak_flop_per_s:
            if p is precision:
                return peak
        supported = ", ".join(self.precisions)
        why = _MISSING_PRECISION.get((self.architecture, precision), "")
        raise SpecError(
            "parallelism.precision",
            f"{self.key} has no {precision} tensor cores{why}; use one of {supported}",
        )


_MISSING_PRECISION: dict[tuple[str, Precision], str] = {
    ("ampere", Precision.FP8): " (FP8 tensor cores arrived with Hopper)",
    ("ampere", Precision.MXFP8): " (block-scaled MXFP8 needs Blackwell tensor cores)",
    ("ampere", Precision.NVFP4): " (NVFP4 needs Blackwell tensor cores)",
    ("hopper", Precision.MXFP8): (
        " (block-scaled MXFP8 needs Blackwell tensor cores; on Hopper, fp8 with "
        "parallelism.fp8_recipe blockwise scales 1x128/128x128 blocks in software)"
    ),
    ("hopper", Precision.NVFP4): " (NVFP4 needs Blackwell tensor cores; on Hopper use fp8)",
    ("cdna3", Precision.MXFP8): " (MX formats arrive with CDNA 4, MI350 series)",
    ("cdna3", Precision.NVFP4): " (NVFP4 is an NVIDIA Blackwell format)",
}
"""Why an architecture lacks a precision, for the error message (vendor architecture docs:
NVIDIA Hopper and Blackwell whitepapers, AMD CDNA 3 / CDNA 4 white papers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareSpec:
    """The GPUs a scenario runs on.

    ``gpu`` is the resolved catalog entry; ``gpus_per_node``, ``nvlink_domain_size`` and
    ``inter_node_bandwidth_gbit_per_s`` (per GPU, one direction, the scenario-format unit)
    default to the catalog's values when the scenario leaves them out.
    ``memory_headroom_gib`` (extra field): memory a layout leaves free beyond its predicted
    peak to count as fitting, GiB; None takes the default (``planner.perf.memory``).
    """

    gpu: GpuSpec
    num_gpus: int
    gpus_per_node: int
    nvlink_domain_size: int
    inter_node_bandwidth_gbit_per_s: float
    memory_headroom_gib: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.gpu, GpuSpec):
            raise SpecError("hardware.gpu", f"must be a catalog GPU, got {self.gpu!r}")
        require_int("hardware.num_gpus", self.num_gpus)
        require_int("hardware.gpus_per_node", self.gpus_per_node)
        require_int("hardware.nvlink_domain_size", self.nvlink_domain_size)
        require_number(
            "hardware.inter_node_bandwidth_gbit_per_s", self.inter_node_bandwidth_gbit_per_s
        )
        if self.memory_headroom_gib is not None:
            require_number("hardware.memory_headroom_gib", self.memory_headroom_gib, positive=False)
            if self.memory_headroom_gib < 0:
                raise SpecError(
                    "hardware.memory_headroom_gib",
                    f"must be >= 0 GiB, got {self.memory_headroom_gib}",
                )

    @property
    def inter_node_bandwidth_bytes_per_s(self) -> float:
        """Scale-out bandwidth per GPU, one direction, bytes/s."""
        return self.inter_node_bandwidth_gbit_per_s * 1e9 / 8.0

    @property
    def scale_up_bandwidth_bytes_per_s(self) -> float:
        """NVLink / Infinity Fabric bandwidth per GPU, one direction, bytes/s (catalog)."""
        return self.gpu.scale_up_bandwidth_bytes_per_s

    def bandwidth_for_group_bytes_per_s(self, span: int) -> float:
        """Per-GPU bandwidth of a collective whose ranks span ``span`` consecutive GPUs.

        Inside one NVLink domain (``span <= nvlink_domain_size``) the scale-up bandwidth applies,
        otherwise the ring crosses the scale-out network and runs at its per-GPU bandwidth.
        """
        if span <= self.nvlink_domain_size:
            return self.scale_up_bandwidth_bytes_per_s
        return self.inter_node_bandwidth_bytes_per_s
