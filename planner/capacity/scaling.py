"""Runtimes of a job at another GPU type, count or layout: the performance model, per job.

This is the one module of ``planner.capacity`` that calls the performance model and the layout
search, so it is the one to adapt when their APIs move:

* ``work_s(scenario, gpu, num_gpus)``: predicted training time (``planner.perf.predict``) of the
  scenario's layout moved to ``num_gpus`` GPUs of catalog type ``gpu`` (data parallelism
  absorbs the change; node and network values from the catalog when the type changes);
* ``scaling_curve`` / ``recommend_size``: the same over candidate counts (the data-parallel
  degrees that divide the global batch), and the size a job gets for ``num_gpus: recommend``;
* ``best_layout``: the layout search's (``planner.search.explore``) fastest layout at a count.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.catalog import get_gpu
from planner.errors import InfeasibleError, SpecError
from planner.perf import predict_batch
from planner.search import DesignSpace, Knobs, Objective, explore
from planner.specs.hardware import HardwareSpec
from planner.specs.scenario import Scenario

__all__ = [
    "MARGINAL_EFFICIENCY_THRESHOLD",
    "ScalingPoint",
    "best_layout",
    "moved",
    "recommend_size",
    "scaling_curve",
    "work_s",
]

MARGINAL_EFFICIENCY_THRESHOLD = 0.5
"""The knee rule of ``planner recommend``: stop adding GPUs once a step's marginal efficiency
falls below this (each added GPU brings less than half of what an average GPU gave)."""


@dataclass(frozen=True, slots=True)
class ScalingPoint:
    """Predicted training time ``work_s`` (seconds, None when infeasible, with ``reason``) of a
    job on ``num_gpus`` GPUs."""

    num_gpus: int
    work_s: float | None
    reason: str = ""


def moved(scenario: Scenario, gpu: str, num_gpus: int) -> Scenario:
    """``scenario`` on ``num_gpus`` GPUs of catalog type ``gpu``: the model-parallel layout
    kept, ``data_parallel = num_gpus / (tp·pp·cp)``. Raises ``SpecError`` when that does not
    tile (the message says which counts would)."""
    par = scenario.parallelism
    mp = par.model_parallel_size
    if num_gpus % mp:
        raise SpecError(
            "num_gpus", f"{num_gpus} is not a multiple of tensor·pipeline·context = {mp}"
        )
    hw = scenario.hardware
    spec = get_gpu(gpu)
    if spec.key != hw.gpu.key:
        hw = HardwareSpec(
            gpu=spec,
            num_gpus=num_gpus,
            gpus_per_node=spec.gpus_per_node,
            nvlink_domain_size=spec.nvlink_domain_size,
            inter_node_bandwidth_gbit_per_s=spec.scale_out_bandwidth_bytes_per_s * 8.0 / 1e9,
        )
    else:
        hw = dataclasses.replace(hw, num_gpus=num_gpus)
    return dataclasses.replace(
        scenario,
        hardware=hw,
        parallelism=dataclasses.replace(par, data_parallel=num_gpus // mp),
    )


def _points(scenario: Scenario, gpu: str, counts: Sequence[int]) -> list[ScalingPoint]:
    valid: list[tuple[int, Scenario]] = []
    points: dict[int, ScalingPoint] = {}
    for n in counts:
        try:
            valid.append((n, moved(scenario, gpu, n)))
        except SpecError as exc:
            points[n] = ScalingPoint(n, None, str(exc))
    for (n, moved_scenario), prediction in zip(
        valid, predict_batch([s for _, s in valid]) if valid else [], strict=True
    ):
        if not prediction.fits_in_memory:
            gib = prediction.memory_per_gpu_bytes / 2**30
            points[n] = ScalingPoint(
                n, None, f"out of memory on {gpu}: {gib:.1f} GiB per GPU needed"
            )
        elif prediction.time_to_train_s is None:
            points[n] = ScalingPoint(n, None, "no token budget or train_iters")
        else:
            points[n] = ScalingPoint(n, prediction.time_to_train_s)
        del moved_scenario
    return [points[n] for n in counts]


def work_s(scenario: Scenario, gpu: str, num_gpus: int) -> ScalingPoint:
    """Predicted training time of ``scenario`` moved to ``num_gpus`` GPUs of type ``gpu``."""
    return _points(scenario, gpu, [num_gpus])[0]


def candidate_counts(scenario: Scenario, max_gpus: int) -> list[int]:
    """GPU counts ``tp·pp·cp·dp <= max_gpus`` whose ``dp·micro_batch`` divides the global
    batch, ascending."""
    par = scenario.parallelism
    mp = par.model_parallel_size
    sequences = par.global_batch_size // par.micro_batch_size
    return [
        mp * dp for dp in range(1, sequences + 1) if sequences % dp == 0 and mp * dp <= max_gpus
    ]


def scaling_curve(scenario: Scenario, gpu: str, max_gpus: int) -> list[ScalingPoint]:
    """Predicted training time at every candidate count up to ``max_gpus``."""
    return _points(scenario, gpu, candidate_counts(scenario, max_gpus))


def recommend_size(
    scenario: Scenario, gpu: str, max_gpus: int, budget_s: float | None, spread: float
) -> ScalingPoint:
    """The size of a ``num_gpus: recommend`` job on ``gpu``: the fewest GPUs whose predicted
    training time times ``spread`` (p90 over p50 of its runtime band) fits ``budget_s`` (the
    time from its earliest start to its deadline); without a deadline, or when no count meets
    it, the knee of the scaling curve (``MARGINAL_EFFICIENCY_THRESHOLD``, as ``planner
    recommend``). A point with ``work_s`` None (and the reason) when no count is feasible."""
    curve = [p for p in scaling_curve(scenario, gpu, max_gpus) if p.work_s is not None]
    if not curve:
        return ScalingPoint(0, None, f"no feasible GPU count of {gpu} up to {max_gpus}")
    if budget_s is not None:
        for point in curve:
            assert point.work_s is not None
            if point.work_s * spread <= budget_s:
                return point
    knee = curve[0]
    for prev, point in itertools.pairwise(curve):
        rate_prev, rate = 1.0 / (prev.work_s or math.inf), 1.0 / (point.work_s or math.inf)
        marginal = ((rate - rate_prev) / (point.num_gpus - prev.num_gpus)) / (
            rate_prev / prev.num_gpus
        )
        if marginal < MARGINAL_EFFICIENCY_THRESHOLD:
            break
        knee = point
    return knee


def best_layout(scenario: Scenario, gpu: str, num_gpus: int) -> Scenario:
    """The fastest layout (time to train) of the job ``scenario`` on ``num_gpus`` GPUs of type
    ``gpu``, from the exhaustive layout search (``planner.search.explore``; the model, the
    global batch, the precision and the training run are kept, every layout knob is searched).
    Raises ``InfeasibleError`` when no layout fits, ``SpecError`` for an unknown GPU type."""
    spec = get_gpu(gpu)
    hardware = HardwareSpec(
        gpu=spec,
        num_gpus=num_gpus,
        gpus_per_node=spec.gpus_per_node,
        nvlink_domain_size=spec.nvlink_domain_size,
        inter_node_bandwidth_gbit_per_s=spec.scale_out_bandwidth_bytes_per_s * 8.0 / 1e9,
    )
    base = dataclasses.replace(scenario, hardware=hardware)
    space = DesignSpace(
        base=base,
        num_gpus=(num_gpus,),
        global_batch_size=(scenario.parallelism.global_batch_size,),
        knobs=Knobs(),
    )
    result = explore(space, objective=Objective.TIME_TO_TRAIN, top_k=1, with_pareto=False)
    if not result.top:
        raise InfeasibleError(f"no layout of {scenario.name} fits {num_gpus} x {gpu}")
    return result.top[0].scenario
