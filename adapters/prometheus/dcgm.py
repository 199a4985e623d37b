"""GPU telemetry of NVIDIA's dcgm-exporter, read through Prometheus and joined to jobs.

Fields read (``DCGM_FIELDS``; units converted to SI base units):

=========================  ==================================  ==================================
attribute                  dcgm-exporter metric                 exporter unit -> ours
=========================  ==================================  ==================================
``gpu_util_ratio``         ``DCGM_FI_DEV_GPU_UTIL``             percent -> ratio 0..1
``sm_active_ratio``        ``DCGM_FI_PROF_SM_ACTIVE``           ratio (off in the default CSV)
``tensor_active_ratio``    ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``  ratio
``dram_active_ratio``      ``DCGM_FI_PROF_DRAM_ACTIVE``         ratio
``memory_used_bytes``      ``DCGM_FI_DEV_FB_USED``              MiB -> bytes
``memory_free_bytes``      ``DCGM_FI_DEV_FB_FREE``              MiB -> bytes
``pcie_tx_bytes_per_s``    ``DCGM_FI_PROF_PCIE_TX_BYTES``       bytes/s
``pcie_rx_bytes_per_s``    ``DCGM_FI_PROF_PCIE_RX_BYTES``       bytes/s
``nvlink_tx_bytes_per_s``  ``DCGM_FI_PROF_NVLINK_TX_BYTES``     bytes/s (needs a custom CSV)
``nvlink_rx_bytes_per_s``  ``DCGM_FI_PROF_NVLINK_RX_BYTES``     bytes/s (needs a custom CSV)
=========================  ==================================  ==================================

``DCGM_FI_PROF_SM_ACTIVE`` is commented out in dcgm-exporter's ``default-counters.csv`` and the
NVLink byte fields (DCGM fields 1011/1012) are not in it at all: sites add them with a custom
counters CSV (``-f /etc/dcgm-exporter/custom.csv``). Missing fields are None, never an error.

Label spellings (``DcgmLabels``, all configurable, tried in order):

* host: ``Hostname`` (released dcgm-exporter up to 4.5.x), ``hostname`` (main since PR #655),
  ``instance`` (Prometheus' target label, ``host:port``; the port is dropped);
* pod and namespace: ``exported_pod``/``exported_namespace`` (the dcgm-exporter Helm chart's
  ServiceMonitor has ``honorLabels: false``, so Prometheus renames the workload's labels),
  ``pod``/``namespace`` (``honorLabels: true``), ``pod_name``/``pod_namespace``
  (``--use-old-namespace``);
* Slurm job: ``hpc_job`` (dcgm-exporter's HPC job mapping, ``--hpc-job-mapping-dir``), and
  ``jobid`` (jobstats-style node exporters).

Join to a job: by namespace and pod names (Kubernetes), or by Slurm job id, falling back to
the job's hosts (and, when known, GPU indices) where the exporter has no job mapping.

:class:`DcgmJobTelemetry` is the service's ``planner.ports.GpuTelemetry``: one job's GPUs,
summarised into a ``planner.ports.JobGpuUsage`` (means of utilisation and activity, the most
memory used on one GPU, the least active GPU).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from statistics import fmean

from adapters.prometheus.client import PrometheusClient, Series, quote, regex_escape
from planner.ports import JobGpuUsage
from planner.specs.job import JobState

MIB = 1024.0 * 1024.0

#: attribute of ``GpuSnapshot`` -> (dcgm-exporter metric name, factor to SI units)
DCGM_FIELDS: Mapping[str, tuple[str, float]] = {
    "gpu_util_ratio": ("DCGM_FI_DEV_GPU_UTIL", 0.01),
    "sm_active_ratio": ("DCGM_FI_PROF_SM_ACTIVE", 1.0),
    "tensor_active_ratio": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1.0),
    "dram_active_ratio": ("DCGM_FI_PROF_DRAM_ACTIVE", 1.0),
    "memory_used_bytes": ("DCGM_FI_DEV_FB_USED", MIB),
    "memory_free_bytes": ("DCGM_FI_DEV_FB_FREE", MIB),
    "pcie_tx_bytes_per_s": ("DCGM_FI_PROF_PCIE_TX_BYTES", 1.0),
    "pcie_rx_bytes_per_s": ("DCGM_FI_PROF_PCIE_RX_BYTES", 1.0),
    "nvlink_tx_bytes_per_s": ("DCGM_FI_PROF_NVLINK_TX_BYTES", 1.0),
    "nvlink_rx_bytes_per_s": ("DCGM_FI_PROF_NVLINK_RX_BYTES", 1.0),
}
_BY_METRIC = {metric: (attr, factor) for attr, (metric, factor) in DCGM_FIELDS.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class DcgmLabels:
    """Label names under which a site's Prometheus stores dcgm-exporter's labels (module doc).

    Each tuple is tried in order; the first label present on a series wins.
    """

    host: tuple[str, ...] = ("Hostname", "hostname", "instance")
    pod_namespace: tuple[tuple[str, str], ...] = (
        ("exported_namespace", "exported_pod"),
        ("namespace", "pod"),
        ("pod_namespace", "pod_name"),
    )
    hpc_job: tuple[str, ...] = ("hpc_job", "jobid")
    gpu: str = "gpu"
    uuid: tuple[str, ...] = ("UUID", "uuid", "gpu_uuid")
    model_name: tuple[str, ...] = ("modelName", "model_name")

    def __post_init__(self) -> None:
        if not self.host or not self.pod_namespace or not self.hpc_job:
            raise ValueError("DcgmLabels: host, pod_namespace and hpc_job need at least one name")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSnapshot:
    """One GPU's telemetry averaged over ``window_s`` seconds ending at ``at_s`` (epoch s).

    Identity: ``host``, ``gpu`` (index as the exporter prints it), ``uuid``. Job identity as the
    series carried it (``namespace``/``pod`` or ``hpc_job``, else empty). Fields the site does
    not export are None. ``num_samples`` is the most samples any field had in the window.
    """

    host: str
    gpu: str
    uuid: str = ""
    model_name: str = ""
    namespace: str = ""
    pod: str = ""
    hpc_job: str = ""
    at_s: float = 0.0
    window_s: float = 0.0
    num_samples: int = 0
    gpu_util_ratio: float | None = None
    sm_active_ratio: float | None = None
    tensor_active_ratio: float | None = None
    dram_active_ratio: float | None = None
    memory_used_bytes: float | None = None
    memory_free_bytes: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    nvlink_tx_bytes_per_s: float | None = None
    nvlink_rx_bytes_per_s: float | None = None

    @property
    def activity_ratio(self) -> float | None:
        """Best available "is this GPU computing" signal: SM activity, else GPU utilisation
        (coarser: the fraction of time any kernel ran)."""
        return self.sm_active_ratio if self.sm_active_ratio is not None else self.gpu_util_ratio


@dataclass(frozen=True, slots=True, kw_only=True)
class _Acc:
    labels: Mapping[str, str]
    values: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


class DcgmTelemetry:
    """Reads dcgm-exporter series through a :class:`PrometheusClient`.

    ``window_s`` is the averaging window (default 5 min, a few dcgm-exporter collect intervals
    and scrapes). Methods raise ``SourceError`` from the client.
    """

    def __init__(
        self,
        client: PrometheusClient,
        *,
        labels: DcgmLabels | None = None,
        window_s: float = 300.0,
    ) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.client = client
        self.labels = labels or DcgmLabels()
        self.window_s = window_s

    def for_pods(
        self, namespace: str, pods: Sequence[str], *, at_s: float | None = None
    ) -> list[GpuSnapshot]:
        """GPUs of the named pods (exact names) in ``namespace``; [] when none is exported."""
        if not pods:
            return []
        return self._by_pod(namespace, "|".join(regex_escape(p) for p in pods), at_s)

    def for_pod_prefix(
        self, namespace: str, prefix: str, *, at_s: float | None = None
    ) -> list[GpuSnapshot]:
        """GPUs of the pods of ``namespace`` whose names start with ``prefix-`` (the pods of a
        JobSet, PyTorchJob or TrainJob named ``prefix``); [] when none is exported."""
        if not prefix:
            return []
        return self._by_pod(namespace, f"{regex_escape(prefix)}-.*", at_s)

    def _by_pod(self, namespace: str, pod_regex: str, at_s: float | None) -> list[GpuSnapshot]:
        for ns_label, pod_label in self.labels.pod_namespace:
            matchers = [f"{ns_label}={quote(namespace)}", f"{pod_label}=~{quote(pod_regex)}"]
            found = self._read(matchers, at_s)
            if found:
                return found
        return []

    def for_slurm_job(
        self,
        job_id: str,
        *,
        hosts: Sequence[str] = (),
        gpu_indices: Mapping[str, Sequence[int]] | None = None,
        at_s: float | None = None,
    ) -> list[GpuSnapshot]:
        """GPUs of Slurm job ``job_id``: by the exporter's job-mapping label when it has one,
        else by the job's ``hosts`` (restricted to ``gpu_indices[host]`` when given: Slurm's
        ``gres_detail`` ``IDX``). Host matching without indices includes every GPU of the
        hosts, shared nodes included. [] when nothing matches."""
        for label in self.labels.hpc_job:
            found = self._read([f"{label}={quote(job_id)}"], at_s)
            if found:
                return found
        if not hosts:
            return []
        host_regex = "|".join(regex_escape(h) for h in hosts)
        for label in self.labels.host:
            pattern = f"({host_regex})(:[0-9]+)?" if label == "instance" else host_regex
            found = self._read([f"{label}=~{quote(pattern)}"], at_s)
            if found:
                if gpu_indices:
                    found = [g for g in found if _wanted(g, gpu_indices)]
                return found
        return []

    def _read(self, matchers: list[str], at_s: float | None) -> list[GpuSnapshot]:
        names = "|".join(regex_escape(m) for m in _BY_METRIC)
        selector = "{" + ",".join([f"__name__=~{quote(names)}", *matchers]) + "}"
        promql = f"{selector}[{int(self.window_s)}s]"
        result = self.client.query(promql, at_s=at_s)
        series = [r for r in result if isinstance(r, Series)]
        by_gpu: dict[tuple[str, str, str], _Acc] = {}
        newest = 0.0
        for s in series:
            metric = s.labels.get("__name__", "")
            if metric not in _BY_METRIC or not s.points:
                continue
            attr, factor = _BY_METRIC[metric]
            key = (self._host(s.labels), s.labels.get(self.labels.gpu, ""), self._uuid(s.labels))
            acc = by_gpu.setdefault(key, _Acc(labels=s.labels))
            acc.values[attr] = fmean(v for _, v in s.points) * factor
            acc.counts[attr] = len(s.points)
            newest = max(newest, s.points[-1][0])
        return sorted(
            (
                self._snapshot(key, acc, at_s if at_s is not None else newest)
                for key, acc in by_gpu.items()
            ),
            key=lambda g: (g.host, _index(g.gpu), g.uuid),
        )

    def _snapshot(self, key: tuple[str, str, str], acc: _Acc, at_s: float) -> GpuSnapshot:
        host, gpu, uuid = key
        labels = acc.labels
        namespace, pod = "", ""
        for ns_label, pod_label in self.labels.pod_namespace:
            if labels.get(pod_label):
                namespace, pod = labels.get(ns_label, ""), labels[pod_label]
                break
        hpc_job = next((labels[x] for x in self.labels.hpc_job if labels.get(x)), "")
        model = next((labels[x] for x in self.labels.model_name if labels.get(x)), "")
        known = {f.name for f in fields(GpuSnapshot)}
        metrics = {k: v for k, v in acc.values.items() if k in known}
        return GpuSnapshot(
            host=host,
            gpu=gpu,
            uuid=uuid,
            model_name=model,
            namespace=namespace,
            pod=pod,
            hpc_job=hpc_job,
            at_s=at_s,
            window_s=self.window_s,
            num_samples=max(acc.counts.values(), default=0),
            **metrics,
        )

    def _host(self, labels: Mapping[str, str]) -> str:
        for name in self.labels.host:
            value = labels.get(name)
            if value:
                return value.rsplit(":", 1)[0] if name == "instance" else value
        return ""

    def _uuid(self, labels: Mapping[str, str]) -> str:
        return next((labels[x] for x in self.labels.uuid if labels.get(x)), "")


def _index(gpu: str) -> int:
    return int(gpu) if gpu.isdigit() else 1 << 30


def _wanted(gpu: GpuSnapshot, indices: Mapping[str, Sequence[int]]) -> bool:
    wanted = indices.get(gpu.host)
    return wanted is None or (gpu.gpu.isdigit() and int(gpu.gpu) in wanted)


def least_active(gpus: Sequence[GpuSnapshot]) -> GpuSnapshot | None:
    """The GPU with the lowest :attr:`GpuSnapshot.activity_ratio` (a straggler suspect when
    it is far below its peers), or None when no GPU reports activity."""
    active = [g for g in gpus if g.activity_ratio is not None]
    return min(active, key=lambda g: g.activity_ratio or 0.0) if active else None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def summarise(gpus: Sequence[GpuSnapshot], *, at_s: float, window_s: float) -> JobGpuUsage | None:
    """One job's usage from its GPUs' snapshots (None for no GPU)."""
    if not gpus:
        return None
    used = [g.memory_used_bytes for g in gpus if g.memory_used_bytes is not None]
    slow = least_active(gpus)
    return JobGpuUsage(
        num_gpus=len(gpus),
        at_s=at_s,
        window_s=window_s,
        gpu_util_ratio=_mean([g.gpu_util_ratio for g in gpus]),
        tensor_active_ratio=_mean([g.tensor_active_ratio for g in gpus]),
        sm_active_ratio=_mean([g.sm_active_ratio for g in gpus]),
        memory_used_bytes=max(used) if used else None,
        least_active_gpu=None if slow is None else f"{slow.host}/{slow.gpu}",
        least_active_ratio=None if slow is None else slow.activity_ratio,
    )


class DcgmJobTelemetry:
    """Implements ``planner.ports.GpuTelemetry`` over :class:`DcgmTelemetry`.

    Slurm jobs: by the exporter's job mapping, else by the job's hosts (every GPU of a shared
    host counts). Kubernetes jobs (``namespace/kind/name``): the pods whose names start with
    ``name-``. Raises ``SourceError`` from the client.
    """

    def __init__(self, dcgm: DcgmTelemetry) -> None:
        self.dcgm = dcgm

    def read(self, job: JobState, *, now_s: float) -> JobGpuUsage | None:
        """The job's GPU usage over the window ending at ``now_s`` (None: nothing exported)."""
        if job.scheduler == "slurm":
            gpus = self.dcgm.for_slurm_job(job.job_id, hosts=job.node_list, at_s=now_s)
        elif job.scheduler == "kubernetes" and job.job_id.count("/") == 2:
            namespace, _, name = job.job_id.split("/")
            gpus = self.dcgm.for_pod_prefix(namespace, name, at_s=now_s)
        else:
            return None
        return summarise(gpus, at_s=now_s, window_s=self.dcgm.window_s)
