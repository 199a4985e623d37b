"""Frozen value objects: scenarios (model, hardware, parallelism, training) and job state."""

from planner.specs.hardware import GpuSpec, HardwareSpec, Precision
from planner.specs.model import Activation, ModelSpec
from planner.specs.parallelism import ParallelismSpec, Recompute
from planner.specs.scenario import Framework, Scenario, TrainingSpec

__all__ = [
    "Activation",
    "Framework",
    "GpuSpec",
    "HardwareSpec",
    "ModelSpec",
    "ParallelismSpec",
    "Precision",
    "Recompute",
    "Scenario",
    "TrainingSpec",
]
