"""What-if scenarios: capacity added or removed per pool by date, a job moved to another GPU
type or count, its layout changed (given, or the layout search's best), priorities changed.

Public contract: ``docs/capacity-formats.md`` ("What-if file"). ``read_what_ifs(text, source,
fleet, planned)`` returns the scenarios of one file (a mapping is one scenario, a list several);
``apply_what_if`` turns one into a changed (fleet, plan, queue).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner.capacity.documents import ErrorList, Located, check_keys, load_document
from planner.capacity.fields import (
    optional,
    read_int,
    read_name,
    read_number,
    read_timestamp_s,
    require,
)
from planner.capacity.fleet import CapacityChange, Fleet, Pool
from planner.capacity.plan import ANY_GPU, PlannedJob
from planner.capacity.scaling import best_layout
from planner.capacity.snapshot import QueueSnapshot
from planner.catalog import get_gpu
from planner.errors import InfeasibleError, SpecError
from planner.scenario import parse_scenario

__all__ = ["CapacityEdit", "JobEdit", "WhatIf", "apply_what_if", "parse_what_ifs", "read_what_ifs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityEdit:
    """``gpus`` added (negative: removed) to ``pool`` from ``at_s``; a new pool needs ``gpu``
    (catalog key) and may give ``cost_per_gpu_hour``."""

    pool: str
    gpus: int
    at_s: float
    gpu: str | None = None
    cost_per_gpu_hour: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEdit:
    """Changes to one job (planned: any field; today's queue: ``priority`` only).

    ``gpu``: catalog key or ``any``; ``num_gpus``: a count or ``recommend``; ``layout``:
    ``best`` (the layout search's fastest) or a ``parallelism`` mapping (scenario format)."""

    job: str
    gpu: str | None = None
    pool: str | None = None
    num_gpus: int | str | None = None
    priority: float | None = None
    layout: str | Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIf:
    """A named scenario: capacity edits and job edits, applied to the base review."""

    name: str
    description: str = ""
    capacity: tuple[CapacityEdit, ...] = ()
    jobs: tuple[JobEdit, ...] = ()


def _capacity(node: Located, fleet: Fleet, start_s: float | None) -> CapacityEdit:
    check_keys(node, ("pool", "gpus", "date", "gpu", "cost_per_gpu_hour"))
    pool = read_name(
        require(node, "pool", "the pool to change (or a new pool's name)"), "a pool name"
    )
    gpu_node = optional(node, "gpu")
    gpu = None
    if gpu_node is not None:
        try:
            gpu = get_gpu(str(gpu_node.value), field="gpu").key
        except SpecError as exc:
            raise gpu_node.error(exc.message) from None
    if pool not in fleet.pool_names and gpu is None:
        raise node.error(
            f"{pool!r} is no pool of the fleet ({', '.join(fleet.pool_names)}); "
            "give gpu to add a new pool",
            "pool",
        )
    cost = optional(node, "cost_per_gpu_hour")
    date = optional(node, "date")
    return CapacityEdit(
        pool=pool,
        gpus=read_int(require(node, "gpus", "GPUs added (negative: removed)"), minimum=-(10**9)),
        at_s=read_timestamp_s(date, start_s) if date else 0.0,
        gpu=gpu,
        cost_per_gpu_hour=read_number(cost, positive=False) if cost else None,
    )


def _job(node: Located, fleet: Fleet, names: set[str], new_pools: tuple[str, ...]) -> JobEdit:
    check_keys(node, ("job", "gpu", "pool", "num_gpus", "priority", "layout", "parallelism"))
    job = str(require(node, "job", "the job's name (plan) or id (today's queue)").value)
    if job not in names:
        raise node.error(f"no job {job!r} in the plan or the queue", "job")
    gpu_node, pool_node, count = (
        optional(node, "gpu"),
        optional(node, "pool"),
        optional(node, "num_gpus"),
    )
    gpu = None
    if gpu_node is not None:
        gpu = ANY_GPU if gpu_node.value == ANY_GPU else None
        if gpu is None:
            try:
                gpu = get_gpu(str(gpu_node.value), field="gpu").key
            except SpecError as exc:
                raise gpu_node.error(exc.message) from None
    pools = (*fleet.pool_names, *new_pools)
    if pool_node is not None and pool_node.value not in pools:
        raise pool_node.error(f"no pool {pool_node.value!r}; the fleet has {', '.join(pools)}")
    layout_node, par_node = optional(node, "layout"), optional(node, "parallelism")
    if layout_node is not None and layout_node.value != "best":
        raise layout_node.error("must be best (or give parallelism: {...} instead)")
    priority = optional(node, "priority")
    num: int | str | None = None
    if count is not None:
        num = "recommend" if count.value == "recommend" else read_int(count)
    return JobEdit(
        job=job,
        gpu=gpu,
        pool=str(pool_node.value) if pool_node else None,
        num_gpus=num,
        priority=read_number(priority, positive=False) if priority else None,
        layout="best" if layout_node else (dict(par_node.mapping().value) if par_node else None),
    )


def _scenario_name(node: Located) -> str:
    return read_name(require(node, "name", "name the scenario"), "a scenario name")


def _queue_names(snapshot: QueueSnapshot | None) -> set[str]:
    return {j.state.job_id for j in snapshot.jobs} if snapshot else set()


def parse_what_ifs(
    root: Located,
    fleet: Fleet,
    planned: Sequence[PlannedJob],
    snapshot: QueueSnapshot | None = None,
    *,
    start_s: float | None = None,
) -> tuple[WhatIf, ...]:
    """The scenarios of a what-if document (a mapping or a list of them); relative dates
    (``+14d``) count from ``start_s`` (the review's start), else from the fleet's ``start``."""
    anchor = start_s if start_s is not None else fleet.start_s
    nodes = list(root.items()) if isinstance(root.value, list) else [root]
    names = {j.name for j in planned} | _queue_names(snapshot)
    out = []
    errors = ErrorList()
    for node in nodes:
        errors.call(None, check_keys, node, ("name", "description", "capacity", "jobs"))
        name = errors.call("", _scenario_name, node)
        cap, jobs, desc = (
            optional(node, "capacity"),
            optional(node, "jobs"),
            optional(node, "description"),
        )
        capacity: list[CapacityEdit] = []
        for c in errors.items(cap):
            edit = errors.call(None, _capacity, c, fleet, anchor)
            if edit is not None:
                capacity.append(edit)
        new_pools = tuple(c.pool for c in capacity if c.gpu is not None)
        edits: list[JobEdit] = []
        for j in errors.items(jobs):
            job_edit = errors.call(None, _job, j, fleet, names, new_pools)
            if job_edit is not None:
                edits.append(job_edit)
        out.append(
            WhatIf(
                name=name,
                description=str(desc.value) if desc else "",
                capacity=tuple(capacity),
                jobs=tuple(edits),
            )
        )
    errors.check()
    return tuple(out)


def read_what_ifs(
    text: str,
    source: str,
    fleet: Fleet,
    planned: Sequence[PlannedJob],
    snapshot: QueueSnapshot | None = None,
    *,
    start_s: float | None = None,
) -> tuple[WhatIf, ...]:
    """Parse the text of a what-if file named ``source`` (relative dates from ``start_s``, else
    from the fleet's ``start``)."""
    return parse_what_ifs(load_document(text, source), fleet, planned, snapshot, start_s=start_s)


def _apply_capacity(fleet: Fleet, edits: Sequence[CapacityEdit], start_s: float) -> Fleet:
    pools = list(fleet.pools)
    for edit in edits:
        at_s = max(edit.at_s, start_s)
        names = [p.name for p in pools]
        if edit.pool in names:
            i = names.index(edit.pool)
            pool = pools[i]
            changes = sorted(
                (*pool.changes, CapacityChange(at_s=at_s, delta_gpus=edit.gpus)),
                key=lambda c: c.at_s,
            )
            pools[i] = dataclasses.replace(pool, changes=tuple(changes))
            if min(pools[i].capacity_at(c.at_s) for c in changes) < 0:
                raise SpecError(
                    f"capacity[{edit.pool}].gpus",
                    f"removes more GPUs than the pool has ({pool.capacity_at(at_s)})",
                )
        else:
            assert edit.gpu is not None
            pools.append(
                Pool(
                    name=edit.pool,
                    gpu=edit.gpu,
                    num_gpus=0,
                    cost_per_gpu_hour=edit.cost_per_gpu_hour,
                    partitions=(edit.pool,),
                    changes=(CapacityChange(at_s=at_s, delta_gpus=edit.gpus),),
                )
            )
    return dataclasses.replace(fleet, pools=tuple(pools))


def _apply_job(job: PlannedJob, edit: JobEdit, fleet: Fleet) -> PlannedJob:
    gpu, pool, num_gpus, priority = job.gpu, job.pool, job.num_gpus, job.priority
    if edit.gpu is not None:
        gpu, pool = (None if edit.gpu == ANY_GPU else edit.gpu), None
    if edit.pool is not None:
        pool, gpu = edit.pool, fleet.pool(edit.pool).gpu
    if edit.num_gpus is not None:  # a count, or "recommend" (None: the review chooses)
        num_gpus = edit.num_gpus if isinstance(edit.num_gpus, int) else None
    if edit.priority is not None:
        priority = edit.priority
    job = dataclasses.replace(job, gpu=gpu, pool=pool, num_gpus=num_gpus, priority=priority)
    if edit.layout is None:
        return job
    gpu = job.gpu or fleet.pools[0].gpu
    num = job.num_gpus or job.scenario.hardware.num_gpus
    if edit.layout == "best":
        try:
            scenario = best_layout(job.scenario, gpu, num)
        except (InfeasibleError, SpecError) as exc:
            raise SpecError(
                f"jobs[{job.name}].layout", f"no layout on {num} x {gpu}: {exc}"
            ) from None
    else:
        assert isinstance(edit.layout, Mapping)
        doc = {
            **job.document,
            "parallelism": {**dict(job.document.get("parallelism") or {}), **edit.layout},
        }
        doc["hardware"] = {"gpu": gpu, "num_gpus": num}
        doc["parallelism"].pop("data_parallel", None)
        try:
            scenario = parse_scenario(doc)
        except SpecError as exc:
            raise SpecError(f"jobs[{job.name}].{exc.field}", exc.message) from None
    return dataclasses.replace(job, scenario=scenario, num_gpus=num)


def apply_what_if(
    what_if: WhatIf,
    fleet: Fleet,
    planned: Sequence[PlannedJob],
    snapshot: QueueSnapshot | None,
    *,
    start_s: float,
) -> tuple[Fleet, tuple[PlannedJob, ...], QueueSnapshot | None]:
    """The (fleet, plan, queue) of ``what_if``. Capacity edits dated before ``start_s`` apply
    from the start. Raises ``SpecError`` naming the edit for a change a job cannot take (a
    running or pending job's GPUs or layout, a layout that does not fit)."""
    fleet = _apply_capacity(fleet, what_if.capacity, start_s)
    by_name = {j.name: j for j in planned}
    queue = {j.state.job_id: j for j in snapshot.jobs} if snapshot else {}
    for edit in what_if.jobs:
        if edit.job in by_name:
            by_name[edit.job] = _apply_job(by_name[edit.job], edit, fleet)
        elif edit.job in queue:
            if (edit.gpu, edit.pool, edit.num_gpus, edit.layout) != (None, None, None, None):
                raise SpecError(
                    f"jobs[{edit.job}]", "a job already in the queue can only change priority"
                )
            if edit.priority is not None:
                queue[edit.job] = dataclasses.replace(queue[edit.job], priority=edit.priority)
    new_snapshot = dataclasses.replace(snapshot, jobs=tuple(queue.values())) if snapshot else None
    return fleet, tuple(by_name[j.name] for j in planned), new_snapshot
