"""Predictions of one scenario or a batch: the output contract of ``planner predict``.

``predict_batch(scenarios)`` runs the engine (``planner.perf.engine``) once over all scenarios,
on numpy arrays; ``predict(scenario)`` runs the same engine on Python numbers (the one-scenario
form of ``ScenarioArrays``) and gives the same numbers. The
iteration time is the sum of the ``breakdown_s`` terms: compute (operators of the slowest
pipeline stage, recompute included), exposed TP/CP/EP communication, PP point-to-point, the
pipeline bubble, exposed DP communication and the optimizer step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import DefaultEfficiency, EfficiencyModel
from planner.perf.engine import BREAKDOWN_KEYS, BatchResult, evaluate
from planner.perf.memory import MemoryBreakdown
from planner.specs.scenario import Scenario

__all__ = ["Prediction", "StepBreakdown", "evaluate_batch", "predict", "predict_batch"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepBreakdown:
    """Seconds per iteration spent on each term on the critical path."""

    compute_s: float
    tp_comm_exposed_s: float
    cp_comm_exposed_s: float
    ep_comm_exposed_s: float
    pp_comm_exposed_s: float
    pp_bubble_s: float
    dp_comm_exposed_s: float
    optimizer_s: float

    @property
    def total_s(self) -> float:
        """Iteration time, the sum of all terms."""
        return (
            self.compute_s
            + self.tp_comm_exposed_s
            + self.cp_comm_exposed_s
            + self.ep_comm_exposed_s
            + self.pp_comm_exposed_s
            + self.pp_bubble_s
            + self.dp_comm_exposed_s
            + self.optimizer_s
        )

    def as_dict(self) -> dict[str, float]:
        """The ``breakdown_s`` object of the output contract (keys without the ``_s``)."""
        return {key: getattr(self, f"{key}_s") for key in BREAKDOWN_KEYS}


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """Predicted performance of one scenario (fields of the output contract, SI units).

    ``mfu`` divides model FLOPs by the dense peak of the chosen precision; ``hfu`` counts
    recomputed FLOPs too. ``fits_in_memory``: the peak plus the memory headroom
    (``hardware.memory_headroom_gib``, ``planner.perf.memory``) is within ``hbm_bytes``.
    ``time_to_train_s`` is None when the scenario gives neither ``training.total_tokens`` nor
    ``training.train_iters``. ``moe_routed_compute_s``: seconds per iteration of the
    ``compute`` and ``pp_bubble`` terms that the MoE layers' routed experts take (their GEMMs
    with their operands' casts, activation, expert biases and clamp, the router, the token
    permutation and un-permutation: ``planner.perf.moe_mlp``; with what recompute repeats of
    them and their share of the bubble); part of ``breakdown``, not a term of it; 0 for dense
    models.
    """

    iteration_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_flops_per_iteration: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    memory_per_gpu_bytes: float
    hbm_bytes: float
    fits_in_memory: bool
    breakdown: StepBreakdown
    memory: MemoryBreakdown
    time_to_train_s: float | None
    moe_routed_compute_s: float


_DEFAULT_EFFICIENCY: list[DefaultEfficiency] = []


def _default_efficiency() -> DefaultEfficiency:
    if not _DEFAULT_EFFICIENCY:
        _DEFAULT_EFFICIENCY.append(DefaultEfficiency())
    return _DEFAULT_EFFICIENCY[0]


def evaluate_batch(
    scenarios: Sequence[Scenario], efficiency: EfficiencyModel | None = None
) -> tuple[ScenarioArrays, BatchResult]:
    """The array form of ``predict_batch``: inputs as ``ScenarioArrays`` and the engine's
    ``BatchResult`` (arrays of shape ``(len(scenarios),)``), for sweeps that never need
    per-scenario objects."""
    eff = efficiency if efficiency is not None else _default_efficiency()
    arrays = ScenarioArrays.from_scenarios(scenarios)
    return arrays, evaluate(arrays, eff)


def predict_batch(
    scenarios: Sequence[Scenario], efficiency: EfficiencyModel | None = None
) -> list[Prediction]:
    """Predict every scenario in one vectorized pass; one ``Prediction`` per scenario, in order.

    ``efficiency`` defaults to ``DefaultEfficiency()`` (the packaged constants). Pure; never
    raises for valid ``Scenario`` values; an empty sequence gives an empty list. A single
    scenario runs in the one-scenario form (Python numbers; same results, ~4x faster).
    """
    if not scenarios:
        return []
    if len(scenarios) == 1:  # the one-scenario form: the same engine on Python floats
        a = ScenarioArrays.from_scenario(scenarios[0])
        r = evaluate(a, efficiency if efficiency is not None else _default_efficiency())
    else:
        a, r = evaluate_batch(scenarios, efficiency)
    it = r.iteration_time_s
    tokens = a.tokens_per_iteration
    tokens_per_s = tokens / it
    mem_total = r.memory.total
    fits = mem_total + a.memory_headroom_bytes <= a.hbm_bytes
    peak = a.device.peak_flop_per_s
    mfu = r.model_flops / (it * a.num_gpus * peak)
    hfu = r.hardware_flops / (it * a.num_gpus * peak)
    ttt = ops.where(ops.isnan(a.total_tokens), a.train_iters * it, a.total_tokens / tokens_per_s)
    lst = ops.tolist
    columns = {k: lst(r.breakdown_s[k]) for k in BREAKDOWN_KEYS}
    it_l, tps_l, n_l = lst(it), lst(tokens_per_s), lst(a.num_gpus)
    mf_l, mfu_l, hfu_l = lst(r.model_flops), lst(mfu), lst(hfu)
    mem_l, hbm_l, fits_l, ttt_l = lst(mem_total), lst(a.hbm_bytes), lst(fits), lst(ttt)
    mw, mg, mo = lst(r.memory.weights), lst(r.memory.gradients), lst(r.memory.optimizer)
    ma, mh = lst(r.memory.activations), lst(r.memory.overhead)
    ms = lst(r.memory.optimizer_step)
    routed_l = lst(a.full(0.0) + r.moe_routed_compute_s)
    out: list[Prediction] = []
    for i in range(a.num_scenarios):
        ttt_i = ttt_l[i]
        out.append(
            Prediction(
                iteration_time_s=it_l[i],
                tokens_per_s=tps_l[i],
                tokens_per_s_per_gpu=tps_l[i] / n_l[i],
                model_flops_per_iteration=mf_l[i],
                model_tflops_per_gpu=mf_l[i] / it_l[i] / n_l[i] / 1e12,
                mfu=mfu_l[i],
                hfu=hfu_l[i],
                memory_per_gpu_bytes=mem_l[i],
                hbm_bytes=hbm_l[i],
                fits_in_memory=bool(fits_l[i]),
                breakdown=StepBreakdown(
                    compute_s=columns["compute"][i],
                    tp_comm_exposed_s=columns["tp_comm_exposed"][i],
                    cp_comm_exposed_s=columns["cp_comm_exposed"][i],
                    ep_comm_exposed_s=columns["ep_comm_exposed"][i],
                    pp_comm_exposed_s=columns["pp_comm_exposed"][i],
                    pp_bubble_s=columns["pp_bubble"][i],
                    dp_comm_exposed_s=columns["dp_comm_exposed"][i],
                    optimizer_s=columns["optimizer"][i],
                ),
                memory=MemoryBreakdown(
                    weights_bytes=mw[i],
                    gradients_bytes=mg[i],
                    optimizer_bytes=mo[i],
                    activations_bytes=ma[i],
                    overhead_bytes=mh[i],
                    optimizer_step_bytes=ms[i],
                ),
                time_to_train_s=None if math.isnan(ttt_i) else ttt_i,
                moe_routed_compute_s=routed_l[i],
            )
        )
    return out


def predict(scenario: Scenario, efficiency: EfficiencyModel | None = None) -> Prediction:
    """Predict iteration time, throughput, MFU and peak memory of ``scenario``.

    The batch of one of ``predict_batch``: the same engine on Python floats (the one-scenario
    form of ``ScenarioArrays``), the same numbers as in a batch. ``efficiency`` defaults to
    ``DefaultEfficiency()``. Never raises for a valid ``Scenario``; tiny models stay sane
    (every operator costs at least ``kernel_min_time_s``).
    """
    return predict_batch([scenario], efficiency)[0]
