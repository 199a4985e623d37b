"""Performance model: operators, collectives, pipeline schedule, memory and step-time prediction.

Public API: ``predict(scenario)``, ``predict_batch(scenarios)`` (one vectorized pass),
``evaluate_batch`` (array form), ``Prediction``; the efficiency interface ``EfficiencyModel``
with its analytic default ``DefaultEfficiency`` (``from_constants``), and the constants file
helpers ``default_constants``, ``load_constants``, ``write_constants``.
"""

from planner.perf.constants import default_constants, load_constants, write_constants
from planner.perf.efficiency import CommKind, DefaultEfficiency, DeviceArrays, EfficiencyModel
from planner.perf.memory import MemoryBreakdown, memory_per_gpu
from planner.perf.step import Prediction, StepBreakdown, evaluate_batch, predict, predict_batch

__all__ = [
    "CommKind",
    "DefaultEfficiency",
    "DeviceArrays",
    "EfficiencyModel",
    "MemoryBreakdown",
    "Prediction",
    "StepBreakdown",
    "default_constants",
    "evaluate_batch",
    "load_constants",
    "memory_per_gpu",
    "predict",
    "predict_batch",
    "write_constants",
]
