"""Capacity-planning reviews: forecast the fleet, simulate the queue, answer "what if" and
"how many GPUs". Pure core: no I/O; randomness only through an explicit ``numpy.random.Generator``.

Inputs (formats in ``docs/capacity-formats.md``): ``read_fleet`` -> ``Fleet``, ``read_plan`` ->
``PlannedJob`` tuple, ``read_snapshot`` -> ``QueueSnapshot`` (``QueuedJob``: a ``JobState`` plus
its predicted runtime band; ``snapshot_document`` writes one back), ``read_what_ifs`` ->
``WhatIf`` tuple; errors are ``DocumentError`` (``file:line: field: what is wrong and the
fix``). ``planner.capacity.inputs.review_inputs`` reads them together with the review's start,
which anchors relative dates (``+19d``); ``planner.capacity.documents.located`` reads request
bodies the same way.

Outputs: ``run_review`` -> ``Review`` (base + what-ifs as ``ScenarioResult``, ``Sizing`` per GPU
type, ``NotCapacity`` for the missed deadlines no capacity saves; ``to_dict`` for JSON,
``review_markdown`` / ``review_html`` for documents);
``forecast_pending`` -> ``PendingForecast`` per pending job (for ``/v1/jobs``), with
``fleet_from_nodes`` when no fleet file is configured. ``Executor`` / ``LocalExecutor`` run the
Monte Carlo chunks (``adapters.ray.RayExecutor`` past one machine).
"""

from planner.capacity.build import PredictionCache, build_workload
from planner.capacity.documents import DocumentError
from planner.capacity.evaluate import Case, Evaluator
from planner.capacity.fleet import (
    CapacityChange,
    ClusterQueue,
    Fleet,
    Placement,
    Pool,
    SchedulerKind,
    read_fleet,
)
from planner.capacity.markdown import review_markdown
from planner.capacity.montecarlo import Draws, Executor, LocalExecutor, Outcomes, simulate_chunk
from planner.capacity.pending import PendingForecast, fleet_from_nodes, forecast_pending
from planner.capacity.plan import PlannedJob, read_plan
from planner.capacity.review import BASE_SCENARIO, Review, run_review
from planner.capacity.runtime import (
    LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
    InterruptionModel,
    RuntimeBand,
)
from planner.capacity.simulate import SampleOutcome, Simulator
from planner.capacity.sizing import NotCapacity, Sizing
from planner.capacity.snapshot import QueuedJob, QueueSnapshot, read_snapshot, snapshot_document
from planner.capacity.stats import (
    JobForecast,
    Occupancy,
    PoolWeek,
    QueueUsage,
    ScenarioResult,
    TeamUsage,
)
from planner.capacity.whatif import WhatIf, apply_what_if, read_what_ifs
from planner.capacity.workload import Workload

__all__ = [
    "BASE_SCENARIO",
    "LLAMA3_INTERRUPTIONS_PER_GPU_HOUR",
    "CapacityChange",
    "Case",
    "ClusterQueue",
    "DocumentError",
    "Draws",
    "Evaluator",
    "Executor",
    "Fleet",
    "InterruptionModel",
    "JobForecast",
    "LocalExecutor",
    "NotCapacity",
    "Occupancy",
    "Outcomes",
    "PendingForecast",
    "Placement",
    "PlannedJob",
    "Pool",
    "PoolWeek",
    "PredictionCache",
    "QueueSnapshot",
    "QueueUsage",
    "QueuedJob",
    "Review",
    "RuntimeBand",
    "SampleOutcome",
    "ScenarioResult",
    "SchedulerKind",
    "Simulator",
    "Sizing",
    "TeamUsage",
    "WhatIf",
    "Workload",
    "apply_what_if",
    "build_workload",
    "fleet_from_nodes",
    "forecast_pending",
    "read_fleet",
    "read_plan",
    "read_snapshot",
    "read_what_ifs",
    "review_markdown",
    "run_review",
    "simulate_chunk",
    "snapshot_document",
]
