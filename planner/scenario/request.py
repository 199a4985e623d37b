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
from functools import partial
from typing import Any, cast

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
from planner.scenario.documents import prediction_json
from planner.scenario.numbers import integer_or_value, number_or_value
from planner.scenario.parse import parse_scenario
from planner.scenario.space import (
    entry_json,
    layout_json,
    parse_knobs,
    probe_document,
    stated_fields,
)
from planner.search import ExploreEntry, Objective
from planner.specs._checks import require_int, require_number

__all__ = ["parse_request", "recommendation_json"]

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


def _job_document(
    doc: Mapping[str, Any],
    total_tokens: float,
    *,
    gpu: str,
    num_gpus: int,
    hardware: Mapping[str, Any],
    parallelism: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
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


def _raw_pools(rec: Mapping[str, Any], hardware: Mapping[str, Any]) -> list[tuple[str, int, Any]]:
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
    pools: list[tuple[str, int, Any]] = []
    for i, raw in enumerate(raw_pools):
        path = f"recommend.pools[{i}]"
        pool = _mapping(path, raw)
        _check_keys(path, pool, ("gpu", "free_gpus", *_HW_OVERRIDES))
        if not isinstance(pool.get("gpu"), str):
            raise SpecError(f"{path}.gpu", "a GPU catalog key is required, e.g. h100-sxm")
        free = _integer(f"{path}.free_gpus", pool.get("free_gpus"))
        overrides = {k: pool[k] for k in _HW_OVERRIDES if k in pool}
        pools.append((pool["gpu"], free, overrides))
    return pools


def _numbers_last(value: object) -> tuple[int, float]:
    """Orders numbers after anything else, by value: the largest of a list of GPU counts
    (a list without numbers gives a non-number, which ``require_int`` reports)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (1, float(value))
    return (0, 0.0)


def _gpu_counts(rec: Mapping[str, Any]) -> tuple[int, ...] | None:
    counts = rec.get("gpu_counts")
    if counts is None:
        return None
    if not isinstance(counts, list) or not counts:
        raise SpecError("recommend.gpu_counts", "must be a non-empty list of GPU counts")
    values = {_integer(f"recommend.gpu_counts[{i}]", c) for i, c in enumerate(counts)}
    return tuple(sorted(values))


def _restart(raw: Mapping[str, Any]) -> RestartAssumptions:
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


def _running_fields(
    raw: object, hardware: Mapping[str, Any]
) -> tuple[str, int, Mapping[str, Any], float, dict[str, Any]] | None:
    """``(gpu, num_gpus, parallelism, tokens_trained, hardware overrides)`` of the running job,
    validated as a section (its layout is checked against the model later)."""
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
    overrides = {k: run[k] for k in _HW_OVERRIDES if k in run}
    return gpu, num_gpus, par, float(trained), overrides


def _running_search_parallelism(
    doc: Mapping[str, Any], running: Mapping[str, Any], global_batch_size: int
) -> dict[str, Any]:
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
        gpu, num_gpus, layout, trained, overrides = running
        on_its_gpus = partial(
            _job_document, doc, total_tokens, gpu=gpu, num_gpus=num_gpus, hardware=overrides
        )
        try:
            current = parse_scenario(on_its_gpus(parallelism=layout))
        except SpecError as exc:
            raise SpecError(f"recommend.running.{exc.field}", exc.message) from None
        search = _running_search_parallelism(doc, layout, current.parallelism.global_batch_size)
        base = parse_scenario(probe_document(on_its_gpus(parallelism=search), num_gpus))
        job = RunningJob(gpu=gpu, current=current, base=base, tokens_trained=trained)
    name = doc.get("name")
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
    )


# ---- the answer as JSON ----------------------------------------------------------------------


def _layout_and_prediction(best: ExploreEntry, stated: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "parallelism": layout_json(best.scenario.parallelism, stated),
        "prediction": prediction_json(best.prediction, best.scenario.name),
    }


def _row_json(p: CurvePoint, stated: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"gpu": p.gpu, "num_gpus": p.num_gpus, "feasible": p.feasible}
    if p.best is None or p.scaling_efficiency is None:
        row["reason"] = p.reason
        return row
    row.update(
        tokens_per_s=p.tokens_per_s,
        tokens_per_s_per_gpu=p.tokens_per_s / p.num_gpus,
        scaling_efficiency=p.scaling_efficiency,
        marginal_efficiency=p.marginal_efficiency,
        time_to_train_s=p.time_to_train_s,
        gpu_hours=p.gpu_hours,
        meets_deadline=p.meets_deadline,
        **_layout_and_prediction(p.best, stated),
    )
    return row


def _point_json(p: CurvePoint | None, stated: Mapping[str, Any]) -> dict[str, Any] | None:
    if p is None or p.best is None:
        return None
    return {
        "gpu": p.gpu,
        "num_gpus": p.num_gpus,
        "time_to_train_s": p.time_to_train_s,
        "gpu_hours": p.gpu_hours,
        "tokens_per_s": p.tokens_per_s,
        **_layout_and_prediction(p.best, stated),
    }


def _running_json(
    advice: RunningAdvice, layout: Mapping[str, Any], stated: Mapping[str, Any]
) -> dict[str, Any]:
    job = advice.job
    out: dict[str, Any] = {
        "gpu": job.gpu,
        "num_gpus": job.num_gpus,
        "current": {
            "parallelism": dict(layout),
            "prediction": prediction_json(advice.current_prediction, job.current.name),
        },
        "remaining_tokens": advice.remaining_tokens,
        "remaining_time_current_s": advice.remaining_time_current_s,
    }
    if advice.best is None or advice.restart_cost is None:
        out.update(best=None, reason=advice.reason, faster=False)
        return out
    cost = advice.restart_cost
    out.update(
        best=entry_json(advice.best, Objective.TIME_TO_TRAIN, stated),
        faster=advice.faster,
        speedup=advice.speedup,
        iteration_time_saving_s=advice.iteration_time_saving_s,
        restart_cost={
            "checkpoint_bytes": cost.checkpoint_bytes,
            "checkpoint_save_s": cost.checkpoint_save_s,
            "checkpoint_load_s": cost.checkpoint_load_s,
            "relaunch_s": cost.relaunch_s,
            "warmup_s": cost.warmup_s,
            "total_s": cost.total_s,
        },
        remaining_time_after_restart_s=advice.remaining_time_after_restart_s,
        time_saved_s=advice.time_saved_s,
        restart_pays=advice.restart_pays,
        break_even_remaining_tokens=advice.break_even_remaining_tokens,
    )
    return out


def recommendation_json(recommendation: Recommendation, doc: object) -> dict[str, Any]:
    """The ``planner recommend --json`` object of ``recommendation``; ``doc`` is the recommend
    document it answers (its one-per-job ``parallelism`` fields and the running job's layout
    are repeated as written). An unmet deadline adds ``error`` (``"infeasible: ..."``)."""
    source = doc if isinstance(doc, Mapping) else {}
    stated = stated_fields(source.get("parallelism"))
    r = recommendation
    out: dict[str, Any] = {
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
