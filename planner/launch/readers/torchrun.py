"""How many processes a torchrun-style launch starts (torchrun itself, ``tune run`` which
takes torchrun's options, Kubeflow's ``PET_*`` environment for torchrun), for the readers
whose parallel layout divides the world size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from planner.launch.reader import ReadContext
from planner.launch.types import Facts, Invocation
from planner.launch.values import as_int

__all__ = ["record_world", "torchrun_world_size"]


def _nodes(text: str) -> int | None:
    """torchrun ``--nnodes``: ``N`` or an elastic ``MIN:MAX`` (the most it starts)."""
    return as_int(text.rpartition(":")[2]) if text else None


def torchrun_world_size(
    invocation: Invocation,
    context: ReadContext,
    *,
    options: Mapping[str, str] | None = None,
    extra_env: Sequence[str] = (),
    command: str = "torchrun",
) -> tuple[int, str] | None:
    """Processes a torchrun-style launch starts, with where that was found: the shell layer's
    ``launch.world_size``; torchrun's ``--nnodes`` x ``--nproc_per_node`` (``options``,
    default the invocation's launcher options, of ``command``; ``gpu``/``auto`` = GPUs per
    node); the same
    from ``PET_NNODES`` / ``PET_NPROC_PER_NODE``; ``extra_env`` (e.g. run_train.sh's
    ``NGPU``) x nodes; ``WORLD_SIZE``; the scheduler's GPU count. None when nothing says."""
    allocation = context.allocation
    found = allocation.values.get("launch.world_size")
    if found is not None and (as_int(found.value) or 0) > 0:
        return as_int(found.value) or 0, found.source
    given = invocation.launcher_args if options is None else options
    env = invocation.env
    per_node_gpus = allocation.int("hardware.gpus_per_node")
    for nproc_text, nodes_text, where in (
        (
            given.get("nproc_per_node", ""),
            given.get("nnodes", ""),
            f"launch: {command} --nnodes x --nproc_per_node",
        ),
        (
            env.get("PET_NPROC_PER_NODE", ""),
            env.get("PET_NNODES", ""),
            "launch: PET_NNODES x PET_NPROC_PER_NODE",
        ),
        *((env.get(name, ""), given.get("nnodes", ""), f"launch: {name}") for name in extra_env),
    ):
        nodes = _nodes(nodes_text) or 1
        if nproc_text in {"gpu", "auto"} and per_node_gpus:
            return nodes * per_node_gpus, f"{where} (GPUs per node)"
        per_node = as_int(nproc_text)
        if per_node and per_node > 0:
            return nodes * per_node, where
    world = as_int(env.get("WORLD_SIZE", ""))
    if world and world > 0:
        return world, "launch: WORLD_SIZE"
    found = allocation.values.get("hardware.num_gpus")
    if found is not None and (as_int(found.value) or 0) > 0:
        return as_int(found.value) or 0, found.source
    return None


def record_world(
    facts: Facts,
    world: tuple[int, str] | None,
    context: ReadContext,
    options: Mapping[str, str],
    command: str = "torchrun",
) -> None:
    """Record ``hardware.num_gpus`` = ``world`` with the per-node split: the launcher's
    ``--nproc_per_node`` / ``--nnodes`` (``options``) when numeric, else the allocation's
    (once a reader gives the GPU count, the description takes the split from the reader)."""
    if world is None:
        return
    facts.set("hardware.num_gpus", world[0], world[1])
    for name, option in (
        ("hardware.gpus_per_node", "nproc_per_node"),
        ("launch.num_nodes", "nnodes"),
    ):
        value = as_int(options.get(option, ""))
        found = context.allocation.values.get(name)
        if value and value > 0:
            facts.set(name, value, f"launch: {command} --{option}")
        elif found is not None:
            facts.set(name, found.value, found.source)
