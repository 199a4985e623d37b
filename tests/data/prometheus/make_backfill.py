"""Write ``telemetry.om.gz``: one hour of dcgm-exporter GPU series and per-rank training series in
OpenMetrics text, for ``promtool tsdb create-blocks-from openmetrics`` (see README.md here).

Deterministic (fixed window, seeded noise): ``python tests/data/prometheus/make_backfill.py``
regenerates the committed file byte for byte.
"""

from __future__ import annotations

import gzip
import math
import random
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: 2026-11-20 10:00:00 UTC .. 11:00:00 UTC; dcgm-exporter scraped every 60 s, jobs every 15 s
START_S = 1_795_168_800
END_S = START_S + 3600
STEP_S = 60
H100_FB_TOTAL_MIB = 81_559  # DCGM_FI_DEV_FB_USED + FB_FREE + FB_RESERVED on an H100 80GB HBM3

DCGM_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_PROF_SM_ACTIVE": "The ratio of cycles an SM has at least 1 warp assigned (in %).",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "Ratio of cycles the tensor (HMMA) pipe is active.",
    "DCGM_FI_PROF_DRAM_ACTIVE": "Ratio of cycles the device memory interface is active.",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "The rate of data transmitted over the PCIe bus (bytes/s).",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "The rate of data received over the PCIe bus (bytes/s).",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "The rate of data transmitted over NVLink (bytes/s).",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "The rate of data received over NVLink (bytes/s).",
}


def _gpu(host: str, index: int, **extra: str) -> dict[str, str]:
    """Labels dcgm-exporter puts on a GPU metric (render_metrics.go template)."""
    uuid = f"GPU-{zlib.crc32(host.encode()):08x}-0000-4000-8000-{index:012d}"
    return {
        "gpu": str(index),
        "UUID": uuid,
        "pci_bus_id": f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        "device": f"nvidia{index}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "DCGM_FI_DRIVER_VERSION": "550.90.07",
        **extra,
    }


def gpus() -> list[tuple[dict[str, str], float]]:
    """(labels, activity factor) of every GPU in the file; factor < 1 marks a straggler GPU."""
    out: list[tuple[dict[str, str], float]] = []
    # 1. Kubernetes, dcgm-exporter Helm chart's ServiceMonitor (honorLabels: false): Prometheus
    #    keeps the exporter pod's namespace/pod/container and renames the workload's exported_*.
    for p, pod in enumerate(("llama-70b-workers-0-0", "llama-70b-workers-0-1")):
        for i in range(2):
            labels = _gpu(
                f"gpu-node-{p}",
                i,
                Hostname=f"gpu-node-{p}",
                container="nvidia-dcgm-exporter",
                namespace="gpu-operator",
                pod=f"nvidia-dcgm-exporter-{'ab'[p]}x7k2",
                exported_container="trainer",
                exported_namespace="research",
                exported_pod=pod,
                instance=f"10.0.{p}.15:9400",
                job="nvidia-dcgm-exporter",
            )
            out.append((labels, 0.55 if (p, i) == (1, 1) else 1.0))
    # 2. Kubernetes, honorLabels: true (the workload's labels kept as namespace/pod).
    for i in range(2):
        out.append(
            (
                _gpu(
                    "gpu-node-7",
                    i,
                    Hostname="gpu-node-7",
                    container="trainer",
                    namespace="team-b",
                    pod="mixtral-ft-0",
                    instance="10.0.7.15:9400",
                    job="dcgm",
                ),
                1.0,
            )
        )
    # 3. Slurm with the HPC job mapping (--hpc-job-mapping-dir), dcgm-exporter main (lowercase
    #    `hostname`, PR #655).
    for host in ("gpu-a01", "gpu-a02"):
        for i in range(2):
            labels = _gpu(host, i, hostname=host, hpc_job="4242", instance=f"{host}:9400")
            out.append((labels, 1.0))
    # 4. Slurm without job mapping, released dcgm-exporter (`Hostname`): matched by host and
    #    GPU index. gpu-b01 runs job 5151 on GPUs 0-1 and another job on GPUs 2-3.
    for i in range(4):
        labels = _gpu("gpu-b01", i, Hostname="gpu-b01", instance="gpu-b01:9400", job="dcgm")
        out.append((labels, 1.0 if i < 2 else 0.3))
    return out


def _gpu_value(metric: str, factor: float, t: int, rng: random.Random) -> float:
    wave = 0.02 * math.sin(2 * math.pi * (t - START_S) / 600)
    noise = rng.gauss(0.0, 0.01)
    if metric == "DCGM_FI_DEV_GPU_UTIL":
        return float(min(100, round(100 * min(1.0, 0.97 * factor + noise))))
    if metric == "DCGM_FI_PROF_SM_ACTIVE":
        return round(max(0.0, 0.82 * factor + wave + noise), 6)
    if metric == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":
        return round(max(0.0, 0.41 * factor + wave / 2 + noise / 2), 6)
    if metric == "DCGM_FI_PROF_DRAM_ACTIVE":
        return round(max(0.0, 0.35 * factor + noise), 6)
    used = round(71_240 * (0.6 + 0.4 * min(factor, 1.0)))
    if metric == "DCGM_FI_DEV_FB_USED":
        return float(used)
    if metric == "DCGM_FI_DEV_FB_FREE":
        return float(H100_FB_TOTAL_MIB - 542 - used)  # 542 MiB reserved
    if metric.startswith("DCGM_FI_PROF_PCIE"):
        return float(round(1.8e9 * factor * (1 + noise)))
    return float(round(1.2e11 * factor * (1 + noise)))  # NVLink


def _line(name: str, labels: dict[str, str], value: float, t: int) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    text = str(int(value)) if value.is_integer() else repr(value)
    return f"{name}{{{body}}} {text} {t}\n"


def main() -> None:
    rng = random.Random(20261120)
    lines: list[str] = []
    fleet = gpus()
    for metric, help_text in DCGM_HELP.items():
        lines.append(f"# HELP {metric} {help_text}\n# TYPE {metric} gauge\n")
        for labels, factor in fleet:
            for t in range(START_S, END_S + 1, STEP_S):
                lines.append(_line(metric, labels, _gpu_value(metric, factor, t, rng), t))

    # Training job 9001 on Slurm: 8 ranks, log interval 10 iterations of ~1.2 s; rank 5's node
    # slows down (compute x1.35) at 10:30; every rank's wall time follows the slowest rank.
    ranks = 8
    slow_rank, slow_from = 5, START_S + 1800
    series: dict[str, list[tuple[dict[str, str], float, int]]] = {}
    iteration = 0
    for t in range(START_S, END_S + 1, 15):
        iteration += 10  # one logging interval per 15 s scrape
        compute = [1.0 + 0.01 * rng.gauss(0, 1) for _ in range(ranks)]
        if t >= slow_from:
            compute[slow_rank] *= 1.35
        step = max(compute) + 0.2
        for r in range(ranks):
            labels = {
                "job": "training",
                "instance": f"gpu-c0{r // 4 + 1}:{9400 + r % 4}",
                "job_id": "9001",
                "node": f"gpu-c0{r // 4 + 1}",
                "rank": str(r),
            }
            for name, value in (
                ("training_iteration", float(iteration)),
                ("training_target_iterations", 50_000.0),
                ("training_step_time_seconds", round(step, 6)),
                ("training_compute_time_seconds", round(compute[r], 6)),
                ("training_interval_iterations", 10.0),
                ("training_world_size", float(ranks)),
                ("training_last_interval_timestamp_seconds", float(t)),
            ):
                series.setdefault(name, []).append((labels, value, t))
    for name, samples in series.items():
        lines.append(f"# HELP {name} Training metric exported by job_exporter.\n")
        lines.append(f"# TYPE {name} gauge\n")
        # OpenMetrics: the samples of one series must be contiguous and in time order.
        for rank in range(ranks):
            for labels, value, t in samples:
                if labels["rank"] == str(rank):
                    lines.append(_line(name, labels, value, t))
    lines.append("# EOF\n")
    # mtime=0: the same bytes on every run
    with gzip.GzipFile(HERE / "telemetry.om.gz", "wb", mtime=0) as f:
        f.write("".join(lines).encode())


if __name__ == "__main__":
    main()
