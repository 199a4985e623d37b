"""The fleet: GPU pools, their capacity over time, the scheduler and (Kueue) its queues.

Public contract: ``docs/capacity-formats.md`` ("Fleet file"). ``read_fleet(text, source)``
parses a fleet document into a ``Fleet``; every error names the file, line and field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from planner.capacity.documents import Located, check_keys, load_document
from planner.capacity.fields import (
    optional,
    read_int,
    read_name,
    read_number,
    read_time_limit_s,
    read_timestamp_s,
    require,
)
from planner.capacity.runtime import (
    DEFAULT_RESTART_OVERHEAD_S,
    LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
    InterruptionModel,
)
from planner.catalog import get_gpu
from planner.errors import SpecError

__all__ = [
    "DEFAULT_HORIZON_S",
    "CapacityChange",
    "ClusterQueue",
    "Fleet",
    "Pool",
    "SchedulerKind",
    "parse_fleet",
    "read_fleet",
]

DEFAULT_HORIZON_S = 90 * 86400.0
"""Review horizon when the fleet file names none: 90 days."""


class SchedulerKind(StrEnum):
    """How queued jobs start: Slurm's priority order with EASY backfill, or Kueue's
    ClusterQueue quotas with cohort borrowing."""

    SLURM = "slurm"
    KUEUE = "kueue"


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityChange:
    """``delta_gpus`` GPUs added (negative: removed) to a pool from ``at_s`` (epoch seconds)."""

    at_s: float
    delta_gpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """A set of identical GPUs one scheduler partition (or Kueue ResourceFlavor) hands out.

    ``gpu`` is a GPU catalog key; ``num_gpus`` the GPUs it has at the review's start;
    ``changes`` capacity added or removed later, in date order; ``partitions`` the Slurm
    partitions / Kueue flavors whose jobs run here (default: the pool's name);
    ``default_time_limit_s`` the limit of jobs that ask for none (Slurm's partition
    ``DefaultTime``; None: unlimited); ``cost_per_gpu_hour`` in the fleet's currency.
    """

    name: str
    gpu: str
    num_gpus: int
    cost_per_gpu_hour: float | None = None
    partitions: tuple[str, ...] = ()
    changes: tuple[CapacityChange, ...] = ()
    default_time_limit_s: float | None = None

    def __post_init__(self) -> None:
        if self.num_gpus < 0:
            raise SpecError(f"pools[{self.name}].num_gpus", f"must be >= 0, got {self.num_gpus}")
        get_gpu(self.gpu, field=f"pools[{self.name}].gpu")
        if list(self.changes) != sorted(self.changes, key=lambda c: c.at_s):
            raise SpecError(f"pools[{self.name}].changes", "must be in date order")

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node of the pool's GPU (catalog), the granularity of capacity changes."""
        return get_gpu(self.gpu).gpus_per_node

    def capacity_at(self, t_s: float) -> int:
        """GPUs in the pool at epoch second ``t_s``."""
        return self.num_gpus + sum(c.delta_gpus for c in self.changes if c.at_s <= t_s)

    @property
    def max_gpus(self) -> int:
        """The most GPUs the pool ever has."""
        best = current = self.num_gpus
        for change in self.changes:
            current += change.delta_gpus
            best = max(best, current)
        return best


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterQueue:
    """A Kueue ClusterQueue: nominal GPU quota per pool, its cohort and borrowing limits.

    A queue may use its ``nominal_gpus`` and, within a cohort, borrow the cohort's unused
    quota up to ``borrowing_limit_gpus`` per pool (absent: no limit). ``strict_fifo`` is
    ``queueingStrategy: StrictFIFO`` (the head blocks the queue); otherwise BestEffortFIFO.
    ``local_queues`` are the LocalQueue names that feed it (default: its own name).
    """

    name: str
    cohort: str | None = None
    nominal_gpus: tuple[tuple[str, int], ...] = ()
    borrowing_limit_gpus: tuple[tuple[str, int], ...] = ()
    strict_fifo: bool = False
    local_queues: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    """Pools, scheduler, interruption model and review horizon of one cluster (or several).

    ``start_s`` (epoch seconds) is the review's default start, ``horizon_s`` its length.
    """

    name: str = ""
    scheduler: SchedulerKind = SchedulerKind.SLURM
    pools: tuple[Pool, ...]
    queues: tuple[ClusterQueue, ...] = ()
    interruptions: InterruptionModel = field(default_factory=InterruptionModel)
    horizon_s: float = DEFAULT_HORIZON_S
    start_s: float | None = None

    def __post_init__(self) -> None:
        if not self.pools:
            raise SpecError("pools", "the fleet needs at least one pool")
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise SpecError("pools", f"pool names must be unique, got {names}")

    def pool(self, name: str) -> Pool:
        """The pool called ``name`` (``SpecError`` with the known names otherwise)."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise SpecError("pool", f"no pool {name!r}; the fleet has {', '.join(self.pool_names)}")

    @property
    def pool_names(self) -> tuple[str, ...]:
        """Pool names in file order."""
        return tuple(p.name for p in self.pools)


_FLEET_KEYS = (
    "name", "scheduler", "start", "horizon_days", "interruptions_per_gpu_hour",
    "restart_overhead_minutes", "pools", "queues",
)  # fmt: skip
_POOL_KEYS = (
    "name", "gpu", "num_gpus", "cost_per_gpu_hour", "partitions", "changes", "default_time_limit",
)  # fmt: skip
_CHANGE_KEYS = ("date", "gpus")
_QUEUE_KEYS = (
    "name", "cohort", "nominal_gpus", "borrowing_limit_gpus", "queueing_strategy", "local_queues",
)  # fmt: skip


def _names(node: Located, what: str) -> tuple[str, ...]:
    if isinstance(node.value, str):
        return (read_name(node, what),)
    return tuple(read_name(item, what) for item in node.items())


def _parse_pool(node: Located, start_s: float | None) -> Pool:
    check_keys(node, _POOL_KEYS)
    name = read_name(require(node, "name", "give the pool a name"), "a pool name")
    gpu_node = require(node, "gpu", "a GPU catalog key such as h100-sxm")
    try:
        gpu = get_gpu(str(gpu_node.value), field="gpu").key
    except SpecError as exc:
        raise gpu_node.error(exc.message) from None
    num_gpus = read_int(require(node, "num_gpus", "the GPUs in the pool"), minimum=0)
    cost = optional(node, "cost_per_gpu_hour")
    partitions = optional(node, "partitions")
    limit = optional(node, "default_time_limit")
    changes: list[CapacityChange] = []
    current = num_gpus
    changes_node = optional(node, "changes")
    for item in changes_node.items() if changes_node else ():
        check_keys(item, _CHANGE_KEYS)
        at_s = read_timestamp_s(require(item, "date", "the date the change takes effect"), start_s)
        delta_node = require(item, "gpus", "GPUs added (negative: removed)")
        delta = read_int(delta_node, minimum=-(10**9))
        if changes and at_s < changes[-1].at_s:
            raise item.error("changes must be in date order; sort them by date", "date")
        current += delta
        if current < 0:
            raise delta_node.error(f"removes more GPUs than the pool has then ({current - delta})")
        changes.append(CapacityChange(at_s=at_s, delta_gpus=delta))
    return Pool(
        name=name,
        gpu=gpu,
        num_gpus=num_gpus,
        cost_per_gpu_hour=read_number(cost, positive=False) if cost else None,
        partitions=_names(partitions, "a partition name") if partitions else (name,),
        changes=tuple(changes),
        default_time_limit_s=read_time_limit_s(limit) if limit else None,
    )


def _quota(node: Located | None, pools: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    if node is None:
        return ()
    out: list[tuple[str, int]] = []
    for key in node.mapping().value:
        if str(key) not in pools:
            raise node.error(f"no pool {key!r}; the fleet has {', '.join(pools)}", str(key))
        out.append((str(key), read_int(node.children[str(key)], minimum=0)))
    return tuple(out)


def _parse_queue(node: Located, pools: tuple[str, ...]) -> ClusterQueue:
    check_keys(node, _QUEUE_KEYS)
    name = read_name(require(node, "name", "the ClusterQueue's name"), "a queue name")
    cohort = optional(node, "cohort")
    strategy = optional(node, "queueing_strategy")
    strict = False
    if strategy is not None:
        if strategy.value not in ("BestEffortFIFO", "StrictFIFO"):
            raise strategy.error(f"must be BestEffortFIFO or StrictFIFO, got {strategy.value!r}")
        strict = strategy.value == "StrictFIFO"
    local = optional(node, "local_queues")
    return ClusterQueue(
        name=name,
        cohort=read_name(cohort, "a cohort name") if cohort else None,
        nominal_gpus=_quota(require(node, "nominal_gpus", "GPUs of quota per pool"), pools),
        borrowing_limit_gpus=_quota(optional(node, "borrowing_limit_gpus"), pools),
        strict_fifo=strict,
        local_queues=_names(local, "a LocalQueue name") if local else (name,),
    )


def fleet_start_s(root: Located) -> float | None:
    """The ``start`` of a fleet document (epoch seconds; None when it has none). It must be
    absolute: it anchors the relative dates (``+19d``) of the fleet, plan and what-ifs."""
    start = root.mapping().get("start")
    return read_timestamp_s(start) if start is not None else None


def parse_fleet(root: Located, *, start_s: float | None = None) -> Fleet:
    """A ``Fleet`` from a fleet document (see ``docs/capacity-formats.md``); relative dates
    (``+31d``) count from ``start_s`` (the review's start), else from the fleet's ``start``.

    Raises ``DocumentError`` (``file:line: field: what is wrong and the fix``).
    """
    check_keys(root, _FLEET_KEYS)
    own_start = fleet_start_s(root)
    anchor = start_s if start_s is not None else own_start
    scheduler = SchedulerKind.SLURM
    if (kind := optional(root, "scheduler")) is not None:
        if kind.value not in tuple(SchedulerKind):
            raise kind.error(f"must be slurm or kueue, got {kind.value!r}")
        scheduler = SchedulerKind(kind.value)
    pools_node = require(root, "pools", "list the GPU pools (name, gpu, num_gpus)")
    pools = tuple(_parse_pool(item, anchor) for item in pools_node.items())
    names = [p.name for p in pools]
    for index, pool in enumerate(pools):
        if names.index(pool.name) != index:
            raise pools_node.children[index].error("duplicate pool name; rename one", "name")
    queues: tuple[ClusterQueue, ...] = ()
    queues_node = optional(root, "queues")
    if queues_node is not None:
        queues = tuple(_parse_queue(item, tuple(names)) for item in queues_node.items())
    if scheduler is SchedulerKind.KUEUE and not queues:
        raise root.error("scheduler kueue needs queues (ClusterQueues with nominal_gpus)", "queues")
    horizon = optional(root, "horizon_days")
    rate = optional(root, "interruptions_per_gpu_hour")
    overhead = optional(root, "restart_overhead_minutes")
    name = optional(root, "name")
    horizon_s = read_number(horizon) * 86400.0 if horizon else DEFAULT_HORIZON_S
    if not math.isfinite(horizon_s):
        raise root.error("must be finite: the review's length in days", "horizon_days")
    return Fleet(
        name=str(name.value) if name else "",
        scheduler=scheduler,
        pools=pools,
        queues=queues,
        interruptions=InterruptionModel(
            rate_per_gpu_hour=(
                read_number(rate, positive=False) if rate else LLAMA3_INTERRUPTIONS_PER_GPU_HOUR
            ),
            restart_overhead_s=(
                read_number(overhead, positive=False) * 60.0
                if overhead
                else DEFAULT_RESTART_OVERHEAD_S
            ),
        ),
        horizon_s=horizon_s,
        start_s=own_start,
    )


def read_fleet(text: str, source: str, *, start_s: float | None = None) -> Fleet:
    """Parse the text of a fleet file (YAML or JSON) named ``source`` into a ``Fleet``
    (relative dates from ``start_s``, else from the fleet's ``start``)."""
    return parse_fleet(load_document(text, source), start_s=start_s)
