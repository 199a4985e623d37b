"""Performance model: FLOPs, collectives, pipeline schedule, memory and step-time prediction."""

from planner.perf.efficiency import CommKind, DefaultEfficiency, EfficiencyModel
from planner.perf.memory import MemoryBreakdown, memory_per_gpu
from planner.perf.step import Prediction, StepBreakdown, predict

__all__ = [
    "CommKind",
    "DefaultEfficiency",
    "EfficiencyModel",
    "MemoryBreakdown",
    "Prediction",
    "StepBreakdown",
    "memory_per_gpu",
    "predict",
]
