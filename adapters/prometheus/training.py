"""Training-step metrics exported by jobs (``adapters.prometheus.job_exporter``), read back as
the planner's records: ``RankStepRecord`` per rank and logging interval (live straggler
detection) and ``ProgressRecord`` (iteration progress, ETA).

A job's series are found by a :class:`JobSelector`: its Slurm job id (the exporter's ``job_id``
label) or its Kubernetes namespace and pod names (the PodMonitor's target labels).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from statistics import fmean

from adapters.prometheus import job_exporter as names
from adapters.prometheus.client import PrometheusClient, Sample, Series, quote, regex_escape
from planner.specs.job import ProgressRecord, RankStepRecord

_PROGRESS_METRICS = (names.ITERATION, names.TARGET_ITERATIONS, names.STEP_TIME, names.LAST_INTERVAL)
_RANK_METRICS = (
    names.ITERATION,
    names.STEP_TIME,
    names.COMPUTE_TIME,
    names.INTERVAL_ITERATIONS,
    names.WORLD_SIZE,
    names.LAST_INTERVAL,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSelector:
    """PromQL label matchers that pick one job's training series: ``(label, op, value)`` with
    ``op`` one of ``=``, ``=~``."""

    matchers: tuple[tuple[str, str, str], ...]

    def __post_init__(self) -> None:
        if not self.matchers:
            raise ValueError("JobSelector needs at least one matcher")
        for label, op, _ in self.matchers:
            if op not in ("=", "=~") or not label.isidentifier():
                raise ValueError(f"bad matcher {label!r} {op!r}")

    @classmethod
    def slurm(cls, job_id: str, *, label: str = "job_id") -> JobSelector:
        """The series of Slurm job ``job_id`` (the exporter's ``job_id`` label)."""
        return cls(matchers=((label, "=", job_id),))

    @classmethod
    def pods(
        cls,
        namespace: str,
        pod_prefix: str,
        *,
        namespace_label: str = "namespace",
        pod_label: str = "pod",
    ) -> JobSelector:
        """The series of the pods whose names start with ``pod_prefix`` in ``namespace`` (a
        JobSet/PyTorchJob's pods share the job's name as prefix)."""
        return cls(
            matchers=(
                (namespace_label, "=", namespace),
                (pod_label, "=~", regex_escape(pod_prefix) + ".*"),
            )
        )

    def promql(self, metrics: tuple[str, ...]) -> str:
        """A selector of ``metrics`` (by ``__name__``) restricted to this job."""
        regex = "|".join(regex_escape(m) for m in metrics)
        parts = [f"__name__=~{quote(regex)}"]
        parts += [f"{label}{op}{quote(value)}" for label, op, value in self.matchers]
        return "{" + ",".join(parts) + "}"


class TrainingTelemetry:
    """Reads a job's ``training_*`` series through a :class:`PrometheusClient`; raises
    ``SourceError`` from the client."""

    def __init__(self, client: PrometheusClient) -> None:
        self.client = client

    def progress(self, job: JobSelector, *, at_s: float | None = None) -> ProgressRecord | None:
        """The job's progress now (or at ``at_s``): the highest iteration any rank reports, the
        target iterations, the mean step time over ranks; None when the job exports nothing."""
        result = self.client.query_vector(job.promql(_PROGRESS_METRICS), at_s=at_s)
        by_metric: dict[str, list[Sample]] = defaultdict(list)
        for s in result:
            by_metric[s.labels.get("__name__", "")].append(s)
        iterations = by_metric.get(names.ITERATION)
        if not iterations:
            return None
        target = max((s.value for s in by_metric.get(names.TARGET_ITERATIONS, [])), default=0.0)
        steps = [s.value for s in by_metric.get(names.STEP_TIME, []) if s.value > 0]
        stamps = [s.value for s in by_metric.get(names.LAST_INTERVAL, []) if s.value > 0]
        return ProgressRecord(
            iteration=int(max(s.value for s in iterations)),
            train_iters=int(target) if target >= 1 else None,
            step_time_s=fmean(steps) if steps else None,
            timestamp_s=max(stamps) if stamps else iterations[0].timestamp_s,
            framework="prometheus",
        )

    def rank_steps(
        self,
        job: JobSelector,
        *,
        start_s: float,
        end_s: float,
        step_s: float = 15.0,
        align: bool = False,
    ) -> list[RankStepRecord]:
        """Per-rank timings of the logging intervals seen between ``start_s`` and ``end_s``
        (epoch s), one record per rank and interval, in time order.

        Samples the series every ``step_s`` seconds (keep it at or below the scrape interval,
        or intervals shorter than it are skipped) and emits a record when a rank's iteration
        counter moves. Ranks that export no compute time are skipped: their wall time alone
        cannot tell a straggler from its waiting peers.

        ``align``: ranks sampled at the same instant may sit in different logging intervals (a
        scrape lands between two ranks' updates), so their iteration labels rarely coincide; with
        ``align`` every record of one sample instant is labelled with the highest iteration any
        rank reported then, which lets a consumer that groups ranks by iteration (the live
        straggler tracker) see complete sets.
        """
        series = self.client.query_range(
            job.promql(_RANK_METRICS), start_s=start_s, end_s=end_s, step_s=step_s
        )
        # (rank, node, the rest of the identity) -> metric -> {t: v}
        ranks: dict[tuple[str, ...], dict[str, dict[float, float]]] = defaultdict(dict)
        for s in series:
            metric = s.labels.get("__name__", "")
            ranks[_identity(s)][metric] = dict(s.points)
        world = _world_size(ranks)
        sampled: list[tuple[float, RankStepRecord]] = []
        for identity, metrics in ranks.items():
            rank_label = identity[0]
            if not rank_label.isdigit():
                continue
            sampled += _intervals(int(rank_label), identity[1] or None, metrics, world)
        if align:
            top: dict[float, int] = {}
            for t, r in sampled:
                top[t] = max(top.get(t, 0), r.iteration)
            sampled = [(t, replace(r, iteration=top[t])) for t, r in sampled]
        records = [r for _, r in sampled]
        records.sort(key=lambda r: (r.timestamp_s or 0.0, r.rank))
        return records


def _identity(s: Series) -> tuple[str, ...]:
    labels = {k: v for k, v in s.labels.items() if k != "__name__"}
    rest = tuple(sorted((k, v) for k, v in labels.items() if k not in ("rank", "node")))
    return (labels.get("rank", ""), labels.get("node", ""), *(f"{k}={v}" for k, v in rest))


def _world_size(ranks: Mapping[tuple[str, ...], Mapping[str, Mapping[float, float]]]) -> int:
    sizes = [
        int(v)
        for metrics in ranks.values()
        for v in metrics.get(names.WORLD_SIZE, {}).values()
        if v >= 1
    ]
    return max(sizes) if sizes else max(1, len(ranks))


def _intervals(
    rank: int, node: str | None, metrics: Mapping[str, Mapping[float, float]], world: int
) -> list[tuple[float, RankStepRecord]]:
    """(sample time, record) for each sample at which the rank's iteration counter moved."""
    iterations = metrics.get(names.ITERATION, {})
    compute = metrics.get(names.COMPUTE_TIME, {})
    step = metrics.get(names.STEP_TIME, {})
    interval = metrics.get(names.INTERVAL_ITERATIONS, {})
    stamps = metrics.get(names.LAST_INTERVAL, {})
    out: list[tuple[float, RankStepRecord]] = []
    previous: int | None = None
    for t in sorted(iterations):
        iteration = int(iterations[t])
        if iteration == previous or t not in compute or compute[t] <= 0:
            continue
        num = int(interval.get(t, 0)) or (iteration - previous if previous is not None else 1)
        previous = iteration
        out.append(
            (
                t,
                RankStepRecord(
                    iteration=iteration,
                    rank=rank,
                    world_size=max(world, rank + 1),
                    compute_time_s=compute[t],
                    step_time_s=step.get(t),
                    num_iterations=max(1, num),
                    timestamp_s=stamps.get(t, t),
                    node=node,
                ),
            )
        )
    return out
