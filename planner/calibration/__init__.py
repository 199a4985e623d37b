"""Calibration: sampled operator regressors, collective latency-bandwidth fits, and an
``EfficiencyModel`` that answers the engine from them (pure; samples come from
``adapters.sampling`` and ``adapters.nccl``).

Public API:

* operators and samples: ``OpKind``, ``Pass``, ``OpKey``, ``OP_DIMS``, ``op_flops``,
  ``op_bytes``, ``OpSample``, ``read_op_samples_csv``, ``format_op_samples_csv``;
* designs: ``design(profile, rng, scale=...)``, ``DesignPoint``, ``PROFILES``;
* operator models: ``OperatorRegressor`` (scikit-learn estimator, CV model selection),
  ``fit_calibration(op_samples, collective_samples)`` -> ``Calibration`` (``to_json`` /
  ``from_json``: data, not pickles), ``FittedOperator``, ``HeldOutError``;
* collectives: ``Collective``, ``Tier``, ``CollectiveSample``, ``CollectiveModel``,
  ``fit_collectives``, ``fit_alpha_beta``, ``bus_factor``, CSV helpers;
* the engine hook: ``CalibratedEfficiency`` (``describe()`` gives the provenance);
* ``device_spec(calibration)``: a ``GpuSpec`` of a sampled device the catalog lacks (a CPU);
* online recalibration: ``OnlineCalibration`` (observe / correction / apply / error_stats /
  recalibrate, ``to_json``/``from_json``), ``CalibrationKey``, ``key_from_scenario``;
* calibration from observed runs (``planner calibrate observe``): ``read_observed_runs``,
  ``observe_runs`` / ``fit_observed`` -> ``ObservedCalibration`` (``apply``, ``correct``,
  ``to_json``/``from_json``), ``ObservedParams``, ``RunKey``; ``load_calibration_file`` tells
  the two kinds of calibration file apart.
"""

from planner.calibration.collectives import (
    Collective,
    CollectiveModel,
    CollectiveSample,
    Tier,
    bus_factor,
    fit_alpha_beta,
    fit_collectives,
    format_collective_samples_csv,
    read_collective_samples_csv,
)
from planner.calibration.design import PROFILES, DesignPoint, OpDomain, design
from planner.calibration.device import device_spec
from planner.calibration.efficiency import CalibratedEfficiency
from planner.calibration.files import load_calibration_file
from planner.calibration.model import (
    MEMORY_MODEL,
    Calibration,
    FittedOperator,
    HeldOutError,
    fit_calibration,
)
from planner.calibration.observed import (
    ObservedCalibration,
    ObservedParams,
    fit_observed,
    observe_runs,
)
from planner.calibration.observed_runs import RunKey, read_observed_runs
from planner.calibration.online import (
    CalibrationKey,
    CalibrationLevel,
    Correction,
    ErrorStats,
    GroupEstimate,
    JobObservation,
    OnlineCalibration,
    key_from_scenario,
)
from planner.calibration.ops import OP_DIMS, OP_PASSES, OpKey, OpKind, Pass, op_bytes, op_flops
from planner.calibration.regress import OperatorRegressor
from planner.calibration.samples import OpSample, format_op_samples_csv, read_op_samples_csv

__all__ = [
    "MEMORY_MODEL",
    "OP_DIMS",
    "OP_PASSES",
    "PROFILES",
    "CalibratedEfficiency",
    "Calibration",
    "CalibrationKey",
    "CalibrationLevel",
    "Collective",
    "CollectiveModel",
    "CollectiveSample",
    "Correction",
    "DesignPoint",
    "ErrorStats",
    "FittedOperator",
    "GroupEstimate",
    "HeldOutError",
    "JobObservation",
    "ObservedCalibration",
    "ObservedParams",
    "OnlineCalibration",
    "OpDomain",
    "OpKey",
    "OpKind",
    "OpSample",
    "OperatorRegressor",
    "Pass",
    "RunKey",
    "Tier",
    "bus_factor",
    "design",
    "device_spec",
    "fit_alpha_beta",
    "fit_calibration",
    "fit_collectives",
    "fit_observed",
    "format_collective_samples_csv",
    "format_op_samples_csv",
    "key_from_scenario",
    "load_calibration_file",
    "observe_runs",
    "op_bytes",
    "op_flops",
    "read_collective_samples_csv",
    "read_observed_runs",
    "read_op_samples_csv",
]
