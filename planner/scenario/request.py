"""Recommend documents: parsed into a ``RecommendRequest``, answers written back as JSON.

A *recommend document* is an explore document (``planner.scenario.space``: the model, the
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

A pool (or the running job) on the document's own ``hardware.gpu`` keeps the document's
hardware overrides (``gpus_per_node``, ``nvlink_domain_size``,
``inter_node_bandwidth_gbit_per_s``) under its own; another GPU type starts from the catalog's.
The search for the running job's best layout keeps its global batch, precision and flash
attention. Numbers follow ``planner.scenario.numbers``. The answer's meaning is
``planner.recommend``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, NotRequired, TypedDict, cast, final

from planner.errors import SpecError
from planner.recommend import (
    DEFAULT_RESTART,
    CurvePoint,
    Pool,
    Recommendation,
    RecommendRequest,
    RestartAssumptions,
    RunningAdvice,
    RunningJob,
)
from planner.scenario.documents import PredictionJson, prediction_json
from planner.scenario.numbers import integer_or_value, number_or_value
from planner.scenario.parse import parse_scenario
from planner.scenario.space import (
    ExploreEntryJson,
    LayoutJson,
    StatedFields,
    entry_json,
    layout_json,
    parse_knobs,
    probe_document,
    stated_fields,
)
from planner.search import Objective
from planner.specs._checks import require_int, require_number

__all__ = [
    "AllocationJson",
    "CurveRowJson",
    "RecommendationJson",
    "RestartAssumptionsJson",
    "RestartCostJson",
    "RunningBetterJson",
    "RunningJson",
    "RunningNoBetterJson",
    "parse_request",
    "recommendation_json",
]

_HW_OVERRIDES = ("gpus_per_node", "nvlink_domain_size", "inter_node_bandwidth_gbit_per_s")
_RECOMMEND_KEYS = (
    "deadline_s",
    "pools",
    "gpu_counts",
    "marginal_efficiency_threshold",
    "running",
    "restart",
)
_RESTART_KEYS = (
    "checkpoint_bandwidth_gb_per_s",
    "relaunch_s",
    "warmup_iterations",
    "checkpoint_bytes_per_param",
)


def _integer(path: str, raw: object, *, minimum: int = 1) -> int:
    """An integer field (``planner.scenario.numbers``), validated."""
    value = integer_or_value(raw)
    require_int(path, value, minimum=minimum)
    return cast(int, value)


def _number(path: str, raw: object, *, positive: bool = True) -> float:
    """A number field (``planner.scenario.numbers``), validated; ints stay ints."""
    value = number_or_value(raw)
    require_number(path, value, positive=positive)
    return cast(float, value)


def _mapping(path: str, raw: object) -> Mapping[str, object]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(path, f"must be a mapping of fields, got {type(raw).__name__}")
    return raw


def _check_keys(path: str, raw: Mapping[str, object], allowed: Sequence[str]) -> None:
    for key in raw:
        if key not in allowed:
            raise SpecError(f"{path}.{key}", f"unknown field; allowed: {', '.join(allowed)}")


def _job_document(
    doc: Mapping[str, object],
    total_tokens: float,
    *,
    gpu: str,
    num_gpus: int,
    hardware: Mapping[str, object],
    parallelism: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The job of ``doc`` as an explore document on ``num_gpus`` GPUs of type ``gpu``."""
    out = {k: v for k, v in doc.items() if k != "recommend"}
    own = _mapping("hardware", doc.get("hardware"))
    base_hw = {k: v for k, v in own.items() if k != "gpu"} if gpu == own.get("gpu") else {}
    out["hardware"] = {**base_hw, **dict(hardware), "gpu": gpu, "num_gpus": num_gpus}
    training = dict(_mapping("training", doc.get("training")))
    training["total_tokens"] = total_tokens
    out["training"] = training
    if parallelism is not None:
        out["parallelism"] = dict(parallelism)
    return out


def _raw_pools(
    rec: Mapping[str, object], hardware: Mapping[str, object]
) -> list[tuple[str, int, dict[str, object]]]:
    """``(gpu, free_gpus, hardware overrides)`` of each pool, validated."""
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
            free = max((integer_or_value(v) for v in free), key=_numbers_last, default=None)
        overrides = {k: hardware[k] for k in _HW_OVERRIDES if k in hardware}
        return [(str(gpu), _integer("hardware.num_gpus", free), overrides)]
    if not isinstance(raw_pools, list) or not raw_pools:
        raise SpecError("recommend.pools", "must be a non-empty list of {gpu, free_gpus}")
    pools: list[tuple[str, int, dict[str, object]]] = []
    for i, raw in enumerate(raw_pools):
        path = f"recommend.pools[{i}]"
        pool = _mapping(path, raw)
        _check_keys(path, pool, ("gpu", "free_gpus", *_HW_OVERRIDES))
        pool_gpu = pool.get("gpu")
        if not isinstance(pool_gpu, str):
            raise SpecError(f"{path}.gpu", "a GPU catalog key is required, e.g. h100-sxm")
        free = _integer(f"{path}.free_gpus", pool.get("free_gpus"))
        overrides = {k: pool[k] for k in _HW_OVERRIDES if k in pool}
        pools.append((pool_gpu, free, overrides))
    return pools


def _numbers_last(value: object) -> tuple[int, float]:
    """Orders numbers after anything else, by value: the largest of a list of GPU counts
    (a list without numbers gives a non-number, which ``require_int`` reports)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (1, float(value))
    return (0, 0.0)


def _gpu_counts(rec: Mapping[str, object]) -> tuple[int, ...] | None:
    counts = rec.get("gpu_counts")
    if counts is None:
        return None
    if not isinstance(counts, list) or not counts:
        raise SpecError("recommend.gpu_counts", "must be a non-empty list of GPU counts")
    values = {_integer(f"recommend.gpu_counts[{i}]", c) for i, c in enumerate(counts)}
    return tuple(sorted(values))


def _restart(raw: Mapping[str, object]) -> RestartAssumptions:
    _check_keys("recommend.restart", raw, _RESTART_KEYS)
    bw = raw.get("checkpoint_bandwidth_gb_per_s")
    return RestartAssumptions(
        checkpoint_bandwidth_bytes_per_s=(
            DEFAULT_RESTART.checkpoint_bandwidth_bytes_per_s
            if bw is None
            else float(_number("recommend.restart.checkpoint_bandwidth_gb_per_s", bw)) * 1e9
        ),
        # the rest is checked by RestartAssumptions itself
        relaunch_s=cast(float, number_or_value(raw.get("relaunch_s", DEFAULT_RESTART.relaunch_s))),
        warmup_iterations=cast(
            int, integer_or_value(raw.get("warmup_iterations", DEFAULT_RESTART.warmup_iterations))
        ),
        checkpoint_bytes_per_param=cast(
            float,
            number_or_value(
                raw.get("checkpoint_bytes_per_param", DEFAULT_RESTART.checkpoint_bytes_per_param)
            ),
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _RunningFields:
    """The ``recommend.running`` section, checked as a section: the GPU type and count, the
    layout as written (checked against the model later), tokens trained so far, and the
    hardware overrides of the job's own section."""

    gpu: str
    num_gpus: int
    parallelism: Mapping[str, object]
    tokens_trained: float
    hardware: dict[str, object]


def _running_fields(raw: object, hardware: Mapping[str, object]) -> _RunningFields | None:
    """The running job's section, validated as a section (its layout is checked against the
    model later); None when the document has none."""
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
    num_gpus = _integer("recommend.running.num_gpus", run.get("num_gpus"))
    par = _mapping("recommend.running.parallelism", run.get("parallelism"))
    if not par:
        raise SpecError(
            "recommend.running.parallelism", "the running job's layout is required (tp, pp, ...)"
        )
    trained = _number(
        "recommend.running.tokens_trained", run.get("tokens_trained", 0.0), positive=False
    )
    return _RunningFields(
        gpu=gpu,
        num_gpus=num_gpus,
        parallelism=par,
        tokens_trained=float(trained),
        hardware={k: run[k] for k in _HW_OVERRIDES if k in run},
    )


def _running_search_parallelism(
    doc: Mapping[str, object], running: Mapping[str, object], global_batch_size: int
) -> dict[str, object]:
    """The ``parallelism`` section the running job's best layout is searched with: the
    document's knobs, the job's global batch, precision and flash attention."""
    knobs = dict(_mapping("parallelism", doc.get("parallelism")))
    knobs["global_batch_size"] = global_batch_size
    for key in ("precision", "flash_attention"):
        if key in running:
            knobs[key] = running[key]
    return knobs


def parse_request(doc: object) -> RecommendRequest:
    """Validate a recommend document. Raises ``SpecError("<dotted.field>", ...)``: the token
    budget ``training.total_tokens`` is required; pools need a ``gpu`` and ``free_gpus``; the
    model, hardware and knob sections are checked as ``planner explore`` checks them, on every
    pool's GPU type; errors in the running job's layout name ``recommend.running.<field>``."""
    if not isinstance(doc, Mapping):
        raise SpecError("", f"a recommend document must be a mapping, got {type(doc).__name__}")
    rec = _mapping("recommend", doc.get("recommend"))
    _check_keys("recommend", rec, _RECOMMEND_KEYS)
    total = _mapping("training", doc.get("training")).get("total_tokens")
    if total is None:
        raise SpecError(
            "training.total_tokens", "the token budget is required to recommend an allocation"
        )
    total_tokens = float(_number("training.total_tokens", total))
    deadline = rec.get("deadline_s")
    deadline_s = None if deadline is None else float(_number("recommend.deadline_s", deadline))
    hardware = _mapping("hardware", doc.get("hardware"))
    raw_pools = _raw_pools(rec, hardware)
    gpu_counts = _gpu_counts(rec)
    threshold = _number(
        "recommend.marginal_efficiency_threshold", rec.get("marginal_efficiency_threshold", 0.5)
    )
    running = _running_fields(rec.get("running"), hardware)
    restart = _restart(_mapping("recommend.restart", rec.get("restart")))

    batches, knobs = parse_knobs(doc)
    pools = tuple(
        Pool(
            gpu=gpu,
            free_gpus=free,
            base=parse_scenario(
                probe_document(
                    _job_document(doc, total_tokens, gpu=gpu, num_gpus=free, hardware=overrides),
                    free,
                )
            ),
        )
        for gpu, free, overrides in raw_pools
    )
    job: RunningJob | None = None
    if running is not None:
        on_its_gpus = partial(
            _job_document,
            doc,
            total_tokens,
            gpu=running.gpu,
            num_gpus=running.num_gpus,
            hardware=running.hardware,
        )
        try:
            current = parse_scenario(on_its_gpus(parallelism=running.parallelism))
        except SpecError as exc:
            raise SpecError(f"recommend.running.{exc.field}", exc.message) from None
        search = _running_search_parallelism(
            doc, running.parallelism, current.parallelism.global_batch_size
        )
        base = parse_scenario(probe_document(on_its_gpus(parallelism=search), running.num_gpus))
        job = RunningJob(
            gpu=running.gpu, current=current, base=base, tokens_trained=running.tokens_trained
        )
    name = doc.get("name")
    # the job's overlap, which the pure data-parallel bases may leave out (probe_document)
    overlap = True if stated_fields(doc.get("parallelism")).get("tp_comm_overlap") is True else None
    return RecommendRequest(
        name=None if name is None else str(name),
        total_tokens=total_tokens,
        pools=pools,
        global_batch_size=batches,
        knobs=knobs,
        deadline_s=deadline_s,
        gpu_counts=gpu_counts,
        marginal_efficiency_threshold=float(threshold),
        running=job,
        restart=restart,
        tp_comm_overlap=overlap,
    )


# ---- the answer as JSON ----------------------------------------------------------------------


class AllocationJson(TypedDict):
    """A feasible point of the scaling curve (a knee, the smallest allocation meeting the
    deadline, the recommendation): GPU type and count, time to train (s), GPU-hours,
    tokens/s, and its best layout with that layout's prediction."""

    gpu: str
    num_gpus: int
    time_to_train_s: float
    gpu_hours: float
    tokens_per_s: float
    parallelism: LayoutJson
    prediction: PredictionJson


class CurveRowJson(TypedDict):
    """One row of the scaling curve: an infeasible row has ``reason``; a feasible one its
    throughput, efficiencies (ratios), time to train (s), GPU-hours, whether it meets the
    deadline (None without one) and its best layout with that layout's prediction."""

    gpu: str
    num_gpus: int
    feasible: bool
    reason: NotRequired[str | None]
    tokens_per_s: NotRequired[float]
    tokens_per_s_per_gpu: NotRequired[float]
    scaling_efficiency: NotRequired[float]
    marginal_efficiency: NotRequired[float | None]
    time_to_train_s: NotRequired[float]
    gpu_hours: NotRequired[float]
    meets_deadline: NotRequired[bool | None]
    parallelism: NotRequired[LayoutJson]
    prediction: NotRequired[PredictionJson]


class RestartCostJson(TypedDict):
    """What restarting the running job costs: checkpoint bytes, seconds of each part."""

    checkpoint_bytes: float
    checkpoint_save_s: float
    checkpoint_load_s: float
    relaunch_s: float
    warmup_s: float
    total_s: float


class RestartAssumptionsJson(TypedDict):
    """The restart assumptions the answer used (``RestartAssumptions``)."""

    checkpoint_bandwidth_bytes_per_s: float
    checkpoint_bytes_per_param: float
    relaunch_s: float
    warmup_iterations: int


class CurrentLayoutJson(TypedDict):
    """The running job's layout as written in the document, and its prediction."""

    parallelism: dict[str, object]
    prediction: PredictionJson


class _RunningJobJson(TypedDict):
    """The running job: GPU type and count, its layout and prediction, the tokens left and
    the time they take on that layout (s)."""

    gpu: str
    num_gpus: int
    current: CurrentLayoutJson
    remaining_tokens: float
    remaining_time_current_s: float


@final
class RunningNoBetterJson(_RunningJobJson):
    """The advice for a running job no other layout beats: ``best`` is None, ``reason``
    says why."""

    best: None
    reason: str | None
    faster: Literal[False]


@final
class RunningBetterJson(_RunningJobJson):
    """The advice for a running job with a better layout: that layout (``best``), its speedup
    (ratio), the iteration time it saves (s), the restart's cost, the remaining time after a
    restart and the time saved (s), whether the restart pays, and the remaining tokens below
    which it would not."""

    best: ExploreEntryJson
    faster: bool
    speedup: float | None
    iteration_time_saving_s: float | None
    restart_cost: RestartCostJson
    remaining_time_after_restart_s: float | None
    time_saved_s: float | None
    restart_pays: bool | None
    break_even_remaining_tokens: float | None


RunningJson = RunningNoBetterJson | RunningBetterJson
"""The advice for the running job (``recommend.running``)."""


class RecommendationJson(TypedDict):
    """The ``planner recommend --json`` object (``recommendation_json``)."""

    name: str | None
    total_tokens: float
    deadline_s: float | None
    marginal_efficiency_threshold: float
    scaling: list[CurveRowJson]
    knee: list[AllocationJson | None]
    smallest_meeting_deadline: AllocationJson | None
    restart_assumptions: RestartAssumptionsJson
    recommendation: AllocationJson | None
    error: NotRequired[str]
    running: NotRequired[RunningJson]


def _row_json(p: CurvePoint, stated: StatedFields) -> CurveRowJson:
    if p.best is None or p.scaling_efficiency is None:
        return {"gpu": p.gpu, "num_gpus": p.num_gpus, "feasible": p.feasible, "reason": p.reason}
    return {
        "gpu": p.gpu,
        "num_gpus": p.num_gpus,
        "feasible": p.feasible,
        "tokens_per_s": p.tokens_per_s,
        "tokens_per_s_per_gpu": p.tokens_per_s / p.num_gpus,
        "scaling_efficiency": p.scaling_efficiency,
        "marginal_efficiency": p.marginal_efficiency,
        "time_to_train_s": p.time_to_train_s,
        "gpu_hours": p.gpu_hours,
        "meets_deadline": p.meets_deadline,
        "parallelism": layout_json(p.best.scenario.parallelism, stated),
        "prediction": prediction_json(p.best.prediction, p.best.scenario.name),
    }


def _point_json(p: CurvePoint | None, stated: StatedFields) -> AllocationJson | None:
    if p is None or p.best is None:
        return None
    return {
        "gpu": p.gpu,
        "num_gpus": p.num_gpus,
        "time_to_train_s": p.time_to_train_s,
        "gpu_hours": p.gpu_hours,
        "tokens_per_s": p.tokens_per_s,
        "parallelism": layout_json(p.best.scenario.parallelism, stated),
        "prediction": prediction_json(p.best.prediction, p.best.scenario.name),
    }


def _running_json(
    advice: RunningAdvice, layout: Mapping[str, object], stated: StatedFields
) -> RunningJson:
    job = advice.job
    head: _RunningJobJson = {
        "gpu": job.gpu,
        "num_gpus": job.num_gpus,
        "current": {
            "parallelism": dict(layout),
            "prediction": prediction_json(advice.current_prediction, job.current.name),
        },
        "remaining_tokens": advice.remaining_tokens,
        "remaining_time_current_s": advice.remaining_time_current_s,
    }
    cost = advice.restart_cost
    if advice.best is None or cost is None:
        return {**head, "best": None, "reason": advice.reason, "faster": False}
    return {
        **head,
        "best": entry_json(advice.best, Objective.TIME_TO_TRAIN, stated),
        "faster": advice.faster,
        "speedup": advice.speedup,
        "iteration_time_saving_s": advice.iteration_time_saving_s,
        "restart_cost": {
            "checkpoint_bytes": cost.checkpoint_bytes,
            "checkpoint_save_s": cost.checkpoint_save_s,
            "checkpoint_load_s": cost.checkpoint_load_s,
            "relaunch_s": cost.relaunch_s,
            "warmup_s": cost.warmup_s,
            "total_s": cost.total_s,
        },
        "remaining_time_after_restart_s": advice.remaining_time_after_restart_s,
        "time_saved_s": advice.time_saved_s,
        "restart_pays": advice.restart_pays,
        "break_even_remaining_tokens": advice.break_even_remaining_tokens,
    }


def recommendation_json(recommendation: Recommendation, doc: object) -> RecommendationJson:
    """The ``planner recommend --json`` object of ``recommendation``; ``doc`` is the recommend
    document it answers (its one-per-job ``parallelism`` fields and the running job's layout
    are repeated as written). An unmet deadline adds ``error`` (``"infeasible: ..."``)."""
    source: Mapping[str, object] = doc if isinstance(doc, Mapping) else {}
    stated = stated_fields(source.get("parallelism"))
    r = recommendation
    out: RecommendationJson = {
        "name": r.name,
        "total_tokens": r.total_tokens,
        "deadline_s": r.deadline_s,
        "marginal_efficiency_threshold": r.marginal_efficiency_threshold,
        "scaling": [_row_json(p, stated) for p in r.scaling],
        "knee": [_point_json(k, stated) for k in r.knees],
        "smallest_meeting_deadline": _point_json(r.smallest_meeting_deadline, stated),
        "restart_assumptions": {
            "checkpoint_bandwidth_bytes_per_s": r.restart.checkpoint_bandwidth_bytes_per_s,
            "checkpoint_bytes_per_param": r.restart.checkpoint_bytes_per_param,
            "relaunch_s": r.restart.relaunch_s,
            "warmup_iterations": r.restart.warmup_iterations,
        },
        "recommendation": _point_json(r.recommendation, stated),
    }
    if r.unmet_deadline is not None:
        out["error"] = f"infeasible: {r.unmet_deadline}"
    if r.running is not None:
        running = _mapping(
            "recommend.running", _mapping("recommend", source.get("recommend")).get("running")
        )
        layout = _mapping("recommend.running.parallelism", running.get("parallelism"))
        search = _running_search_parallelism(
            source, layout, r.running.job.current.parallelism.global_batch_size
        )
        out["running"] = _running_json(r.running, layout, stated_fields(search))
    return out
