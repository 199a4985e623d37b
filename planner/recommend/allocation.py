"""Allocation recommendations: how many GPUs of which type a job should ask for, and how to
lay it out; for a running job, whether a restart on another layout pays.

A *recommend document* is an explore document (``planner.search.space``: the model, the
parallelism knobs with ``global_batch_size``, ``training.total_tokens`` = the token budget,
and ``hardware`` naming the default GPU type) plus a ``recommend`` section::

    recommend:
      deadline_s: 2.6e6                 # optional
      pools:                            # optional; default: hardware.gpu, free = num_gpus
        - {gpu: a100-80gb, free_gpus: 1024}
        - {gpu: h100-sxm, free_gpus: 256, nvlink_domain_size: 8}
      gpu_counts: [64, 128, 256]        # optional; default powers of two up to the free count
      marginal_efficiency_threshold: 0.5
      running:                          # optional: the job as it runs now
        num_gpus: 512
        gpu: a100-80gb                  # default hardware.gpu
        parallelism: {tensor_parallel: 8, pipeline_parallel: 8, ...}
        tokens_trained: 1.0e11
      restart: {checkpoint_bandwidth_gb_per_s: 20, relaunch_s: 300, warmup_iterations: 10}

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

Restart cost of a running job (assumptions, all overridable in ``recommend.restart``): the job
saves a checkpoint on stop and reloads it resharded to the new layout (Megatron distributed
checkpointing), so no trained tokens are lost; ``restart_s = 2 · checkpoint_bytes / bandwidth
+ relaunch_s + warmup_iterations · new_iteration_time_s``. ``checkpoint_bytes`` = 14 bytes per
parameter (16-bit weights 2, fp32 master weights 4, Adam moments 8; Megatron-LM checkpoint
layout, Rajbhandari et al. 2020 §3); bandwidth = aggregate parallel-file-system bandwidth
(default 20 GB/s); ``relaunch_s`` (default 300 s) covers requeue, container and process start,
NCCL initialisation and the data loader; the first ``warmup_iterations`` (default 10) are
counted as lost (allocator warm-up, autotuning, CUDA graph capture).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.errors import InfeasibleError, SpecError
from planner.perf.memory import total_params
from planner.scenario import parse_scenario, predict_documents
from planner.search.explore import Objective, explore
from planner.search.space import parse_space
from planner.specs._checks import require_int, require_number

__all__ = [
    "DEFAULT_RESTART",
    "CurvePoint",
    "Pool",
    "RecommendRequest",
    "RestartAssumptions",
    "RunningJob",
    "parse_request",
    "recommend",
    "recommend_document",
]

CHECKPOINT_BYTES_PER_PARAM = 14.0
"""16-bit weights (2) + fp32 master weights (4) + Adam first and second moments (4 + 4)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartAssumptions:
    """What a restart on a new layout costs (see the module docstring), SI units."""

    checkpoint_bandwidth_bytes_per_s: float = 20e9
    relaunch_s: float = 300.0
    warmup_iterations: int = 10
    checkpoint_bytes_per_param: float = CHECKPOINT_BYTES_PER_PARAM

    def __post_init__(self) -> None:
        require_number(
            "recommend.restart.checkpoint_bandwidth_gb_per_s",
            self.checkpoint_bandwidth_bytes_per_s,
        )
        require_number("recommend.restart.relaunch_s", self.relaunch_s, positive=False)
        require_int("recommend.restart.warmup_iterations", self.warmup_iterations, minimum=0)
        require_number(
            "recommend.restart.checkpoint_bytes_per_param", self.checkpoint_bytes_per_param
        )


DEFAULT_RESTART = RestartAssumptions()


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """GPUs of one type that are free: ``gpu`` catalog key, ``free_gpus`` count, and optional
    hardware overrides (``gpus_per_node``, ``nvlink_domain_size``,
    ``inter_node_bandwidth_gbit_per_s``) as in a scenario's ``hardware`` section."""

    gpu: str
    free_gpus: int
    hardware: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningJob:
    """The job as it runs: GPU type and count, its full layout, tokens already trained."""

    gpu: str
    num_gpus: int
    parallelism: Mapping[str, Any]
    tokens_trained: float
    hardware: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecommendRequest:
    """A validated recommend document (see the module docstring)."""

    name: str | None
    document: Mapping[str, Any]
    total_tokens: float
    deadline_s: float | None
    pools: tuple[Pool, ...]
    gpu_counts: tuple[int, ...] | None
    marginal_efficiency_threshold: float
    running: RunningJob | None
    restart: RestartAssumptions


@dataclass(frozen=True, slots=True, kw_only=True)
class CurvePoint:
    """One point of the scaling curve: the best layout of ``num_gpus`` GPUs of ``gpu``, or why
    there is none (``reason``)."""

    gpu: str
    num_gpus: int
    entry: dict[str, Any] | None
    reason: str | None = None

    @property
    def tokens_per_s(self) -> float:
        """Throughput of the best layout (0 when infeasible)."""
        return 0.0 if self.entry is None else float(self.entry["prediction"]["tokens_per_s"])

    @property
    def time_to_train_s(self) -> float:
        """Predicted time to train (inf when infeasible)."""
        if self.entry is None:
            return math.inf
        return float(self.entry["prediction"]["time_to_train_s"])

    @property
    def gpu_hours(self) -> float:
        """GPU-hours to train (inf when infeasible)."""
        return self.num_gpus * self.time_to_train_s / 3600.0


def _mapping(path: str, raw: object) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(path, f"must be a mapping of fields, got {type(raw).__name__}")
    return raw


def _check_keys(path: str, raw: Mapping[str, Any], allowed: Sequence[str]) -> None:
    for key in raw:
        if key not in allowed:
            raise SpecError(f"{path}.{key}", f"unknown field; allowed: {', '.join(allowed)}")


_HW_OVERRIDES = ("gpus_per_node", "nvlink_domain_size", "inter_node_bandwidth_gbit_per_s")


def parse_request(doc: object) -> RecommendRequest:
    """Validate a recommend document. Raises ``SpecError("<dotted.field>", ...)``: the token
    budget ``training.total_tokens`` is required; pools need a ``gpu`` and ``free_gpus``; the
    model, hardware and knob sections are checked as ``planner explore`` checks them."""
    if not isinstance(doc, Mapping):
        raise SpecError("", f"a recommend document must be a mapping, got {type(doc).__name__}")
    rec = _mapping("recommend", doc.get("recommend"))
    _check_keys(
        "recommend",
        rec,
        (
            "deadline_s",
            "pools",
            "gpu_counts",
            "marginal_efficiency_threshold",
            "running",
            "restart",
        ),
    )
    training = _mapping("training", doc.get("training"))
    total = training.get("total_tokens")
    if total is None:
        raise SpecError(
            "training.total_tokens", "the token budget is required to recommend an allocation"
        )
    require_number("training.total_tokens", total)
    deadline = rec.get("deadline_s")
    if deadline is not None:
        require_number("recommend.deadline_s", deadline)
    hardware = _mapping("hardware", doc.get("hardware"))
    pools: list[Pool] = []
    raw_pools = rec.get("pools")
    if raw_pools is None:
        gpu, free = hardware.get("gpu"), hardware.get("num_gpus")
        if gpu is None or free is None:
            raise SpecError(
                "recommend.pools",
                "give pools [{gpu, free_gpus}] or hardware.gpu and hardware.num_gpus "
                "(the most GPUs to consider)",
            )
        if isinstance(free, list):
            free = max(free)
        require_int("hardware.num_gpus", free)
        overrides = {k: hardware[k] for k in _HW_OVERRIDES if k in hardware}
        pools.append(Pool(gpu=str(gpu), free_gpus=int(free), hardware=overrides))
    else:
        if not isinstance(raw_pools, list) or not raw_pools:
            raise SpecError("recommend.pools", "must be a non-empty list of {gpu, free_gpus}")
        for i, raw in enumerate(raw_pools):
            path = f"recommend.pools[{i}]"
            pool = _mapping(path, raw)
            _check_keys(path, pool, ("gpu", "free_gpus", *_HW_OVERRIDES))
            if not isinstance(pool.get("gpu"), str):
                raise SpecError(f"{path}.gpu", "a GPU catalog key is required, e.g. h100-sxm")
            require_int(f"{path}.free_gpus", pool.get("free_gpus"))
            pools.append(
                Pool(
                    gpu=pool["gpu"],
                    free_gpus=int(pool["free_gpus"]),
                    hardware={k: pool[k] for k in _HW_OVERRIDES if k in pool},
                )
            )
    counts = rec.get("gpu_counts")
    gpu_counts: tuple[int, ...] | None = None
    if counts is not None:
        if not isinstance(counts, list) or not counts:
            raise SpecError("recommend.gpu_counts", "must be a non-empty list of GPU counts")
        for i, c in enumerate(counts):
            require_int(f"recommend.gpu_counts[{i}]", c)
        gpu_counts = tuple(sorted(set(counts)))
    threshold = rec.get("marginal_efficiency_threshold", 0.5)
    require_number("recommend.marginal_efficiency_threshold", threshold)
    running = _parse_running(rec.get("running"), hardware)
    restart = _parse_restart(_mapping("recommend.restart", rec.get("restart")))
    name = doc.get("name")
    return RecommendRequest(
        name=None if name is None else str(name),
        document=doc,
        total_tokens=float(total),
        deadline_s=None if deadline is None else float(deadline),
        pools=tuple(pools),
        gpu_counts=gpu_counts,
        marginal_efficiency_threshold=float(threshold),
        running=running,
        restart=restart,
    )


def _parse_running(raw: object, hardware: Mapping[str, Any]) -> RunningJob | None:
    if raw is None:
        return None
    run = _mapping("recommend.running", raw)
    _check_keys(
        "recommend.running",
        run,
        ("gpu", "num_gpus", "parallelism", "tokens_trained", *_HW_OVERRIDES),
    )
    gpu = run.get("gpu", hardware.get("gpu"))
    if not isinstance(gpu, str):
        raise SpecError("recommend.running.gpu", "a GPU catalog key is required")
    require_int("recommend.running.num_gpus", run.get("num_gpus"))
    par = _mapping("recommend.running.parallelism", run.get("parallelism"))
    if not par:
        raise SpecError(
            "recommend.running.parallelism", "the running job's layout is required (tp, pp, ...)"
        )
    trained = run.get("tokens_trained", 0.0)
    require_number("recommend.running.tokens_trained", trained, positive=False)
    return RunningJob(
        gpu=gpu,
        num_gpus=int(run["num_gpus"]),
        parallelism=par,
        tokens_trained=float(trained),
        hardware={k: run[k] for k in _HW_OVERRIDES if k in run},
    )


def _parse_restart(raw: Mapping[str, Any]) -> RestartAssumptions:
    _check_keys(
        "recommend.restart",
        raw,
        (
            "checkpoint_bandwidth_gb_per_s",
            "relaunch_s",
            "warmup_iterations",
            "checkpoint_bytes_per_param",
        ),
    )
    bw = raw.get("checkpoint_bandwidth_gb_per_s")
    if bw is not None:
        require_number("recommend.restart.checkpoint_bandwidth_gb_per_s", bw)
    return RestartAssumptions(
        checkpoint_bandwidth_bytes_per_s=(
            DEFAULT_RESTART.checkpoint_bandwidth_bytes_per_s if bw is None else float(bw) * 1e9
        ),
        relaunch_s=raw.get("relaunch_s", DEFAULT_RESTART.relaunch_s),
        warmup_iterations=raw.get("warmup_iterations", DEFAULT_RESTART.warmup_iterations),
        checkpoint_bytes_per_param=raw.get(
            "checkpoint_bytes_per_param", DEFAULT_RESTART.checkpoint_bytes_per_param
        ),
    )


def default_gpu_counts(free_gpus: int) -> tuple[int, ...]:
    """Powers of two up to ``free_gpus``, plus ``free_gpus`` itself."""
    out = {free_gpus}
    n = 1
    while n < free_gpus:
        out.add(n)
        n *= 2
    return tuple(sorted(out))


def _explore_doc(
    request: RecommendRequest,
    gpu: str,
    num_gpus: int,
    hardware: Mapping[str, Any],
    parallelism: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    doc = {k: v for k, v in request.document.items() if k != "recommend"}
    base_hw = {k: v for k, v in _mapping("hardware", doc.get("hardware")).items() if k != "gpu"}
    if gpu != _mapping("hardware", doc.get("hardware")).get("gpu"):
        base_hw = {}  # another GPU type: the catalog's node and network defaults
    doc["hardware"] = {**base_hw, **dict(hardware), "gpu": gpu, "num_gpus": num_gpus}
    training = dict(_mapping("training", doc.get("training")))
    training["total_tokens"] = request.total_tokens
    doc["training"] = training
    if parallelism is not None:
        doc["parallelism"] = dict(parallelism)
    return doc


def _best(doc: Mapping[str, Any], workers: int) -> tuple[dict[str, Any] | None, str | None]:
    try:
        result = explore(
            parse_space(doc),
            objective=Objective.TIME_TO_TRAIN,
            top_k=1,
            workers=workers,
            with_pareto=False,
        )
    except InfeasibleError as exc:
        return None, str(exc)
    return result.top[0], None


def scaling_curve(request: RecommendRequest, *, workers: int = 1) -> list[CurvePoint]:
    """The best layout at every considered GPU count of every pool (counts above a pool's free
    GPUs are skipped), by pool then count."""
    points: list[CurvePoint] = []
    for pool in request.pools:
        counts = request.gpu_counts or default_gpu_counts(pool.free_gpus)
        for n in counts:
            if n > pool.free_gpus:
                continue
            entry, reason = _best(_explore_doc(request, pool.gpu, n, pool.hardware), workers)
            points.append(CurvePoint(gpu=pool.gpu, num_gpus=n, entry=entry, reason=reason))
    return points


def _summaries(
    points: Sequence[CurvePoint], threshold: float, deadline_s: float | None
) -> tuple[list[dict[str, Any]], dict[str, CurvePoint | None]]:
    rows: list[dict[str, Any]] = []
    knees: dict[str, CurvePoint | None] = {}
    for gpu in dict.fromkeys(p.gpu for p in points):
        series = [p for p in points if p.gpu == gpu]
        feasible = [p for p in series if p.entry is not None]
        ref = feasible[0] if feasible else None
        knee: CurvePoint | None = ref
        prev: CurvePoint | None = None
        stopped = False
        for p in series:
            row: dict[str, Any] = {
                "gpu": gpu,
                "num_gpus": p.num_gpus,
                "feasible": p.entry is not None,
            }
            if p.entry is None or ref is None:
                row["reason"] = p.reason
                rows.append(row)
                continue
            per_gpu = p.tokens_per_s / p.num_gpus
            row.update(
                tokens_per_s=p.tokens_per_s,
                tokens_per_s_per_gpu=per_gpu,
                scaling_efficiency=per_gpu / (ref.tokens_per_s / ref.num_gpus),
                marginal_efficiency=None,
                time_to_train_s=p.time_to_train_s,
                gpu_hours=p.gpu_hours,
                meets_deadline=None if deadline_s is None else p.time_to_train_s <= deadline_s,
                parallelism=p.entry["parallelism"],
                prediction=p.entry["prediction"],
            )
            if prev is not None:
                marginal = ((p.tokens_per_s - prev.tokens_per_s) / (p.num_gpus - prev.num_gpus)) / (
                    prev.tokens_per_s / prev.num_gpus
                )
                row["marginal_efficiency"] = marginal
                if not stopped and marginal >= threshold:
                    knee = p
                else:
                    stopped = True
            prev = p
            rows.append(row)
        knees[gpu] = knee
    return rows, knees


def _point_view(p: CurvePoint | None) -> dict[str, Any] | None:
    if p is None or p.entry is None:
        return None
    return {
        "gpu": p.gpu,
        "num_gpus": p.num_gpus,
        "time_to_train_s": p.time_to_train_s,
        "gpu_hours": p.gpu_hours,
        "tokens_per_s": p.tokens_per_s,
        "parallelism": p.entry["parallelism"],
        "prediction": p.entry["prediction"],
    }


def restart_cost_s(
    request: RecommendRequest, new_iteration_time_s: float, num_params: float
) -> dict[str, float]:
    """The restart cost's terms and total, seconds (assumptions in the module docstring)."""
    r = request.restart
    ckpt_bytes = r.checkpoint_bytes_per_param * num_params
    io = ckpt_bytes / r.checkpoint_bandwidth_bytes_per_s
    warm = r.warmup_iterations * new_iteration_time_s
    return {
        "checkpoint_bytes": ckpt_bytes,
        "checkpoint_save_s": io,
        "checkpoint_load_s": io,
        "relaunch_s": r.relaunch_s,
        "warmup_s": warm,
        "total_s": 2.0 * io + r.relaunch_s + warm,
    }


def _running_advice(request: RecommendRequest, job: RunningJob, workers: int) -> dict[str, Any]:
    current_doc = _explore_doc(request, job.gpu, job.num_gpus, job.hardware, job.parallelism)
    try:
        current_scenario = parse_scenario(current_doc)
    except SpecError as exc:
        raise SpecError(f"recommend.running.{exc.field}", exc.message) from None
    current = predict_documents([current_doc])[0]
    knobs = dict(_mapping("parallelism", request.document.get("parallelism")))
    knobs["global_batch_size"] = current_scenario.parallelism.global_batch_size
    for key in ("precision", "flash_attention"):
        if key in job.parallelism:
            knobs[key] = job.parallelism[key]
    best, reason = _best(_explore_doc(request, job.gpu, job.num_gpus, job.hardware, knobs), workers)
    remaining = max(request.total_tokens - job.tokens_trained, 0.0)
    out: dict[str, Any] = {
        "gpu": job.gpu,
        "num_gpus": job.num_gpus,
        "current": {"parallelism": dict(job.parallelism), "prediction": current},
        "remaining_tokens": remaining,
        "remaining_time_current_s": remaining / current["tokens_per_s"],
    }
    if best is None:
        out.update(best=None, reason=reason, faster=False)
        return out
    new = best["prediction"]
    cost = restart_cost_s(request, new["iteration_time_s"], total_params(current_scenario.model))
    remaining_new = remaining / new["tokens_per_s"]
    saving = out["remaining_time_current_s"] - (remaining_new + cost["total_s"])
    gain_per_token = 1.0 / current["tokens_per_s"] - 1.0 / new["tokens_per_s"]
    out.update(
        best=best,
        faster=new["iteration_time_s"] < current["iteration_time_s"],
        speedup=current["iteration_time_s"] / new["iteration_time_s"],
        iteration_time_saving_s=current["iteration_time_s"] - new["iteration_time_s"],
        restart_cost=cost,
        remaining_time_after_restart_s=remaining_new + cost["total_s"],
        time_saved_s=saving,
        restart_pays=saving > 0,
        break_even_remaining_tokens=(
            cost["total_s"] / gain_per_token if gain_per_token > 0 else None
        ),
    )
    return out


def recommend(request: RecommendRequest, *, workers: int = 1) -> dict[str, Any]:
    """The recommendation (JSON-ready): scaling curve, knee per GPU type, the smallest
    allocation meeting the deadline, the recommended allocation, and running-job advice.

    Raises ``InfeasibleError`` when no pool has any valid layout at any count (why, and what
    would make it feasible). An unreachable deadline is not raised: the result carries
    ``"error"`` (``"infeasible: ..."``) with the reason and what would make it feasible, and
    everything else computed, so callers can show the curve (the CLI exits 2, HTTP says 422).
    """
    points = scaling_curve(request, workers=workers)
    feasible = [p for p in points if p.entry is not None]
    if not feasible:
        reasons = "; ".join(f"{p.gpu} x{p.num_gpus}: {p.reason}" for p in points[-3:])
        raise InfeasibleError(
            f"no GPU count of any pool has a valid layout (largest tried: {reasons}); "
            "add GPUs or a GPU type with more memory"
        )
    rows, knees = _summaries(points, request.marginal_efficiency_threshold, request.deadline_s)
    out: dict[str, Any] = {
        "name": request.name,
        "total_tokens": request.total_tokens,
        "deadline_s": request.deadline_s,
        "marginal_efficiency_threshold": request.marginal_efficiency_threshold,
        "scaling": rows,
        "knee": [_point_view(k) for k in knees.values() if k is not None],
        "smallest_meeting_deadline": None,
        "restart_assumptions": {
            "checkpoint_bandwidth_bytes_per_s": request.restart.checkpoint_bandwidth_bytes_per_s,
            "checkpoint_bytes_per_param": request.restart.checkpoint_bytes_per_param,
            "relaunch_s": request.restart.relaunch_s,
            "warmup_iterations": request.restart.warmup_iterations,
        },
    }
    fastest = min(feasible, key=lambda p: (p.time_to_train_s, p.num_gpus))
    if request.deadline_s is not None:
        meeting = [p for p in feasible if p.time_to_train_s <= request.deadline_s]
        if meeting:
            smallest = min(meeting, key=lambda p: (p.num_gpus, p.gpu_hours))
            out["smallest_meeting_deadline"] = _point_view(smallest)
            out["recommendation"] = _point_view(smallest)
        else:
            out["recommendation"] = _point_view(fastest)
            out["error"] = "infeasible: " + _deadline_message(
                request, request.deadline_s, fastest, rows
            )
    else:
        best_knee = min(
            (k for k in knees.values() if k is not None),
            key=lambda p: (p.time_to_train_s, p.num_gpus),
        )
        out["recommendation"] = _point_view(best_knee)
    if request.running is not None:
        out["running"] = _running_advice(request, request.running, workers)
    return out


def _deadline_message(
    request: RecommendRequest,
    deadline: float,
    fastest: CurvePoint,
    rows: Sequence[Mapping[str, Any]],
) -> str:
    days = 86400.0
    need = fastest.time_to_train_s / deadline
    last = [r for r in rows if r["gpu"] == fastest.gpu and r.get("feasible")]
    still_scaling = (
        last
        and last[-1]["num_gpus"] == fastest.num_gpus
        and (last[-1].get("marginal_efficiency") or 0.0) >= request.marginal_efficiency_threshold
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


def recommend_document(doc: object, *, workers: int = 1) -> dict[str, Any]:
    """A recommend document -> the JSON-ready result, or ``{"name", "error"}`` for bad input
    and for jobs no pool can run. Never raises for bad documents."""
    name = doc.get("name") if isinstance(doc, Mapping) else None
    name = None if name is None else str(name)
    try:
        return recommend(parse_request(doc), workers=workers)
    except SpecError as exc:
        return {"name": name, "error": str(exc)}
    except InfeasibleError as exc:
        return {"name": name, "error": f"infeasible: {exc}"}
