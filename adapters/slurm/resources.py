"""What an active ``squeue --json`` job asks of each node, or holds on each (openapi/v0.0.38).

A pending job's request per node, as Slurm's ``select/cons_tres`` weighs it:

- **nodes**: ``node_count`` (at least 1);
- **CPUs**: the larger of ``minimum_cpus_per_node`` and ``cpus`` / nodes (rounded up);
- **memory**: ``memory_per_node`` MiB, else ``memory_per_cpu`` MiB x CPUs per node, else the
  ``mem`` of ``tres_req_str`` / nodes;
- **GPUs**: ``tres_per_node``, else ``tres_per_job`` / nodes, else ``tres_per_task`` x ``tasks`` /
  nodes, else ``gres/gpu`` of ``tres_req_str`` / nodes (rounded up), with the requested type;
- **exclusive**: ``shared`` is ``"none"`` (``--exclusive``), ``"user"`` or ``"mcs"`` (other
  jobs may not share the nodes; same-user sharing is not modelled: such nodes count as taken);
- ``partition`` (a comma-separated list for a job submitted to several), ``required_nodes``
  and ``excluded_nodes`` (hostlists).

A running job's holding per node comes from ``job_resources.allocated_nodes``: its CPUs are the
``cpu`` of ``tres_alloc_str`` split in proportion to the cores allocated on each node (the cores
times threads per core), its memory ``memory_allocated`` MiB, its GPUs the matching entry of
``gres_detail`` (Slurm lists one per node, in the same order). Without ``job_resources`` the
allocation of ``tres_alloc_str`` is split evenly over the job's ``nodes``. Recorded examples:
``tests/data/slurm/placement/``. Fields of the wrong type raise ``SourcePermanentError`` naming
the field (:class:`adapters.slurm.output.OutputReader`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.slurm.gres import gpus_from_gres, gpus_from_tres, parse_tres
from adapters.slurm.output import OutputReader
from planner.specs.job import JobResources, NodeShare

__all__ = ["job_resources"]

_MIB = 1024.0**2
_EXCLUSIVE = frozenset({"none", "user", "mcs"})
_MEMORY_UNITS = {"": 1.0, "K": 1024.0**-1, "M": 1.0, "G": 1024.0, "T": 1024.0**2}


def _ceil_div(total: int, parts: int) -> int:
    return -(-total // max(parts, 1))


@functools.lru_cache(maxsize=4096)  # a large queue repeats a few hundred TRES strings
def _tres_cpu_memory(text: str) -> tuple[int | None, float]:
    """The ``cpu`` count (None: absent) and ``mem`` in MiB (``mem=2G`` -> 2048; 0: absent) of
    a TRES string; raises ``ValueError`` naming an unreadable one."""
    tres = parse_tres(text)
    cpus = tres.get("cpu")
    if cpus is not None and not cpus.isdigit():
        raise ValueError(f"cpu={cpus!r} is not a count")
    value = tres.get("mem", "")
    if not value:
        return (None if cpus is None else int(cpus)), 0.0
    number, unit = value[:-1], value[-1:].upper()
    if unit.isdigit():
        number, unit = value, ""
    try:
        memory_mib = float(number) * _MEMORY_UNITS[unit]
    except (KeyError, ValueError):
        raise ValueError(f"memory {value!r} is not a Slurm size (e.g. 2G)") from None
    return (None if cpus is None else int(cpus)), memory_mib


def _tres(
    reader: OutputReader, raw: Mapping[str, Any], key: str, where: str
) -> tuple[int | None, float]:
    try:
        return _tres_cpu_memory(reader.str_(raw, key, where))
    except ValueError as exc:
        raise reader.fail(f"{where}.{key}", str(exc)) from None


def _gres(
    reader: OutputReader, raw: Mapping[str, Any], key: str, where: str
) -> tuple[int, str | None]:
    try:
        return gpus_from_gres(reader.str_(raw, key, where))
    except ValueError as exc:
        raise reader.fail(f"{where}.{key}", str(exc)) from None


def _tres_gpus(reader: OutputReader, raw: Mapping[str, Any], key: str, where: str) -> int:
    try:
        return gpus_from_tres(reader.str_(raw, key, where))[0]
    except ValueError as exc:
        raise reader.fail(f"{where}.{key}", str(exc)) from None


def _request(
    reader: OutputReader, raw: Mapping[str, Any], where: str, num_nodes: int
) -> tuple[int, float, int, str | None]:
    """(CPUs, memory bytes, GPUs per node, GPU type) a pending job asks for."""
    cpus = reader.int_(raw, "cpus", where) or 1
    cpus_per_node = max(
        reader.int_(raw, "minimum_cpus_per_node", where) or 1, _ceil_div(cpus, num_nodes)
    )
    per_node_mib = reader.int_(raw, "memory_per_node", where)
    per_cpu_mib = reader.int_(raw, "memory_per_cpu", where)
    if per_node_mib:
        memory_mib = float(per_node_mib)
    elif per_cpu_mib:
        memory_mib = float(per_cpu_mib) * cpus_per_node
    else:
        memory_mib = _tres(reader, raw, "tres_req_str", where)[1] / max(num_nodes, 1)
    per_node, node_type = _gres(reader, raw, "tres_per_node", where)
    per_job, job_type = _gres(reader, raw, "tres_per_job", where)
    per_task, task_type = _gres(reader, raw, "tres_per_task", where)
    if per_node:
        gpus = per_node
    elif per_job:
        gpus = _ceil_div(per_job, num_nodes)
    elif per_task:
        gpus = _ceil_div(per_task * (reader.int_(raw, "tasks", where) or 1), num_nodes)
    else:
        gpus = _ceil_div(_tres_gpus(reader, raw, "tres_req_str", where), num_nodes)
    return cpus_per_node, memory_mib * _MIB, gpus, node_type or job_type or task_type


def _cores(reader: OutputReader, node: Mapping[str, Any], where: str) -> int:
    """Cores allocated on one node of ``job_resources.allocated_nodes``."""
    count = 0
    for socket, entry in reader.obj(node, "sockets", where).items():
        if not isinstance(entry, Mapping):
            raise reader.fail(
                f"{where}.sockets.{socket}", f"expected an object, got {type(entry).__name__}"
            )
        count += len(reader.obj(entry, "cores", f"{where}.sockets.{socket}"))
    return count


def _held(
    reader: OutputReader, raw: Mapping[str, Any], where: str, nodes: Sequence[str]
) -> tuple[NodeShare, ...]:
    """What a running job holds on each of its nodes."""
    total_cpus, alloc_mib = _tres(reader, raw, "tres_alloc_str", where)
    if total_cpus is None:
        total_cpus = reader.int_(raw, "cpus", where) or 0
    total_gpus = _tres_gpus(reader, raw, "tres_alloc_str", where)
    details = [d for d in reader.list_(raw, "gres_detail", where) if isinstance(d, str)]
    allocated = reader.list_(
        reader.obj(raw, "job_resources", where), "allocated_nodes", f"{where}.job_resources"
    )
    if not allocated:
        n = max(len(nodes), 1)
        return tuple(
            NodeShare(
                node=name,
                num_cpus=_ceil_div(total_cpus, n),
                memory_bytes=alloc_mib / n * _MIB,
                num_gpus=_ceil_div(total_gpus, n),
            )
            for name in nodes
        )
    base = f"{where}.job_resources.allocated_nodes"
    rows: list[tuple[str, int, float]] = []
    for i, node in enumerate(allocated):
        if not isinstance(node, Mapping):
            raise reader.fail(f"{base}[{i}]", f"expected an object, got {type(node).__name__}")
        name = reader.str_(node, "nodename", f"{base}[{i}]")
        if not name:
            raise reader.fail(f"{base}[{i}].nodename", "missing")
        memory_mib = float(reader.int_(node, "memory_allocated", f"{base}[{i}]") or 0)
        rows.append((name, _cores(reader, node, f"{base}[{i}]"), memory_mib))
    num_cores = sum(cores for _, cores, _ in rows)
    shares = []
    for i, (name, cores, memory_mib) in enumerate(rows):
        cpus = (
            round(total_cpus * cores / num_cores) if num_cores else _ceil_div(total_cpus, len(rows))
        )
        if len(details) == len(rows):
            try:
                gpus = gpus_from_gres(details[i])[0]
            except ValueError as exc:
                raise reader.fail(f"{where}.gres_detail[{i}]", str(exc)) from None
        else:
            gpus = _ceil_div(total_gpus, len(rows))
        shares.append(
            NodeShare(node=name, num_cpus=cpus, memory_bytes=memory_mib * _MIB, num_gpus=gpus)
        )
    return tuple(shares)


def job_resources(
    reader: OutputReader,
    raw: Mapping[str, Any],
    where: str,
    *,
    job_id: str,
    num_nodes: int,
    nodes: Sequence[str],
    running: bool,
) -> JobResources:
    """The request (and, when ``running``, the holding per node) of one ``squeue --json`` job
    (module docstring); ``nodes`` are the job's allocated nodes. Raises
    ``SourcePermanentError`` naming the field when one has the wrong type or is unreadable."""
    num_nodes = max(num_nodes, 1)
    cpus, memory_bytes, gpus, gpu_type = _request(reader, raw, where, num_nodes)
    shared = reader.str_(raw, "shared", where).lower()
    partitions = tuple(
        p.strip() for p in reader.str_(raw, "partition", where).split(",") if p.strip()
    )
    return JobResources(
        job_id=job_id,
        num_nodes=num_nodes,
        cpus_per_node=cpus,
        memory_per_node_bytes=memory_bytes,
        gpus_per_node=gpus,
        gpu_type=gpu_type,
        exclusive=shared in _EXCLUSIVE,
        partitions=partitions,
        required_nodes=reader.hostlist(raw, "required_nodes", where)
        if raw.get("required_nodes")
        else (),
        excluded_nodes=reader.hostlist(raw, "excluded_nodes", where)
        if raw.get("excluded_nodes")
        else (),
        held=_held(reader, raw, where, nodes) if running and nodes else (),
    )
