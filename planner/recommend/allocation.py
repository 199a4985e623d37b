"""Allocation recommendations: how many GPUs of which type a job should ask for, and how to
lay it out; for a running job, whether a restart on another layout pays.

A ``RecommendRequest`` gives the job (a ``Scenario`` per pool of free GPUs of one type: the
same model, training and one-per-job parallelism fields on that GPU), its token budget, the
global batch sizes and ``Knobs`` the search may use, and optionally a deadline, the GPU
counts to consider and the running job. The document format is ``planner.scenario.request``.

For every pool and GPU count the best layout by time to train comes from one exhaustive
sweep (``planner.search.explore``). From these:

* **scaling curve**: tokens/s, time to train, GPU-hours, and the *scaling efficiency*
  (tokens/s per GPU relative to the smallest feasible count of that GPU type) and the
  *marginal efficiency* of each step ``((T_i - T_{i-1}) / (N_i - N_{i-1})) / (T_{i-1} / N_{i-1})``
  (1 = the added GPUs are as productive as the ones already there);
* **knee** (per GPU type): the largest count reached before the first step whose marginal
  efficiency falls below ``marginal_efficiency_threshold`` (default 0.5: past it, each added
  GPU brings less than half of what an average GPU already gave);
* **smallest allocation meeting the deadline**: the fewest GPUs (ties: fewest GPU-hours) whose
  time to train is at most ``deadline_s``.

A running job gets the best layout on its own GPUs and the restart cost of moving to it
(``planner.recommend.restart``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from planner.errors import InfeasibleError, SpecError
from planner.perf.memory import total_params
from planner.perf.step import predict
from planner.recommend.restart import DEFAULT_RESTART, RestartAssumptions, RunningAdvice, RunningJob
from planner.search import DesignSpace, ExploreEntry, Knobs, Objective, explore
from planner.search.space import allowed_counts
from planner.specs._checks import require_int, require_number
from planner.specs.scenario import Scenario

__all__ = [
    "CurvePoint",
    "Pool",
    "RecommendRequest",
    "Recommendation",
    "best_layout",
    "default_gpu_counts",
    "recommend",
    "scaling_curve",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """Free GPUs of one type: ``gpu`` (the type as the request names it), ``free_gpus``, and
    ``base``: the job on this GPU type (hardware overrides applied; its GPU count and layout
    do not matter)."""

    gpu: str
    free_gpus: int
    base: Scenario

    def __post_init__(self) -> None:
        require_int("recommend.pools.free_gpus", self.free_gpus)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecommendRequest:
    """A validated recommendation request (see the module docstring). ``total_tokens``: the
    token budget; ``deadline_s``: optional; ``gpu_counts``: the counts to consider (default:
    powers of two up to each pool's free count, and that count). Raises ``SpecError`` naming
    the document field for a non-positive budget, deadline or threshold, no pool, or a bad
    GPU count. ``tp_comm_overlap``: the job's stated ``parallelism.tp_comm_overlap`` (None:
    the bases'), which the pools' and the running job's pure data-parallel bases may leave out
    (``DesignSpace.tp_comm_overlap``)."""

    name: str | None
    total_tokens: float
    pools: tuple[Pool, ...]
    global_batch_size: tuple[int, ...]
    knobs: Knobs = field(default_factory=Knobs)
    deadline_s: float | None = None
    gpu_counts: tuple[int, ...] | None = None
    marginal_efficiency_threshold: float = 0.5
    running: RunningJob | None = None
    restart: RestartAssumptions = DEFAULT_RESTART
    tp_comm_overlap: bool | None = None

    def __post_init__(self) -> None:
        require_number("training.total_tokens", self.total_tokens)
        if self.deadline_s is not None:
            require_number("recommend.deadline_s", self.deadline_s)
        require_number(
            "recommend.marginal_efficiency_threshold", self.marginal_efficiency_threshold
        )
        if not self.pools:
            raise SpecError("recommend.pools", "must be a non-empty list of {gpu, free_gpus}")
        if self.gpu_counts is not None:
            allowed_counts("recommend.gpu_counts", self.gpu_counts)
        allowed_counts("parallelism.global_batch_size", self.global_batch_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class CurvePoint:
    """One point of the scaling curve: the ``best`` layout of ``num_gpus`` GPUs of ``gpu``, or
    why there is none (``reason``). ``scaling_efficiency`` and ``marginal_efficiency`` (None
    for the first feasible count of a GPU type) are relative to that type's curve;
    ``meets_deadline`` is None without a deadline."""

    gpu: str
    num_gpus: int
    best: ExploreEntry | None
    reason: str | None = None
    scaling_efficiency: float | None = None
    marginal_efficiency: float | None = None
    meets_deadline: bool | None = None

    @property
    def feasible(self) -> bool:
        """True when some layout of this count fits and was timed."""
        return self.best is not None

    @property
    def tokens_per_s(self) -> float:
        """Throughput of the best layout (0 when infeasible)."""
        return 0.0 if self.best is None else self.best.prediction.tokens_per_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Throughput per GPU of the best layout (0 when infeasible)."""
        return self.tokens_per_s / self.num_gpus

    @property
    def time_to_train_s(self) -> float:
        """Predicted time to train (inf when infeasible)."""
        if self.best is None or self.best.prediction.time_to_train_s is None:
            return math.inf
        return self.best.prediction.time_to_train_s

    @property
    def gpu_hours(self) -> float:
        """GPU-hours to train (inf when infeasible)."""
        return self.num_gpus * self.time_to_train_s / 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Recommendation:
    """The answer: the scaling curve (``scaling``, by pool then count), the ``knees`` (one per
    GPU type with a feasible count), the smallest allocation meeting the deadline (None without
    a deadline or when none does), the recommended allocation (that one; else, without a
    deadline, the fastest knee; else the fastest allocation), ``unmet_deadline`` (why the
    deadline cannot be met and what would make it, or None), and the running-job advice."""

    name: str | None
    total_tokens: float
    deadline_s: float | None
    marginal_efficiency_threshold: float
    scaling: tuple[CurvePoint, ...]
    knees: tuple[CurvePoint, ...]
    smallest_meeting_deadline: CurvePoint | None
    recommendation: CurvePoint
    unmet_deadline: str | None
    running: RunningAdvice | None
    restart: RestartAssumptions


def default_gpu_counts(free_gpus: int) -> tuple[int, ...]:
    """Powers of two up to ``free_gpus``, plus ``free_gpus`` itself."""
    out = {free_gpus}
    n = 1
    while n < free_gpus:
        out.add(n)
        n *= 2
    return tuple(sorted(out))


def best_layout(space: DesignSpace, workers: int = 1) -> tuple[ExploreEntry | None, str | None]:
    """The fastest layout of ``space`` to train (rank 1 by time to train), or None and why."""
    try:
        result = explore(
            space, objective=Objective.TIME_TO_TRAIN, top_k=1, workers=workers, with_pareto=False
        )
    except InfeasibleError as exc:
        return None, str(exc)
    return result.top[0], None


def scaling_curve(request: RecommendRequest, *, workers: int = 1) -> list[CurvePoint]:
    """The best layout at every considered GPU count of every pool (counts above a pool's free
    GPUs are skipped), by pool then count; efficiencies not filled in yet."""
    points: list[CurvePoint] = []
    for pool in request.pools:
        counts = request.gpu_counts or default_gpu_counts(pool.free_gpus)
        for n in counts:
            if n > pool.free_gpus:
                continue
            space = DesignSpace(
                base=pool.base,
                num_gpus=(n,),
                global_batch_size=request.global_batch_size,
                knobs=request.knobs,
                tp_comm_overlap=request.tp_comm_overlap,
            )
            best, reason = best_layout(space, workers)
            points.append(CurvePoint(gpu=pool.gpu, num_gpus=n, best=best, reason=reason))
    return points


def _with_efficiencies(
    points: Sequence[CurvePoint], threshold: float, deadline_s: float | None
) -> tuple[list[CurvePoint], list[CurvePoint]]:
    """The points with their efficiencies and deadline verdict, and the knee of each GPU type."""
    rows: list[CurvePoint] = []
    knees: list[CurvePoint] = []
    for gpu in dict.fromkeys(p.gpu for p in points):
        series = [p for p in points if p.gpu == gpu]
        feasible = [p for p in series if p.best is not None]
        ref = feasible[0] if feasible else None
        knee = ref
        prev: CurvePoint | None = None
        stopped = False
        for p in series:
            if p.best is None or ref is None:
                rows.append(p)
                continue
            per_gpu = p.tokens_per_s / p.num_gpus
            marginal: float | None = None
            if prev is not None:
                marginal = ((p.tokens_per_s - prev.tokens_per_s) / (p.num_gpus - prev.num_gpus)) / (
                    prev.tokens_per_s / prev.num_gpus
                )
            row = replace(
                p,
                scaling_efficiency=per_gpu / (ref.tokens_per_s / ref.num_gpus),
                marginal_efficiency=marginal,
                meets_deadline=None if deadline_s is None else p.time_to_train_s <= deadline_s,
            )
            if marginal is not None:
                if not stopped and marginal >= threshold:
                    knee = row
                else:
                    stopped = True
            elif knee is p:
                knee = row
            prev = p
            rows.append(row)
        if knee is not None:
            knees.append(knee)
    return rows, knees


def _running_advice(request: RecommendRequest, job: RunningJob, workers: int) -> RunningAdvice:
    current = predict(job.current)
    space = DesignSpace(
        base=job.base,
        num_gpus=(job.num_gpus,),
        global_batch_size=(job.current.parallelism.global_batch_size,),
        knobs=request.knobs,
        tp_comm_overlap=request.tp_comm_overlap,
    )
    best, reason = best_layout(space, workers)
    remaining = max(request.total_tokens - job.tokens_trained, 0.0)
    if best is None:
        return RunningAdvice(
            job=job,
            current_prediction=current,
            remaining_tokens=remaining,
            best=None,
            reason=reason,
        )
    cost = request.restart.cost(best.prediction.iteration_time_s, total_params(job.current.model))
    return RunningAdvice(
        job=job,
        current_prediction=current,
        remaining_tokens=remaining,
        best=best,
        restart_cost=cost,
    )


def _deadline_message(
    request: RecommendRequest, deadline: float, fastest: CurvePoint, rows: Sequence[CurvePoint]
) -> str:
    days = 86400.0
    need = fastest.time_to_train_s / deadline
    last = [r for r in rows if r.gpu == fastest.gpu and r.feasible]
    still_scaling = (
        last
        and last[-1].num_gpus == fastest.num_gpus
        and (last[-1].marginal_efficiency or 0.0) >= request.marginal_efficiency_threshold
    )
    more = (
        f"more free {fastest.gpu} GPUs (the curve still scales at {fastest.num_gpus}), "
        if still_scaling
        else "a faster GPU type (adding GPUs has stopped paying), "
    )
    return (
        f"the deadline of {deadline / days:.2f} days cannot be met: the fastest allocation, "
        f"{fastest.num_gpus} x {fastest.gpu}, needs {fastest.time_to_train_s / days:.2f} days "
        f"({need:.2f}x the deadline). Feasible with a deadline of at least "
        f"{fastest.time_to_train_s / days:.2f} days, a token budget of at most "
        f"{request.total_tokens / need:.3g} tokens, or {more}"
        "or a larger global batch (more data parallelism)"
    )


def recommend(request: RecommendRequest, *, workers: int = 1) -> Recommendation:
    """The recommendation: scaling curve, knee per GPU type, the smallest allocation meeting
    the deadline, the recommended allocation, and running-job advice.

    Raises ``InfeasibleError`` when no pool has any valid layout at any count (why, and what
    would make it feasible). An unreachable deadline is not raised: ``unmet_deadline`` says why
    and what would make it feasible, and everything else is computed, so callers can show the
    curve (the CLI exits 2, HTTP says 422).
    """
    points = scaling_curve(request, workers=workers)
    feasible = [p for p in points if p.best is not None]
    if not feasible:
        reasons = "; ".join(f"{p.gpu} x{p.num_gpus}: {p.reason}" for p in points[-3:])
        raise InfeasibleError(
            f"no GPU count of any pool has a valid layout (largest tried: {reasons}); "
            "add GPUs or a GPU type with more memory"
        )
    rows, knees = _with_efficiencies(
        points, request.marginal_efficiency_threshold, request.deadline_s
    )
    fastest = min(feasible, key=lambda p: (p.time_to_train_s, p.num_gpus))
    smallest: CurvePoint | None = None
    unmet: str | None = None
    if request.deadline_s is not None:
        meeting = [p for p in feasible if p.time_to_train_s <= request.deadline_s]
        if meeting:
            smallest = min(meeting, key=lambda p: (p.num_gpus, p.gpu_hours))
            chosen = smallest
        else:
            chosen = fastest
            unmet = _deadline_message(request, request.deadline_s, fastest, rows)
    else:
        chosen = min(knees, key=lambda p: (p.time_to_train_s, p.num_gpus))
    return Recommendation(
        name=request.name,
        total_tokens=request.total_tokens,
        deadline_s=request.deadline_s,
        marginal_efficiency_threshold=request.marginal_efficiency_threshold,
        scaling=tuple(rows),
        knees=tuple(knees),
        smallest_meeting_deadline=smallest,
        recommendation=chosen,
        unmet_deadline=unmet,
        running=None
        if request.running is None
        else _running_advice(request, request.running, workers),
        restart=request.restart,
    )
