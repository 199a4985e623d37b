"""What-if straggler analysis of a traced job: slowdown, attribution and diagnosis (pure).

Method of Lin et al., "Understanding Stragglers in Large Model Training Using What-if Analysis"
(OSDI '25; artifact ``ByteDance-Seed/StragglerAnalysis``, ``analyzer/wia.py``):

* **No-delay run**: the observed durations replayed with every launch delay set to 0.
* **Ideal run**: every compute op takes the mean duration of its op type over all workers and
  steps, every communication op the median transfer time of its type; no launch delays.
* **Slowdown** ``S = mean(no-delay step time) / mean(ideal step time)`` (the paper's Eq. 1);
  ``launch_slowdown = mean(actual) / mean(no-delay)``.
* **Slowdown against healthy peers**: the paper's ideal averages every worker, the stragglers
  included, so S understates a straggler's cost by about ``(ratio - 1) / workers`` of the
  compute (checked against a simulated job in ``tests/stragglers/test_simulated.py``: 6-11 %
  low with one worker at 1.5x among 4-8). ``slowdown_vs_healthy`` divides by an ideal whose
  compute means leave the flagged stragglers out, i.e. the job with them repaired; it equals S
  when nobody is flagged. S itself is kept as published (AR: 1.973).
* **Attribution** (Eqs. 2 and 4): the ideal run with only one group's real durations restored (a
  worker, a stage, a data-parallel rank, an op type); ``S_g = mean(T_g) / mean(T_ideal)``, and
  ``explained_ratio = (S_g - 1) / (S - 1)``.
* **Diagnosis** (in the spirit of the paper's M_W / M_S): the slowdown is split along a ladder of
  replays, each restoring more of the real compute durations: stage level (per stage, chunk and
  op type, the median over data-parallel ranks of the workers' means: robust to one bad worker),
  worker level (each worker's own means), all compute (per micro-batch and step variation), and
  finally communication. The largest rung names the cause: pipeline-stage imbalance, individual
  slow worker(s), sequence-length / workload imbalance, or communication.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypedDict

import numpy as np

from planner.errors import SpecError
from planner.specs.trace import OP_TYPES, FloatArray, IntArray, OpTrace, OpType
from planner.stragglers.budget import MEMORY_BUDGET_BYTES, check_rows
from planner.stragglers.graph import BoolArray, JobGraph, build_graph
from planner.stragglers.replicas import group_whatifs, run_scenarios

#: A straggler must slow its own work by at least this much against its stage peers.
MIN_EFFECT_RATIO = 0.10
#: Below this slowdown the job is considered straggler-free.
NEGLIGIBLE_SLOWDOWN = 1.05


class Diagnosis(StrEnum):
    """What the slowdown comes from."""

    NONE = "no-significant-slowdown"
    INDIVIDUAL_WORKER = "individual-slow-worker"
    STAGE_IMBALANCE = "pipeline-stage-imbalance"
    WORKLOAD_IMBALANCE = "sequence-length-imbalance"
    COMMUNICATION = "communication"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSlowdown:
    """Slowdown explained by one worker (``slowdown`` = S_w, its real durations restored)."""

    dp_rank: int
    stage: int
    slowdown: float
    explained_ratio: float
    compute_ratio: float  # worker's mean compute time per step / its stage peers' median


class WorkerSlowdownJson(TypedDict):
    """One worker of the ``by_worker`` list (``WorkerSlowdown``)."""

    dp_rank: int
    stage: int
    slowdown: float
    explained_ratio: float
    compute_ratio: float


class StragglerJson(TypedDict):
    """One flagged straggler: its data-parallel rank, pipeline stage and slowdown S_w."""

    dp_rank: int
    stage: int
    slowdown: float


class StragglerReportJson(TypedDict):
    """The ``planner stragglers --json`` object (``StragglerReport.to_dict``): seconds per
    step, slowdowns as ratios; ``by_stage`` / ``by_dp_rank`` keyed by the number as text."""

    slowdown: float
    ideal_step_time_s: float
    actual_step_time_s: float
    no_delay_step_time_s: float
    launch_slowdown: float
    by_worker: list[WorkerSlowdownJson]
    by_stage: dict[str, float]
    by_dp_rank: dict[str, float]
    by_optype: dict[str, float]
    stragglers: list[StragglerJson]
    slow_stages: list[int]
    slowdown_vs_healthy: float
    healthy_ideal_step_time_s: float
    diagnosis: str
    explanation: str
    shares: dict[str, float]
    evidence: dict[str, float]
    reproduction_error_ratio: float
    num_steps: int
    num_skipped_steps: int
    num_skipped_rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerReport:
    """Result of ``analyse``: times in seconds (per-step means), slowdowns as ratios.

    ``by_stage`` / ``by_dp_rank`` / ``by_optype`` map the group to S_g. ``shares`` splits
    ``S - 1`` into ``stage``, ``worker``, ``workload`` and ``communication`` parts (fractions,
    roughly summing to 1). ``evidence`` holds the numbers behind the diagnosis, ``explanation``
    says it in words. ``reproduction_error_ratio`` is the largest relative error of replaying the
    observed durations and launch delays against the observed step times.
    """

    slowdown: float
    actual_step_time_s: float
    no_delay_step_time_s: float
    ideal_step_time_s: float
    launch_slowdown: float
    by_worker: tuple[WorkerSlowdown, ...]
    by_stage: dict[int, float]
    by_dp_rank: dict[int, float]
    by_optype: dict[str, float]
    stragglers: tuple[WorkerSlowdown, ...]
    diagnosis: Diagnosis
    shares: dict[str, float]
    evidence: dict[str, float]
    explanation: str
    reproduction_error_ratio: float
    num_steps: int
    num_skipped_steps: int
    num_skipped_rows: int = 0
    slow_stages: tuple[int, ...] = field(default=())
    slowdown_vs_healthy: float = 0.0
    healthy_ideal_step_time_s: float = 0.0

    def to_dict(self) -> StragglerReportJson:
        """JSON-ready dict (the ``planner stragglers --json`` output)."""

        def worker(w: WorkerSlowdown) -> WorkerSlowdownJson:
            return {
                "dp_rank": w.dp_rank,
                "stage": w.stage,
                "slowdown": w.slowdown,
                "explained_ratio": w.explained_ratio,
                "compute_ratio": w.compute_ratio,
            }

        return {
            "slowdown": self.slowdown,
            "ideal_step_time_s": self.ideal_step_time_s,
            "actual_step_time_s": self.actual_step_time_s,
            "no_delay_step_time_s": self.no_delay_step_time_s,
            "launch_slowdown": self.launch_slowdown,
            "by_worker": [worker(w) for w in self.by_worker],
            "by_stage": {str(k): v for k, v in self.by_stage.items()},
            "by_dp_rank": {str(k): v for k, v in self.by_dp_rank.items()},
            "by_optype": dict(self.by_optype),
            "stragglers": [
                {"dp_rank": w.dp_rank, "stage": w.stage, "slowdown": w.slowdown}
                for w in self.stragglers
            ],
            "slow_stages": list(self.slow_stages),
            "slowdown_vs_healthy": self.slowdown_vs_healthy,
            "healthy_ideal_step_time_s": self.healthy_ideal_step_time_s,
            "diagnosis": self.diagnosis.value,
            "explanation": self.explanation,
            "shares": dict(self.shares),
            "evidence": dict(self.evidence),
            "reproduction_error_ratio": self.reproduction_error_ratio,
            "num_steps": self.num_steps,
            "num_skipped_steps": self.num_skipped_steps,
            "num_skipped_rows": self.num_skipped_rows,
        }


def ideal_durations(graph: JobGraph, exclude: BoolArray | None = None) -> FloatArray:
    """Ideal op durations (ops, steps): compute = mean of its type, communication = median.

    ``exclude`` (ops,) leaves those ops out of the compute means (they still get the mean).
    """
    real = graph.op_duration_s
    ideal = np.empty_like(real)
    for code in np.unique(graph.op_type):
        mask = graph.op_type == code
        if not OP_TYPES[code].is_compute:
            ideal[mask] = np.median(real[mask])
            continue
        kept = mask if exclude is None else mask & ~exclude
        ideal[mask] = real[kept if kept.any() else mask].mean()
    return ideal


def _row_key(*columns: IntArray) -> IntArray:
    """One int64 key per row of equal-length int columns (mixed radix; equal rows, equal key)."""
    key = np.zeros(columns[0].size, dtype=np.int64)
    for column in columns:
        shifted = column - column.min()
        key = key * (int(shifted.max()) + 1) + shifted
    return key


def _grouped_mean(keys: IntArray, values: FloatArray) -> FloatArray:
    """Per-row mean over steps and over rows sharing a key, broadcast back to (rows,)."""
    _, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = np.bincount(inverse, weights=values.sum(axis=1))
    counts = np.bincount(inverse) * values.shape[1]
    result: FloatArray = (sums / counts)[inverse]
    return result


def _is_compute(op_type: IntArray) -> BoolArray:
    table = np.array([op.is_compute for op in OP_TYPES])
    result: BoolArray = table[op_type]
    return result


def _ladder(graph: JobGraph, ideal: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Stage-level and worker-level op durations (ops, steps) for the diagnosis ladder."""
    real = graph.op_duration_s
    compute = _is_compute(graph.op_type)
    worker_mean = _grouped_mean(_row_key(graph.op_worker, graph.op_chunk, graph.op_type), real)
    # Stage level: per (stage, chunk, type), the median over workers of the worker means.
    stage_keys = _row_key(graph.op_stage, graph.op_chunk, graph.op_type)
    _, stage_group = np.unique(stage_keys, return_inverse=True)
    stage_group = stage_group.reshape(-1)
    # One value per (stage group, worker): the worker mean is the same for all its ops there.
    pairs = np.unique(_row_key(stage_group, graph.op_worker), return_index=True)
    pair_group = stage_group[pairs[1]]
    pair_value = worker_mean[pairs[1]]
    order = np.lexsort((pair_value, pair_group))
    sorted_group, sorted_value = pair_group[order], pair_value[order]
    bounds = np.flatnonzero(np.r_[True, np.diff(sorted_group) != 0, True])
    sizes = np.diff(bounds)
    low = bounds[:-1] + (sizes - 1) // 2
    high = bounds[:-1] + sizes // 2
    medians = np.empty(int(stage_group.max()) + 1)
    medians[sorted_group[bounds[:-1]]] = 0.5 * (sorted_value[low] + sorted_value[high])
    stage_value = medians[stage_group]
    steps = real.shape[1]
    stage_level = np.where(compute[:, None], np.repeat(stage_value[:, None], steps, 1), ideal)
    worker_level = np.where(compute[:, None], np.repeat(worker_mean[:, None], steps, 1), ideal)
    return stage_level, worker_level


def _restore(real: FloatArray, ideal: FloatArray, mask: BoolArray) -> Callable[[], FloatArray]:
    def make() -> FloatArray:
        result: FloatArray = np.where(mask[:, None], real, ideal)
        return result

    return make


def _restore_ops(
    graph: JobGraph, real: FloatArray, ideal: FloatArray, mask: BoolArray
) -> Callable[[], FloatArray]:
    def make() -> FloatArray:
        return graph.node_durations(np.where(mask[:, None], real, ideal))

    return make


def analyse(
    trace: OpTrace | JobGraph, *, memory_budget_bytes: int = MEMORY_BUDGET_BYTES
) -> StragglerReport:
    """What-if straggler analysis of a trace (see the module docstring for the method).

    Cost: linear in trace rows (``planner.stragglers.levels``, ``planner.stragglers.replicas``);
    memory: see ``planner.stragglers.budget``. Raises ``SpecError`` when the trace needs more
    than ``memory_budget_bytes``, cannot be modelled (see ``build_graph``) or the ideal run has
    zero length.
    """
    rows = trace.num_ops * trace.num_steps if isinstance(trace, JobGraph) else trace.num_ops
    check_rows(rows, memory_budget_bytes)
    graph = trace if isinstance(trace, JobGraph) else build_graph(trace)
    skipped_rows = 0 if isinstance(trace, JobGraph) else trace.num_skipped_rows
    real = graph.op_duration_s
    ideal = ideal_durations(graph)
    stage_level, worker_level = _ladder(graph, ideal)
    compute = _is_compute(graph.op_type)
    workers = graph.layout_workers
    pp = int(graph.op_stage.max()) + 1
    dp = workers // pp
    types = [int(c) for c in np.unique(graph.op_type)]

    # Node durations; masks of whole nodes (a worker's, a stage's, compute: compute ops are
    # never fused) restore at node level, op types (a fused batch mixes them) at op level.
    real_n, ideal_n = graph.node_durations(real), graph.node_durations(ideal)
    node_stage = graph.op_stage[np.flatnonzero(np.r_[True, np.diff(graph.op_node) != 0])]
    scenarios: list[Callable[[], FloatArray]] = [
        lambda: real_n,
        lambda: ideal_n,
        lambda: graph.node_durations(stage_level),
        lambda: graph.node_durations(worker_level),
        _restore(real_n, ideal_n, ~graph.node_is_comm),
    ]
    scenarios += [_restore(real_n, ideal_n, node_stage == s) for s in range(pp)]
    scenarios += [_restore_ops(graph, real, ideal, graph.op_type == t) for t in types]
    means = run_scenarios(graph, scenarios)
    no_delay, ideal_t, stage_t, worker_t, compute_t = (float(x) for x in means[:5])
    if ideal_t <= 0:
        raise SpecError("trace.duration_s", "the ideal step has zero length; all durations are 0")
    s = no_delay / ideal_t
    by_s, by_t = means[5 : 5 + pp] / ideal_t, means[5 + pp :] / ideal_t
    worker_means, rank_means = group_whatifs(graph, real, ideal, workers=workers, dp=dp)
    by_w, by_d = worker_means / ideal_t, rank_means / ideal_t

    compute_per_worker = (
        np.bincount(graph.op_worker[compute], weights=real[compute].sum(axis=1), minlength=workers)
        / graph.num_steps
    )
    stage_of = np.arange(workers) % pp
    peer_median = np.array(
        [np.median(compute_per_worker[st::pp]) for st in range(pp)], dtype=np.float64
    )[stage_of]
    compute_ratio = compute_per_worker / peer_median
    explained_w = (by_w - 1.0) / (s - 1.0) if s > 1.0 else np.zeros(workers)
    by_worker = [
        WorkerSlowdown(
            dp_rank=w // pp,
            stage=w % pp,
            slowdown=float(by_w[w]),
            explained_ratio=float(explained_w[w]),
            compute_ratio=float(compute_ratio[w]),
        )
        for w in range(workers)
    ]
    stragglers = tuple(
        sorted(
            (
                w
                for w in by_worker
                if w.compute_ratio >= 1.0 + MIN_EFFECT_RATIO
                and w.explained_ratio >= MIN_EFFECT_RATIO
                and s >= NEGLIGIBLE_SLOWDOWN
            ),
            key=lambda w: -w.slowdown,
        )
    )
    healthy_t = ideal_t
    if stragglers:
        bad = np.isin(graph.op_worker, [w.dp_rank * pp + w.stage for w in stragglers])
        healthy_ideal = ideal_durations(graph, exclude=bad)
        healthy_t = float(run_scenarios(graph, [lambda: graph.node_durations(healthy_ideal)])[0])
    excess = max(s - 1.0, 1e-12)
    shares = {
        "stage": (stage_t / ideal_t - 1.0) / excess,
        "worker": (worker_t - stage_t) / ideal_t / excess,
        "workload": (compute_t - worker_t) / ideal_t / excess,
        "communication": (no_delay - compute_t) / ideal_t / excess,
    }
    stage_compute = np.array([np.median(compute_per_worker[st::pp]) for st in range(pp)])
    stage_ratio = stage_compute / stage_compute.mean()
    slow_stages = tuple(int(x) for x in np.flatnonzero(stage_ratio >= 1.0 + MIN_EFFECT_RATIO))
    cov = _microbatch_cov(graph)
    evidence = {
        "stage_level_slowdown": stage_t / ideal_t,
        "worker_level_slowdown": worker_t / ideal_t,
        "compute_only_slowdown": compute_t / ideal_t,
        "max_stage_compute_ratio": float(stage_ratio.max()),
        "max_worker_compute_ratio": float(max(w.compute_ratio for w in by_worker)),
        "microbatch_compute_cov": cov,
    }
    if s < NEGLIGIBLE_SLOWDOWN:
        diagnosis = Diagnosis.NONE
    else:
        cause = max(shares, key=lambda k: shares[k])
        diagnosis = {
            "stage": Diagnosis.STAGE_IMBALANCE,
            "worker": Diagnosis.INDIVIDUAL_WORKER,
            "workload": Diagnosis.WORKLOAD_IMBALANCE,
            "communication": Diagnosis.COMMUNICATION,
        }[cause]
    reproduction = graph.reproduction_error()
    report = StragglerReport(
        slowdown=s,
        actual_step_time_s=float(graph.step_time_s.mean()),
        no_delay_step_time_s=no_delay,
        ideal_step_time_s=ideal_t,
        launch_slowdown=float(graph.step_time_s.mean()) / no_delay,
        by_worker=tuple(by_worker),
        by_stage={st: float(v) for st, v in enumerate(by_s)},
        by_dp_rank={d: float(v) for d, v in enumerate(by_d)},
        by_optype={OP_TYPES[t].value: float(v) for t, v in zip(types, by_t, strict=True)},
        stragglers=stragglers,
        diagnosis=diagnosis,
        shares=shares,
        evidence=evidence,
        explanation="",
        reproduction_error_ratio=float(np.abs(reproduction).max()),
        num_steps=graph.num_steps,
        num_skipped_steps=graph.num_skipped_steps,
        num_skipped_rows=skipped_rows,
        slow_stages=slow_stages,
        slowdown_vs_healthy=no_delay / healthy_t,
        healthy_ideal_step_time_s=healthy_t,
    )
    return _with_explanation(report)


def _microbatch_cov(graph: JobGraph) -> float:
    """Mean coefficient of variation of forward-compute time across a worker's micro-batches."""
    code = OP_TYPES.index(OpType.FORWARD_COMPUTE)
    mask = graph.op_type == code
    if not mask.any():
        return 0.0
    values = graph.op_duration_s[mask]  # ops x steps
    _, worker = np.unique(graph.op_worker[mask], return_inverse=True)
    worker = worker.reshape(-1)
    count = np.bincount(worker).astype(np.float64)[:, None]
    steps = values.shape[1]
    sums = np.zeros((count.size, steps))
    np.add.at(sums, worker, values)
    mean = sums / count
    squares = np.zeros((count.size, steps))
    np.add.at(squares, worker, (values - mean[worker]) ** 2)
    std = np.sqrt(squares / count)
    cov = np.where(mean > 0, std / np.where(mean > 0, mean, 1), 0)
    return float(cov.mean(axis=1).mean())


def _with_explanation(report: StragglerReport) -> StragglerReport:
    s = report.slowdown
    pct = {k: 100 * v for k, v in report.shares.items()}
    head = (
        f"slowdown {s:.3f}x (actual {report.no_delay_step_time_s:.2f} s/step without launch "
        f"delays vs ideal {report.ideal_step_time_s:.2f} s/step)"
    )
    if report.diagnosis is Diagnosis.NONE:
        text = f"{head}: no significant straggling."
    elif report.diagnosis is Diagnosis.INDIVIDUAL_WORKER:
        names = ", ".join(
            f"stage {w.stage} dp_rank {w.dp_rank} (compute {w.compute_ratio:.2f}x its stage "
            f"peers, explains {100 * w.explained_ratio:.0f}%)"
            for w in report.stragglers
        )
        text = (
            f"{head}: individual slow worker(s): {names or 'none above the 10% threshold'}; "
            f"worker-level effects explain {pct['worker']:.0f}% of the slowdown."
        )
    elif report.diagnosis is Diagnosis.STAGE_IMBALANCE:
        stages = ", ".join(str(st) for st in report.slow_stages) or "none above 10%"
        text = (
            f"{head}: pipeline-stage imbalance: stage(s) {stages} carry "
            f"{report.evidence['max_stage_compute_ratio']:.2f}x the mean stage compute; "
            f"stage-level means explain {pct['stage']:.0f}% of the slowdown."
        )
    elif report.diagnosis is Diagnosis.WORKLOAD_IMBALANCE:
        text = (
            f"{head}: sequence-length / workload imbalance: micro-batch compute varies "
            f"{100 * report.evidence['microbatch_compute_cov']:.0f}% (CoV) within a worker and "
            f"step, and this per-step variation explains {pct['workload']:.0f}% of the slowdown "
            f"while persistent stage/worker differences explain "
            f"{pct['stage'] + pct['worker']:.0f}%."
        )
    else:
        text = (
            f"{head}: communication: transfer times above their medians explain "
            f"{pct['communication']:.0f}% of the slowdown."
        )
    return dataclasses.replace(report, explanation=text)
