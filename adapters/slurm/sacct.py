"""``sacct --json`` (openapi/dbv0.0.38) → :class:`~planner.specs.job.JobState` per job.

Errors and accepted shapes: :mod:`adapters.slurm.output`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.slurm.gres import single_gpu_type
from adapters.slurm.output import (
    SCHEDULER,
    SOURCE_SACCT,
    OutputReader,
    display_job_id,
    job_times,
    slurm_state_to_status,
)
from planner.errors import SourcePermanentError
from planner.specs.job import JobState


def is_accounting_disabled(text: str) -> bool:
    """True when sacct answered that accounting storage is disabled (no slurmdbd; 22.05 prints
    "Slurm accounting storage is disabled" on stderr and exits 1, also with ``--json``)."""
    return "accounting storage is disabled" in text.lower()


def parse_sacct_json(
    text: str, *, cluster: str | None = None, include_active: bool = False
) -> list[JobState]:
    """``sacct --json`` (openapi/dbv0.0.38) text → :class:`JobState` per job (steps ignored).

    By default only ended jobs are returned (their final state, start/end times); pass
    ``include_active=True`` for all. GPU count from ``tres.allocated`` ``gres``/``gpu`` entries
    (``gpus_allocated=True``), else from ``tres.requested``; needs
    ``AccountingStorageTRES=gres/gpu``. ``comment`` from ``comment.job`` (filled once the job
    ended, with ``AccountingStoreFlags=job_comment``). ``stdout_path`` and ``command`` are not in
    22.05's sacct JSON and stay ``None``. Raises like :func:`parse_squeue_json`.

    One job per id: once Slurm's job ids were reset (a controller started on a fresh
    StateSaveLocation, or ids wrapped at MaxJobId) the accounting database holds several jobs
    under one id and sacct prints them all; the one submitted last is kept, as ``sacct --jobs``
    does without ``--duplicates``.
    """
    if is_accounting_disabled(text):
        raise SourcePermanentError(SOURCE_SACCT, "Slurm accounting storage is disabled")
    reader = OutputReader(SOURCE_SACCT)
    latest: dict[str, JobState] = {}
    for i, raw in enumerate(reader.load(text, "jobs")):
        job = _sacct_job(reader, raw, f"jobs[{i}]", cluster)
        kept = latest.get(job.job_id)
        if kept is None or (job.submit_time_s or 0.0) >= (kept.submit_time_s or 0.0):
            latest[job.job_id] = job
    return [j for j in latest.values() if include_active or not j.status.is_active]


def _sacct_job(
    reader: OutputReader, raw: Mapping[str, Any], where: str, cluster: str | None
) -> JobState:
    job_id = reader.required_int(raw, "job_id", where)
    array = reader.obj(raw, "array", where)
    array_job_id = reader.int_(array, "job_id", f"{where}.array")
    array_task = reader.int_(array, "task_id", f"{where}.array")
    array_tasks = reader.str_(array, "task", f"{where}.array")
    het = reader.obj(raw, "het", where)
    het_job_id = reader.int_(het, "job_id", f"{where}.het")
    display_id = display_job_id(job_id, array_job_id, array_task, array_tasks)
    if het_job_id:
        display_id = f"{het_job_id}+{reader.int_(het, 'job_offset', f'{where}.het') or 0}"

    state = reader.obj(raw, "state", where)
    status = slurm_state_to_status(reader.str_(state, "current", f"{where}.state"))
    reason = reader.str_(state, "reason", f"{where}.state")
    times = reader.obj(raw, "time", where)
    tw = f"{where}.time"
    nodes = reader.hostlist(raw, "nodes", where)
    tres = reader.obj(raw, "tres", where)
    num_gpus, gpu_type = _sacct_gpus(
        reader, reader.list_(tres, "allocated", f"{where}.tres"), where
    )
    allocated = num_gpus > 0
    if not allocated:
        num_gpus, gpu_type = _sacct_gpus(
            reader, reader.list_(tres, "requested", f"{where}.tres"), where
        )
    comment = reader.obj(raw, "comment", where)
    start = reader.time_(times, "start", tw)
    end = reader.time_(times, "end", tw)
    start, end, expected_start = job_times(status, start, end)
    return JobState(
        scheduler=SCHEDULER,
        cluster=cluster if cluster is not None else reader.str_(raw, "cluster", where),
        job_id=display_id,
        name=reader.str_(raw, "name", where),
        user=reader.str_(raw, "user", where),
        partition=reader.str_(raw, "partition", where),
        account=reader.str_(raw, "account", where),
        status=status,
        state_reason="" if reason == "None" else reason,
        node_list=nodes,
        num_nodes=reader.int_(raw, "allocation_nodes", where) or len(nodes),
        num_gpus=num_gpus,
        gpus_allocated=allocated,
        gpu_type=gpu_type,
        submit_time_s=reader.time_(times, "submission", tw),
        start_time_s=start,
        end_time_s=end,
        expected_start_time_s=expected_start,
        time_limit_s=reader.time_limit(times, "limit", tw),
        work_dir=reader.str_(raw, "working_directory", where) or None,
        comment=reader.str_(comment, "job", f"{where}.comment"),
    )


def _sacct_gpus(reader: OutputReader, entries: list[Any], where: str) -> tuple[int, str | None]:
    total = 0
    typed_total = 0
    types: list[str] = []
    for j, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise reader.fail(f"{where}.tres[{j}]", "expected an object")
        if entry.get("type") != "gres":
            continue
        name = reader.str_(entry, "name", f"{where}.tres[{j}]")
        count = reader.int_(entry, "count", f"{where}.tres[{j}]") or 0
        if name == "gpu":
            total += count
        elif name.startswith("gpu:"):
            typed_total += count
            types.append(name.split(":", 1)[1])
    return (total or typed_total), single_gpu_type(types)
