"""The plan: upcoming jobs with their token budgets, dates, priorities and GPU requests.

Public contract: ``docs/capacity-formats.md`` ("Plan file"). ``read_plan(text, source, fleet)``
parses a plan document into a tuple of ``PlannedJob``; every error names the file, line and
field. A job's model and layout come from an inline scenario (the scenario format) or from
Megatron-LM arguments (``planner.scenario.scenario_document_from_megatron_args``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.capacity.documents import ErrorList, Located, check_keys, load_document
from planner.capacity.fields import (
    optional,
    read_bool,
    read_int,
    read_name,
    read_number,
    read_time_limit_s,
    read_timestamp_s,
)
from planner.capacity.fleet import Fleet
from planner.capacity.runtime import DEFAULT_CHECKPOINT_INTERVAL_S
from planner.catalog import get_gpu
from planner.errors import SpecError
from planner.scenario import parse_scenario, scenario_document_from_megatron_args
from planner.specs.scenario import Scenario

__all__ = ["ANY_GPU", "DEFAULT_RUNTIME_LOG_SD", "PlannedJob", "parse_plan", "read_plan"]

ANY_GPU = "any"
"""The ``gpu`` value of a job that may run on any GPU type of the fleet."""

DEFAULT_RUNTIME_LOG_SD = 0.3
"""Log-space sd of a planned job's runtime around the model's prediction (the service's
``model_prior_log_sd`` default, the ETA's prior)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedJob:
    """One upcoming job of the plan.

    ``scenario`` is the validated model and layout at the requested GPU type and count (for
    ``gpu: any`` or ``num_gpus: recommend`` a stand-in GPU/count, replaced when the job is
    placed); ``document`` the scenario document it was read from (for layout searches).
    ``gpu`` is a catalog key or None (any type); ``num_gpus`` None means "recommend".
    Times are epoch seconds; ``priority``: higher starts first; ``time_limit_s`` what the user
    asks the scheduler for (None: the pool default, else unlimited).
    ``checkpoint_interval_s``: seconds between checkpoints (``checkpoint_interval_given``
    False: the documented default, ``runtime.DEFAULT_CHECKPOINT_INTERVAL_S``), unless
    ``checkpoint_interval_iters`` (Megatron-LM's ``--save-interval`` in the job's
    ``megatron_args``) gives it in iterations, which the workload turns into seconds at the
    predicted step time. ``layout_best``:
    the plan lets the planner pick another layout (``layout: best``) when a what-if moves the
    job where its own does not tile. ``requeue``: a run stopped by its time limit or a failure
    goes back to the queue and resumes from its last checkpoint (Slurm ``--requeue``, Kueue
    re-admission); False: a time-limit kill ends the job unfinished.
    """

    name: str
    scenario: Scenario
    document: Mapping[str, Any]
    gpu: str | None
    pool: str | None = None
    num_gpus: int | None
    earliest_start_s: float | None = None
    deadline_s: float | None = None
    priority: float = 0.0
    team: str = ""
    queue: str = ""
    time_limit_s: float | None = None
    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S
    checkpoint_interval_given: bool = False
    checkpoint_interval_iters: int | None = None
    runtime_log_sd: float = DEFAULT_RUNTIME_LOG_SD
    layout_best: bool = False
    requeue: bool = True


_JOB_KEYS = (
    "name", "scenario", "megatron_args", "total_tokens", "train_iters", "earliest_start",
    "deadline", "priority", "team", "queue", "gpu", "pool", "num_gpus", "time_limit",
    "checkpoint_interval_minutes", "runtime_log_sd", "layout", "requeue",
)  # fmt: skip
_DEFAULT_KEYS = (
    "priority", "team", "queue", "time_limit", "checkpoint_interval_minutes", "runtime_log_sd",
    "earliest_start", "layout", "requeue",
)  # fmt: skip


_SAVE_INTERVAL = re.compile(r"--save[-_]interval[=\s]+(\d+)")
"""Megatron-LM's checkpoint interval in iterations (``--save-interval 500``)."""


def _locate(node: Located, dotted: str) -> Located:
    """The deepest child of ``node`` along ``dotted`` (for errors raised by ``parse_scenario``)."""
    current = node
    for part in dotted.split("."):
        child = current.children.get(part)
        if child is None:
            break
        current = child
    return current


def _scenario_document(job: Located, name: str) -> tuple[dict[str, object], Located]:
    scenario = optional(job, "scenario")
    args = optional(job, "megatron_args")
    if (scenario is None) == (args is None):
        raise job.error(
            "give exactly one of scenario (the scenario format) or megatron_args (a Megatron-LM "
            "command line)",
            "scenario" if scenario is not None else None,
        )
    if scenario is not None:
        return copy.deepcopy(dict(scenario.mapping().value)), scenario
    assert args is not None
    if not isinstance(args.value, str):
        raise args.error("must be the Megatron-LM arguments as one string")
    doc = scenario_document_from_megatron_args(args.value, num_gpus=None, gpu=None, name=name)
    if doc is None:
        raise args.error("needs at least --num-layers, --hidden-size and --num-attention-heads")
    return doc, args


def _model_parallel(doc: Mapping[str, object]) -> int:
    par = doc.get("parallelism")
    size = 1
    if isinstance(par, Mapping):
        for key in ("tensor_parallel", "pipeline_parallel", "context_parallel"):
            value = par.get(key, 1)
            size *= value if isinstance(value, int) and value > 0 else 1
    return size


def _gpu(job: Located, doc: Mapping[str, object], fleet: Fleet) -> tuple[str | None, str | None]:
    """(catalog key or None for any, explicit pool or None)."""
    pool_node = optional(job, "pool")
    if pool_node is not None:
        name = str(pool_node.value)
        if name not in fleet.pool_names:
            raise pool_node.error(f"no pool {name!r}; the fleet has {', '.join(fleet.pool_names)}")
        return fleet.pool(name).gpu, name
    gpu_node = optional(job, "gpu")
    hardware = doc.get("hardware")
    raw = gpu_node.value if gpu_node is not None else None
    if raw is None and isinstance(hardware, Mapping):
        raw = hardware.get("gpu")
    if raw is None or raw == ANY_GPU:
        return None, None
    try:
        key = get_gpu(str(raw), field="gpu").key
    except SpecError as exc:
        raise (gpu_node or job).error(exc.message, None if gpu_node else "gpu") from None
    if key not in {p.gpu for p in fleet.pools}:
        where = gpu_node or job
        have = ", ".join(sorted({p.gpu for p in fleet.pools}))
        raise where.error(
            f"no pool of the fleet has {key} GPUs (it has {have}); use any or one of them"
        )
    return key, None


def _num_gpus(job: Located, doc: Mapping[str, object]) -> int | None:
    node = optional(job, "num_gpus")
    if node is not None and node.value == "recommend":
        return None
    if node is not None:
        return read_int(node)
    hardware = doc.get("hardware")
    if isinstance(hardware, Mapping) and isinstance(hardware.get("num_gpus"), int):
        return int(hardware["num_gpus"])
    raise job.error(
        "is required: a GPU count, or recommend to let the planner size the job", "num_gpus"
    )


def _section(doc: Mapping[str, object], key: str, doc_node: Located) -> dict[str, object]:
    """A copy of the mapping ``doc[key]`` of a scenario document (empty when absent or empty);
    raises the document's error naming ``key`` when it is not a mapping."""
    value = doc.get(key)
    if isinstance(value, Mapping):
        return dict(value)
    if not value:
        return {}
    where = _locate(doc_node, key) if doc_node.path.endswith("scenario") else doc_node
    message = f"must be a mapping of its fields, got {value!r}"
    raise where.error(f"{key}: {message}" if where is doc_node else message)


def _model(
    job: Located, name: str, fleet: Fleet
) -> tuple[Scenario, dict[str, object], str | None, str | None, int | None]:
    """(scenario, document, gpu key or None, pool or None, num_gpus or None) of a job."""
    doc, doc_node = _scenario_document(job, name)
    gpu, pool = _gpu(job, doc, fleet)
    num_gpus = _num_gpus(job, doc)
    training = _section(doc, "training", doc_node)
    for key in ("total_tokens", "train_iters"):
        if (node := optional(job, key)) is not None:
            training.pop("total_tokens" if key == "train_iters" else "train_iters", None)
            training[key] = read_number(node) if key == "total_tokens" else read_int(node)
    if "total_tokens" not in training and "train_iters" not in training:
        raise job.error("is required: the job's token budget (or train_iters)", "total_tokens")
    doc["training"] = training
    doc["name"] = name
    stand_in_gpu = gpu or fleet.pools[0].gpu
    given = doc.get("hardware")
    hardware = {
        k: v for k, v in _section(doc, "hardware", doc_node).items() if k not in ("gpu", "num_gpus")
    }
    if gpu is None or (isinstance(given, Mapping) and given.get("gpu") != gpu):
        hardware = {}  # another GPU type: the catalog's node and network values
    doc["hardware"] = {
        **hardware,
        "gpu": stand_in_gpu,
        "num_gpus": num_gpus or _model_parallel(doc),
    }
    if num_gpus is None and isinstance(parallelism := doc.get("parallelism"), Mapping):
        doc["parallelism"] = {k: v for k, v in parallelism.items() if k != "data_parallel"}
    try:
        scenario = parse_scenario(doc)
    except SpecError as exc:
        where = _locate(doc_node, exc.field) if doc_node.path.endswith("scenario") else doc_node
        raise where.error(
            f"{exc.field}: {exc.message}" if where is doc_node else exc.message
        ) from None
    return scenario, doc, gpu, pool, num_gpus


def _read_layout(node: Located | None) -> bool:
    """True for ``layout: best`` (the planner may pick another layout), False for ``fixed``."""
    if node is None:
        return False
    if node.value not in ("best", "fixed"):
        raise node.error(
            "must be fixed (run the layout given) or best (the planner may pick the fastest "
            f"valid layout when a what-if moves the job), got {node.value!r}"
        )
    return bool(node.value == "best")


def _parse_job(
    job: Located, defaults: Located | None, fleet: Fleet, start_s: float | None
) -> PlannedJob:
    """One job; every bad field of it reported together (``MultiDocumentError``)."""
    errors = ErrorList()
    errors.take(lambda: check_keys(job, _JOB_KEYS), None)
    name_node = optional(job, "name")
    if name_node is None:
        errors.found.append(job.error("is required; give every job a unique name", "name"))
    name = errors.take(lambda: read_name(name_node, "a job name") if name_node else "", "")
    model = errors.take(lambda: _model(job, name or "job", fleet), None)

    def pick(key: str) -> Located | None:
        found = optional(job, key)
        if found is None and defaults is not None:
            found = optional(defaults, key)
        return found

    earliest = pick("earliest_start")
    deadline_node = optional(job, "deadline")
    earliest_s = errors.take(
        lambda: read_timestamp_s(earliest, start_s) if earliest else None, None
    )
    deadline_s = errors.take(
        lambda: read_timestamp_s(deadline_node, start_s) if deadline_node else None, None
    )
    if (
        deadline_node is not None
        and earliest_s is not None
        and deadline_s is not None
        and deadline_s <= earliest_s
    ):
        errors.found.append(
            deadline_node.error("is not after earliest_start; move the deadline or the start")
        )
    priority, team, queue = pick("priority"), pick("team"), pick("queue")
    limit, ckpt, log_sd = (
        pick("time_limit"),
        pick("checkpoint_interval_minutes"),
        pick("runtime_log_sd"),
    )
    queue_name = errors.take(lambda: read_name(queue, "a queue name") if queue else "", "")
    priority_value = errors.take(
        lambda: read_number(priority, positive=False) if priority else 0.0, 0.0
    )
    team_name = errors.take(
        lambda: read_name(team, "a team name") if team else (queue_name or "default"), "default"
    )
    limit_s = errors.take(lambda: read_time_limit_s(limit) if limit else None, None)
    ckpt_s = errors.take(
        lambda: read_number(ckpt) * 60.0 if ckpt else DEFAULT_CHECKPOINT_INTERVAL_S,
        DEFAULT_CHECKPOINT_INTERVAL_S,
    )
    log_sd_value = errors.take(
        lambda: read_number(log_sd, positive=False) if log_sd else DEFAULT_RUNTIME_LOG_SD,
        DEFAULT_RUNTIME_LOG_SD,
    )
    best = errors.take(lambda: _read_layout(pick("layout")), False)
    args = optional(job, "megatron_args")
    save = _SAVE_INTERVAL.search(args.value) if args and isinstance(args.value, str) else None
    requeue_node = pick("requeue")
    requeue = errors.take(lambda: read_bool(requeue_node) if requeue_node else True, True)
    errors.check()
    assert model is not None
    scenario, doc, gpu, pool, num_gpus = model
    return PlannedJob(
        name=name,
        scenario=scenario,
        document=doc,
        gpu=gpu,
        pool=pool,
        num_gpus=num_gpus,
        earliest_start_s=earliest_s,
        deadline_s=deadline_s,
        priority=priority_value,
        team=team_name,
        queue=queue_name,
        time_limit_s=limit_s,
        checkpoint_interval_s=ckpt_s,
        checkpoint_interval_given=ckpt is not None or save is not None,
        checkpoint_interval_iters=(
            int(save[1]) if save and optional(job, "checkpoint_interval_minutes") is None else None
        ),
        runtime_log_sd=log_sd_value,
        layout_best=best,
        requeue=requeue,
    )


def parse_plan(
    root: Located, fleet: Fleet, *, start_s: float | None = None
) -> tuple[PlannedJob, ...]:
    """The planned jobs of a plan document, in file order (see ``docs/capacity-formats.md``).

    ``fleet`` resolves ``gpu`` and ``pool`` references; relative dates (``+19d``) count from
    ``start_s`` (the review's start), else from the fleet's ``start``. Raises ``DocumentError``
    (``file:line: field: what is wrong and the fix``).
    """
    anchor = start_s if start_s is not None else fleet.start_s
    errors = ErrorList()
    errors.take(lambda: check_keys(root, ("defaults", "jobs")), None)
    defaults = optional(root, "defaults")
    if defaults is not None:
        errors.take(lambda: check_keys(defaults, _DEFAULT_KEYS), None)
    jobs_node = root.mapping().get("jobs")
    if jobs_node is None:
        errors.found.append(root.error("is required; list the planned jobs", "jobs"))
    jobs: list[PlannedJob] = []
    seen: set[str] = set()
    for item in errors.items(jobs_node):
        job = errors.call(None, _parse_job, item, defaults, fleet, anchor)
        if job is None:
            continue
        if job.name in seen:
            errors.found.append(
                item.error(f"duplicate job name {job.name!r}; names must be unique", "name")
            )
        seen.add(job.name)
        jobs.append(job)
    errors.check()
    return tuple(jobs)


def read_plan(
    text: str, source: str, fleet: Fleet, *, start_s: float | None = None
) -> tuple[PlannedJob, ...]:
    """Parse the text of a plan file (YAML or JSON) named ``source`` (relative dates from
    ``start_s``, else from the fleet's ``start``)."""
    return parse_plan(load_document(text, source), fleet, start_s=start_s)
