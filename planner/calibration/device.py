"""A device description (``GpuSpec``) of a sampled device that has no catalog entry.

The engine takes its peaks from the GPU catalog, which lists datasheet values of GPUs only. To
predict a job on a device that was sampled but is not in the catalog (this CPU, in the
end-to-end test), ``device_spec`` builds the entry from what the samples *measured*:

* ``dense_peak_flop_per_s``: the fastest sampled GEMM, FLOP/s, entered for ``bf16`` and
  ``fp16``: ``Precision`` has no ``fp32``, so a float32 calibration's peak stands in for the
  16-bit one (the engine only uses it as "the GEMM peak of the training precision");
* ``hbm_bandwidth_bytes_per_s``: the streaming bandwidth beyond the caches;
* ``hbm_bytes``: the device memory the sampling run recorded;
* scale-up link: bandwidth = the fitted all-reduce bus bandwidth, per-hop latency 1 ns (the
  fitted latency is carried by ``CalibratedEfficiency.collective_latency_s``), a domain of the
  sampled group size; the scale-out link copies it (one host);
* ``architecture`` ``"ampere"`` (the catalog's generic choice: no Hopper-only kernels),
  ``num_sms`` the sampling threads (one wave per GEMM tile).

Measured peaks are *achieved* values, not datasheet ones, so the analytic model's peak
fractions (0.85 on "ampere") are applied on top of them: the uncalibrated prediction with this
spec is what the analytic model would say if the datasheet were replaced by one measurement.
"""

from __future__ import annotations

from planner.calibration.collectives import Collective
from planner.calibration.model import Calibration
from planner.errors import CalibrationError
from planner.specs.hardware import GpuSpec, Precision

__all__ = ["device_spec"]

_DEFAULT_LINK_BYTES_PER_S = 1e9


def device_spec(calibration: Calibration, *, key: str = "sampled-device") -> GpuSpec:
    """The ``GpuSpec`` of the sampled device (module docstring); ``CalibrationError`` when the
    calibration lacks GEMM or streaming samples."""
    measured = calibration.measured
    peak = measured.get("peak_flop_per_s")
    bandwidth = measured.get("memory_bandwidth_bytes_per_s")
    if peak is None or bandwidth is None:
        raise CalibrationError(
            "a device spec needs GEMM and streaming (add/activation) samples; sample them first"
        )
    dev = calibration.device
    ar = calibration.collective(Collective.ALL_REDUCE)
    link = ar.bus_bandwidth_bytes_per_s if ar is not None else _DEFAULT_LINK_BYTES_PER_S
    if link == float("inf"):
        link = _DEFAULT_LINK_BYTES_PER_S
    ranks = ar.num_ranks if ar is not None else 1
    threads = int(dev.get("num_threads") or 1)
    name = str(dev.get("device_name") or dev.get("device") or key)
    source = (
        f"measured by planner calibrate sample on {dev.get('hostname', '?')} "
        f"({dev.get('sampled_from', '?')}, torch {dev.get('torch_version', '?')}, "
        f"{threads} thread(s))"
    )
    return GpuSpec(
        key=key,
        name=f"{name} (sampled)",
        dense_peak_flop_per_s=((Precision.BF16, float(peak)), (Precision.FP16, float(peak))),
        hbm_bytes=float(dev.get("device_memory_bytes") or 16 * 2**30),
        hbm_bandwidth_bytes_per_s=float(bandwidth),
        scale_up_bandwidth_bytes_per_s=float(link),
        nvlink_domain_size=max(ranks, 1),
        gpus_per_node=max(ranks, 1),
        scale_out_bandwidth_bytes_per_s=float(link),
        architecture="ampere",
        num_sms=max(threads, 1),
        scale_up_latency_s=1e-9,
        scale_out_latency_s=1e-9,
        sources=(
            ("dense_peak_flop_per_s", f"fastest sampled GEMM; {source}"),
            ("hbm_bandwidth_bytes_per_s", f"streaming add/activation beyond caches; {source}"),
            ("scale_up_bandwidth_bytes_per_s", f"fitted all-reduce busbw; {source}"),
        ),
    )
