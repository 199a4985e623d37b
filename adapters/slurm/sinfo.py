"""``sinfo --json`` (openapi/v0.0.38) → :class:`~planner.specs.job.NodeState` per node.

Errors and accepted shapes: :mod:`adapters.slurm.output`.
"""

from __future__ import annotations

from adapters.slurm.gres import gpus_from_gres, gpus_from_tres
from adapters.slurm.output import SOURCE_SINFO, OutputReader
from planner.specs.job import NodeState


def parse_sinfo_json(text: str) -> list[NodeState]:
    """``sinfo --json`` (openapi/v0.0.38) text → one :class:`NodeState` per node.

    GPU count and type from ``gres`` (``gpu:h100:8``; ``tres`` ``gres/gpu=8`` as fallback),
    allocated GPUs from ``gres_used`` (``gpu:h100:2(IDX:0-1)``; ``tres_used`` as fallback).
    ``state`` is the base state plus flags, lower case, joined by ``+`` (``idle``,
    ``mixed+drain``). ``memory_bytes`` = ``real_memory`` MiB × 2²⁰, ``memory_allocated_bytes`` =
    ``alloc_memory`` MiB × 2²⁰, ``num_cpus_allocated`` = ``alloc_cpus``. Raises like
    :func:`parse_squeue_json`.
    """
    reader = OutputReader(SOURCE_SINFO)
    nodes: list[NodeState] = []
    seen: set[str] = set()
    for i, raw in enumerate(reader.load(text, "nodes")):
        where = f"nodes[{i}]"
        name = reader.str_(raw, "name", where)
        if not name:
            raise reader.fail(f"{where}.name", "missing")
        if name in seen:
            continue
        seen.add(name)
        base = reader.str_(raw, "state", where).lower()
        flags = [str(f).lower() for f in reader.list_(raw, "state_flags", where)]
        try:
            num_gpus, gpu_type = gpus_from_gres(reader.str_(raw, "gres", where))
            if not num_gpus:
                num_gpus, tres_type = gpus_from_tres(reader.str_(raw, "tres", where))
                gpu_type = gpu_type or tres_type
            used, _ = gpus_from_gres(reader.str_(raw, "gres_used", where))
            if not used:
                used, _ = gpus_from_tres(reader.str_(raw, "tres_used", where))
        except ValueError as exc:
            raise reader.fail(f"{where}.gres", str(exc)) from None
        partitions = tuple(str(p) for p in reader.list_(raw, "partitions", where))
        nodes.append(
            NodeState(
                name=name,
                state="+".join([base or "unknown", *flags]),
                num_gpus=num_gpus,
                num_gpus_allocated=used,
                gpu_type=gpu_type,
                num_cpus=reader.int_(raw, "cpus", where) or 0,
                memory_bytes=float(reader.int_(raw, "real_memory", where) or 0) * 1024.0**2,
                partitions=partitions,
                num_cpus_allocated=reader.int_(raw, "alloc_cpus", where) or 0,
                memory_allocated_bytes=float(reader.int_(raw, "alloc_memory", where) or 0)
                * 1024.0**2,
            )
        )
    return nodes
