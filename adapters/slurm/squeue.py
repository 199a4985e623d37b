"""``squeue --json`` (openapi/v0.0.38) → :class:`~planner.specs.job.JobState`, and the batch
step's output file name as slurmd expands it.

Errors and accepted shapes: :mod:`adapters.slurm.output`.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from adapters.slurm.gres import gpus_from_gres, gpus_from_tres
from adapters.slurm.output import (
    NO_VAL32,
    SCHEDULER,
    SOURCE_SQUEUE,
    OutputReader,
    StreamRestartError,
    display_job_id,
    job_times,
    slurm_state_to_status,
)
from adapters.slurm.resources import job_resources
from planner.specs.job import JobResources, JobState, JobStatus

# %a of a job that is not part of an array expands to NO_VAL in slurmd's fname_create().
_NO_ARRAY_TASK = str(NO_VAL32)
_PATTERN = re.compile(r"%(\d*)([%AaJjNnstux])")


def expand_stdout_path(
    pattern: str,
    *,
    job_id: int,
    job_name: str = "",
    user: str = "",
    work_dir: str | None = None,
    array_job_id: int | None = None,
    array_task_id: int | None = None,
    node: str | None = None,
) -> str:
    """Expand a Slurm output file name pattern as slurmd does for the batch step.

    ``%j`` job id, ``%J`` job id (the batch step prints no step id), ``%A`` array master id
    (job id outside arrays), ``%a`` array task id (4294967294 outside arrays, as slurmd writes),
    ``%x`` job name, ``%u`` user, ``%N`` node (the batch host), ``%n``/``%t`` 0, ``%s`` ``batch``,
    ``%%`` a percent sign; a number after ``%`` zero-pads (``%5j`` → ``00042``). Other letters
    stay as they are (22.05 leaves ``%b`` unexpanded). A pattern containing a backslash is taken
    literally, backslashes removed. A relative result is joined to ``work_dir``.
    """
    if "\\" in pattern:
        path = pattern.replace("\\", "")
    else:
        in_array = array_job_id is not None and array_job_id > 0 and array_task_id is not None
        values = {
            "j": str(job_id),
            "J": str(job_id),
            "A": str(array_job_id if in_array else job_id),
            "a": str(array_task_id) if in_array else _NO_ARRAY_TASK,
            "x": job_name,
            "u": user,
            "N": node or "",
            "n": "0",
            "t": "0",
            "s": "batch",
        }

        def substitute(match: re.Match[str]) -> str:
            width, letter = match.group(1), match.group(2)
            if letter == "%":
                return "%"
            value = values[letter]
            if width and value.isdigit():
                return value.zfill(int(width))
            return value

        path = _PATTERN.sub(substitute, pattern)
    if work_dir and not posixpath.isabs(path):
        path = posixpath.join(work_dir, path)
    return path


@dataclass(frozen=True, slots=True)
class SqueueRecord:
    """A parsed ``squeue --json`` job plus what the source needs to fetch its batch script,
    and, for an active job, what it asks of or holds on each node
    (:mod:`adapters.slurm.resources`)."""

    job: JobState
    slurm_job_id: int
    is_batch: bool
    resources: JobResources | None = None


class SqueueCache:
    """The records of the last ``squeue --json`` answer parsed with this cache, by a digest of
    each job's text: the next answer's unchanged jobs (most of them: 1 % of 10,000 jobs change
    between two polls) are neither decoded nor read again. Holds the digests and records of one
    answer only (no job text)."""

    def __init__(self) -> None:
        self.cluster: str | None = None
        self.records: dict[bytes, SqueueRecord] = {}


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def parse_squeue_records(
    text: str,
    *,
    cluster: str | None = None,
    cache: SqueueCache | None = None,
) -> list[SqueueRecord]:
    """Like :func:`parse_squeue_json`, also returning Slurm's numeric job id and batch flag.
    With ``cache``, a job whose text
    is the same as in the answer parsed last with it keeps its record from then."""
    reader = OutputReader(SOURCE_SQUEUE)

    def parsed(items: Iterable[Any]) -> list[SqueueRecord]:
        out = []
        for i, raw in enumerate(items):
            out.append(_squeue_job(reader, raw, f"jobs[{i}]", cluster))
        return out

    if cache is not None:
        return _parse_with(cache, reader, text, cluster)
    try:  # each record decoded, read and dropped in turn (a 10,000-job answer is 40 MB)
        return parsed(reader.iter_items(text, "jobs"))
    except StreamRestartError:
        return parsed(reader.load(text, "jobs"))


def _parse_with(
    cache: SqueueCache,
    reader: OutputReader,
    text: str,
    cluster: str | None,
) -> list[SqueueRecord]:
    """:func:`parse_squeue_records` through ``cache`` (left holding this answer's records)."""
    before = cache.records if cache.cluster == cluster else {}
    kept: dict[bytes, SqueueRecord] = {}

    def known(piece: str) -> SqueueRecord | None:
        key = _digest(piece)
        record = before.get(key)
        if record is not None:
            kept[key] = record
        return record

    out: list[SqueueRecord] = []
    try:
        for i, (kind, value) in enumerate(reader.iter_known_items(text, "jobs", known)):
            if kind == "known":
                out.append(value)
                continue
            raw, piece = value
            record = _squeue_job(reader, raw, f"jobs[{i}]", cluster)
            kept[_digest(piece)] = record
            out.append(record)
    except StreamRestartError:
        cache.records = {}
        return parse_squeue_records(text, cluster=cluster)
    cache.cluster, cache.records = cluster, kept
    return out


def parse_squeue_json(text: str, *, cluster: str | None = None) -> list[JobState]:
    """``squeue --json`` (openapi/v0.0.38) text → one :class:`JobState` per job record.

    ``cluster`` overrides the cluster name the output carries. Includes the recently ended jobs
    slurmctld still holds (``MinJobAge``). GPU counts come from ``tres_alloc_str`` for jobs that
    were given nodes (``gpus_allocated=True``), else from ``tres_req_str`` (falling back to
    ``tres_per_job``, ``tres_per_node`` × nodes, ``tres_per_task`` × tasks); the GPU type from
    ``gres_detail`` or the typed request. A pending job's ``start_time`` (the backfill estimate)
    becomes ``expected_start_time_s``; active jobs get no ``end_time_s`` (squeue's is the limit,
    start + 1 year when unlimited). ``stdout_path`` is expanded and absolute (``None`` for
    interactive ``srun``/``salloc`` jobs). Raises ``SourcePermanentError`` on malformed output,
    ``SourceTemporaryError`` when the output reports an unreachable controller.
    """
    return [r.job for r in parse_squeue_records(text, cluster=cluster)]


def _squeue_job(
    reader: OutputReader, raw: Mapping[str, Any], where: str, cluster: str | None
) -> SqueueRecord:
    job_id = reader.required_int(raw, "job_id", where)
    array_job_id = reader.int_(raw, "array_job_id", where)
    array_task = reader.int_(raw, "array_task_id", where)
    array_tasks = reader.str_(raw, "array_task_string", where)
    het_job_id = reader.int_(raw, "het_job_id", where)
    het_offset = reader.int_(raw, "het_job_offset", where)
    display_id = display_job_id(job_id, array_job_id, array_task, array_tasks)
    if het_job_id:
        display_id = f"{het_job_id}+{het_offset or 0}"

    state_text = reader.str_(raw, "job_state", where)
    status = slurm_state_to_status(state_text)
    reason = reader.str_(raw, "state_reason", where)
    nodes = reader.hostlist(raw, "nodes", where)
    num_nodes = reader.int_(raw, "node_count", where) or len(nodes)
    name = reader.str_(raw, "name", where)
    user = reader.str_(raw, "user_name", where)
    work_dir = reader.str_(raw, "current_working_directory", where) or None
    is_batch = bool(raw.get("batch_flag", False))

    # Jobs that run(ran) report their allocation; pending ones only their request.
    was_allocated = status is not JobStatus.PENDING and bool(nodes)
    num_gpus, gpu_type, allocated = _squeue_gpus(reader, raw, where, num_nodes, was_allocated)

    submit = reader.time_(raw, "submit_time", where)
    start = reader.time_(raw, "start_time", where)
    end = reader.time_(raw, "end_time", where)
    start, end, expected_start = job_times(status, start, end)
    if not status.is_active and not nodes:
        start = None  # ended before it ever ran (e.g. cancelled while pending)

    stdout_path: str | None = None
    pattern = reader.str_(raw, "standard_output", where)
    pending_array = bool(array_job_id) and array_task is None
    if is_batch and not pending_array:
        if not pattern:
            pattern = "slurm-%A_%a.out" if array_job_id else "slurm-%j.out"
        stdout_path = expand_stdout_path(
            pattern,
            job_id=job_id,
            job_name=name,
            user=user,
            work_dir=work_dir,
            array_job_id=array_job_id,
            array_task_id=array_task,
            node=reader.str_(raw, "batch_host", where) or (nodes[0] if nodes else None),
        )

    job = JobState(
        scheduler=SCHEDULER,
        cluster=cluster if cluster is not None else reader.str_(raw, "cluster", where),
        job_id=display_id,
        name=name,
        user=user,
        partition=reader.str_(raw, "partition", where),
        account=reader.str_(raw, "account", where),
        status=status,
        state_reason="" if reason == "None" else reason,
        node_list=nodes,
        num_nodes=num_nodes,
        num_gpus=num_gpus,
        gpus_allocated=allocated,
        gpu_type=gpu_type,
        submit_time_s=submit,
        start_time_s=start,
        end_time_s=end,
        expected_start_time_s=expected_start,
        time_limit_s=reader.time_limit(raw, "time_limit", where),
        stdout_path=stdout_path,
        work_dir=work_dir,
        command=reader.str_(raw, "command", where) or None,
        comment=reader.str_(raw, "comment", where),
    )
    resources = None
    if status.is_active:
        resources = job_resources(
            reader,
            raw,
            where,
            job_id=display_id,
            num_nodes=num_nodes,
            nodes=nodes,
            running=status is not JobStatus.PENDING,
        )
    return SqueueRecord(job=job, slurm_job_id=job_id, is_batch=is_batch, resources=resources)


def _squeue_gpus(
    reader: OutputReader, raw: Mapping[str, Any], where: str, num_nodes: int, was_allocated: bool
) -> tuple[int, str | None, bool]:
    """(num_gpus, gpu_type, allocated) of one squeue job."""

    def read(key: str, fn: Any) -> tuple[int, str | None]:
        text = reader.str_(raw, key, where)
        try:
            result: tuple[int, str | None] = fn(text)
        except ValueError as exc:
            raise reader.fail(f"{where}.{key}", str(exc)) from None
        return result

    detail = reader.list_(raw, "gres_detail", where)
    detail_text = ",".join(d for d in detail if isinstance(d, str))
    try:
        detail_gpus, detail_type = gpus_from_gres(detail_text)
    except ValueError as exc:
        raise reader.fail(f"{where}.gres_detail", str(exc)) from None

    per_job = read("tres_per_job", gpus_from_gres)
    per_node = read("tres_per_node", gpus_from_gres)
    per_task = read("tres_per_task", gpus_from_gres)
    requested_type = per_job[1] or per_node[1] or per_task[1]

    if was_allocated:
        alloc_gpus, alloc_type = read("tres_alloc_str", gpus_from_tres)
        if alloc_gpus or detail_gpus:
            return (alloc_gpus or detail_gpus), (detail_type or alloc_type or requested_type), True
    req_gpus, req_type = read("tres_req_str", gpus_from_tres)
    if not req_gpus:
        tasks = reader.int_(raw, "tasks", where) or 1
        req_gpus = per_job[0] or per_node[0] * max(num_nodes, 1) or per_task[0] * tasks
    return req_gpus, (requested_type or req_type or detail_type), False
