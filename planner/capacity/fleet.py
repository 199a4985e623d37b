"""The fleet: GPU pools, their capacity over time, the scheduler and (Kueue) its queues.

Public contract: ``docs/capacity-formats.md`` ("Fleet file"). ``read_fleet(text, source)``
parses a fleet document into a ``Fleet``; every error names the file, line and field.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum

from planner.capacity.documents import ErrorList, Located, check_keys, load_document
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
    "Placement",
    "Pool",
    "Preemption",
    "PreemptionPolicy",
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


class Placement(StrEnum):
    """Where a Slurm pool's jobs go: on whole nodes (``nodes``: a job needs enough nodes each
    with the GPUs it asks per node, ``planner.capacity.nodes``) or anywhere in the pool's GPU
    count (``gpus``: fragmentation ignored, the faster and older model)."""

    NODES = "nodes"
    GPUS = "gpus"


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
    ``DefaultTime``; None: unlimited); ``cost_per_gpu_hour`` in the fleet's currency, paid
    for every GPU-hour of capacity (reserved, the default: owned or committed GPUs cost the
    same used or idle) or, with ``on_demand``, only for the GPU-hours jobs use. ``cluster``
    and ``scheduler`` name the cluster the pool belongs to and its scheduler (None: the
    fleet's ``scheduler``), for fleets of several clusters. ``interruptions_per_gpu_hour``
    is the pool's own rate of unexpected interruptions (None: the fleet's), for GPUs or
    nodes known to fail more or less often than the fleet's default.
    """

    name: str
    gpu: str
    num_gpus: int
    cost_per_gpu_hour: float | None = None
    on_demand: bool = False
    cluster: str = ""
    scheduler: SchedulerKind | None = None
    partitions: tuple[str, ...] = ()
    changes: tuple[CapacityChange, ...] = ()
    default_time_limit_s: float | None = None
    interruptions_per_gpu_hour: float | None = None

    def __post_init__(self) -> None:
        if self.num_gpus < 0:
            raise SpecError(f"pools[{self.name}].num_gpus", f"must be >= 0, got {self.num_gpus}")
        rate = self.interruptions_per_gpu_hour
        if rate is not None and not (math.isfinite(rate) and rate >= 0):
            raise SpecError(
                f"pools[{self.name}].interruptions_per_gpu_hour",
                f"must be a number >= 0 (interruptions per GPU-hour), got {rate}",
            )
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


class PreemptionPolicy(StrEnum):
    """A ClusterQueue's ``spec.preemption`` policy values, spelled as Kueue spells them
    (``PreemptionPolicy``, kubernetes-sigs/kueue ``apis/kueue/v1beta1/clusterqueue_types.go``
    at 00b014c140a64380a3e5d79999026cb44ace4fd7)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


WITHIN_CLUSTER_QUEUE_POLICIES = (
    PreemptionPolicy.NEVER,
    PreemptionPolicy.LOWER_PRIORITY,
    PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY,
)
"""The values Kueue accepts for ``withinClusterQueue``."""
RECLAIM_WITHIN_COHORT_POLICIES = (
    PreemptionPolicy.NEVER,
    PreemptionPolicy.LOWER_PRIORITY,
    PreemptionPolicy.ANY,
)
"""The values Kueue accepts for ``reclaimWithinCohort``."""
BORROW_WITHIN_COHORT_POLICIES = (PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY)
"""The values Kueue accepts for ``borrowWithinCohort.policy``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Preemption:
    """A ClusterQueue's ``spec.preemption`` (Kueue's defaults: nothing is preempted).

    ``within_cluster_queue`` (``withinClusterQueue``): whether a pending workload that does
    not fit may evict running workloads of its own ClusterQueue (lower priority, or also equal
    priority and newer); ``reclaim_within_cohort`` (``reclaimWithinCohort``): whether it may
    evict workloads of other ClusterQueues of its cohort that use more than their nominal
    quota (lower priority, or any); ``borrow_within_cohort`` (``borrowWithinCohort.policy``):
    whether it may do so while it would itself borrow (lower priority only), limited to
    workloads of priority at most ``max_priority_threshold`` (``maxPriorityThreshold``; None:
    no limit). Raises ``SpecError`` naming the field for a value Kueue does not accept there.
    The simulator's use: ``planner.capacity.kueue``."""

    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    max_priority_threshold: float | None = None

    def __post_init__(self) -> None:
        allowed = (
            ("withinClusterQueue", self.within_cluster_queue, WITHIN_CLUSTER_QUEUE_POLICIES),
            ("reclaimWithinCohort", self.reclaim_within_cohort, RECLAIM_WITHIN_COHORT_POLICIES),
            ("borrowWithinCohort.policy", self.borrow_within_cohort, BORROW_WITHIN_COHORT_POLICIES),
        )
        for name, value, values in allowed:
            if value not in values:
                raise SpecError(
                    f"preemption.{name}", f"must be one of {', '.join(values)}, got {value!r}"
                )
        if (
            self.reclaim_within_cohort is PreemptionPolicy.NEVER
            and self.borrow_within_cohort is not PreemptionPolicy.NEVER
        ):
            raise SpecError(
                "preemption.borrowWithinCohort.policy",
                "needs reclaimWithinCohort LowerPriority or Any (Kueue rejects "
                "reclaimWithinCohort Never with borrowWithinCohort.policy other than Never)",
            )

    @property
    def enabled(self) -> bool:
        """Whether the queue's pending workloads may preempt anything."""
        return (
            self.within_cluster_queue is not PreemptionPolicy.NEVER
            or self.reclaim_within_cohort is not PreemptionPolicy.NEVER
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterQueue:
    """A Kueue ClusterQueue: nominal GPU quota per pool, its cohort and borrowing limits.

    A queue may use its ``nominal_gpus`` and, within a cohort, borrow the cohort's unused
    quota up to ``borrowing_limit_gpus`` per pool (absent: no limit). ``strict_fifo`` is
    ``queueingStrategy: StrictFIFO`` (the head blocks the queue); otherwise BestEffortFIFO.
    ``local_queues`` are the LocalQueue names that feed it (default: its own name);
    ``preemption`` its ``spec.preemption`` policies (default: none).
    """

    name: str
    cohort: str | None = None
    nominal_gpus: tuple[tuple[str, int], ...] = ()
    borrowing_limit_gpus: tuple[tuple[str, int], ...] = ()
    strict_fifo: bool = False
    local_queues: tuple[str, ...] = ()
    preemption: Preemption = field(default_factory=Preemption)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    """Pools, scheduler, interruption model and review horizon of one cluster (or several:
    each pool then names its ``cluster`` and that cluster's ``scheduler``, and ``scheduler``
    is the first cluster's).

    ``start_s`` (epoch seconds) is the review's default start, ``horizon_s`` its length;
    ``placement`` how the Slurm pools place jobs (Kueue pools admit by quota alone).
    """

    name: str = ""
    scheduler: SchedulerKind = SchedulerKind.SLURM
    pools: tuple[Pool, ...]
    queues: tuple[ClusterQueue, ...] = ()
    interruptions: InterruptionModel = field(default_factory=InterruptionModel)
    horizon_s: float = DEFAULT_HORIZON_S
    start_s: float | None = None
    placement: Placement = Placement.NODES

    def __post_init__(self) -> None:
        if not self.pools:
            raise SpecError("pools", "the fleet needs at least one pool")
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise SpecError("pools", f"pool names must be unique, got {names}")

    def scheduler_of(self, pool: Pool) -> SchedulerKind:
        """The scheduler that starts the jobs of ``pool``: its cluster's, else the fleet's."""
        return pool.scheduler if pool.scheduler is not None else self.scheduler

    @property
    def clusters(self) -> tuple[str, ...]:
        """Cluster names in file order ("" for pools outside ``clusters``)."""
        return tuple(dict.fromkeys(p.cluster for p in self.pools))

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
    "restart_overhead_minutes", "pools", "queues", "clusters", "placement",
)  # fmt: skip
_CLUSTER_KEYS = ("name", "scheduler", "pools", "queues")
_POOL_KEYS = (
    "name", "gpu", "num_gpus", "cost_per_gpu_hour", "billing", "partitions", "changes",
    "default_time_limit", "interruptions_per_gpu_hour",
)  # fmt: skip
_CHANGE_KEYS = ("date", "gpus")
_QUEUE_KEYS = (
    "name", "cohort", "nominal_gpus", "borrowing_limit_gpus", "queueing_strategy", "local_queues",
    "preemption",
)  # fmt: skip
_PREEMPTION_KEYS = ("withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort")
_BORROW_KEYS = ("policy", "maxPriorityThreshold")


def _names(node: Located, what: str) -> tuple[str, ...]:
    if isinstance(node.value, str):
        return (read_name(node, what),)
    return tuple(read_name(item, what) for item in node.items())


def _parse_changes(
    node: Located | None, num_gpus: int, start_s: float | None
) -> list[CapacityChange]:
    changes: list[CapacityChange] = []
    current = num_gpus
    for item in node.items() if node else ():
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
    return changes


def _read_gpu(node: Located) -> str:
    try:
        return get_gpu(str(node.value), field="gpu").key
    except SpecError as exc:
        raise node.error(exc.message) from None


def _parse_pool(node: Located, start_s: float | None) -> Pool:
    errors = ErrorList()
    errors.take(lambda: check_keys(node, _POOL_KEYS), None)
    name = errors.take(
        lambda: read_name(require(node, "name", "give the pool a name"), "a pool name"), ""
    )
    gpu = errors.take(
        lambda: _read_gpu(require(node, "gpu", "a GPU catalog key such as h100-sxm")), ""
    )
    num_gpus = errors.take(
        lambda: read_int(require(node, "num_gpus", "the GPUs in the pool"), minimum=0), 0
    )
    cost = optional(node, "cost_per_gpu_hour")
    cost_value = errors.take(lambda: read_number(cost, positive=False) if cost else None, None)
    billing = optional(node, "billing")
    on_demand = errors.take(lambda: _read_billing(billing), False)
    partitions = optional(node, "partitions")
    own: tuple[str, ...] = (name,)
    names = errors.take(lambda: _names(partitions, "a partition name") if partitions else own, own)
    limit = optional(node, "default_time_limit")
    limit_s = errors.take(lambda: read_time_limit_s(limit) if limit else None, None)
    changes = errors.call([], _parse_changes, optional(node, "changes"), num_gpus, start_s)
    rate = optional(node, "interruptions_per_gpu_hour")
    rate_value = errors.take(lambda: _read_rate(rate), None)
    errors.check()
    return Pool(
        name=name,
        gpu=gpu,
        num_gpus=num_gpus,
        cost_per_gpu_hour=cost_value,
        on_demand=on_demand,
        partitions=names,
        changes=tuple(changes),
        default_time_limit_s=limit_s,
        interruptions_per_gpu_hour=rate_value,
    )


def _read_rate(node: Located | None) -> float | None:
    """A pool's interruptions per GPU-hour (``>= 0``); None when it gives none."""
    if node is None:
        return None
    value = read_number(node, positive=False)
    if value < 0:
        raise node.error(f"must be >= 0 interruptions per GPU-hour, got {value}")
    return value


def _read_billing(node: Located | None) -> bool:
    """True for ``billing: on_demand`` (paid per GPU-hour used), False for ``reserved``."""
    if node is None:
        return False
    if node.value not in ("reserved", "on_demand"):
        raise node.error(
            f"must be reserved (paid whether used or not) or on_demand (paid per GPU-hour "
            f"used), got {node.value!r}"
        )
    return bool(node.value == "on_demand")


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
    preemption = optional(node, "preemption")
    return ClusterQueue(
        name=name,
        cohort=read_name(cohort, "a cohort name") if cohort else None,
        nominal_gpus=_quota(require(node, "nominal_gpus", "GPUs of quota per pool"), pools),
        borrowing_limit_gpus=_quota(optional(node, "borrowing_limit_gpus"), pools),
        strict_fifo=strict,
        local_queues=_names(local, "a LocalQueue name") if local else (name,),
        preemption=_parse_preemption(preemption) if preemption else Preemption(),
    )


def _policy(node: Located | None, allowed: tuple[PreemptionPolicy, ...]) -> PreemptionPolicy:
    """One Kueue preemption policy (absent: ``Never``, Kueue's default)."""
    if node is None:
        return PreemptionPolicy.NEVER
    if node.value not in allowed:
        raise node.error(f"must be one of {', '.join(allowed)}, got {node.value!r}")
    return PreemptionPolicy(node.value)


def _parse_preemption(node: Located) -> Preemption:
    """A ClusterQueue's ``preemption`` block, with Kueue's field names and defaults."""
    check_keys(node, _PREEMPTION_KEYS)
    reclaim = _policy(optional(node, "reclaimWithinCohort"), RECLAIM_WITHIN_COHORT_POLICIES)
    borrow = optional(node, "borrowWithinCohort")
    policy = PreemptionPolicy.NEVER
    threshold: float | None = None
    if borrow is not None:
        check_keys(borrow, _BORROW_KEYS)
        policy = _policy(optional(borrow, "policy"), BORROW_WITHIN_COHORT_POLICIES)
        limit = optional(borrow, "maxPriorityThreshold")
        threshold = float(read_int(limit, minimum=-(2**31))) if limit else None
        if reclaim is PreemptionPolicy.NEVER and policy is not PreemptionPolicy.NEVER:
            raise borrow.error(
                "a policy other than Never needs reclaimWithinCohort LowerPriority or Any "
                "(Kueue rejects reclaimWithinCohort Never with it)",
                "policy",
            )
    return Preemption(
        within_cluster_queue=_policy(
            optional(node, "withinClusterQueue"), WITHIN_CLUSTER_QUEUE_POLICIES
        ),
        reclaim_within_cohort=reclaim,
        borrow_within_cohort=policy,
        max_priority_threshold=threshold,
    )


def _parse_pools_and_queues(
    errors: ErrorList,
    node: Located,
    *,
    pools_node: Located | None,
    queues_node: Located | None,
    anchor: float | None,
    scheduler: SchedulerKind,
    cluster: str = "",
    taken: set[str] | None = None,
) -> tuple[list[Pool], list[ClusterQueue]]:
    """The pools and ClusterQueues of a fleet (or of one of its clusters), errors kept."""
    pools: list[Pool] = []
    seen = taken if taken is not None else set()
    for item in errors.items(pools_node):
        pool = errors.call(None, _parse_pool, item, anchor)
        if pool is None:
            continue
        if pool.name in seen:
            errors.found.append(item.error("duplicate pool name; rename one", "name"))
        seen.add(pool.name)
        if cluster:
            pool = dataclasses.replace(pool, cluster=cluster, scheduler=scheduler)
        pools.append(pool)
    names = tuple(p.name for p in pools)
    queues: list[ClusterQueue] = []
    for item in errors.items(queues_node):
        queue = errors.call(None, _parse_queue, item, names)
        if queue is not None:
            queues.append(queue)
    if scheduler is SchedulerKind.KUEUE and not queues and queues_node is None:
        errors.found.append(
            node.error("scheduler kueue needs queues (ClusterQueues with nominal_gpus)", "queues")
        )
    return pools, queues


def _parse_cluster(
    node: Located, anchor: float | None, taken: set[str]
) -> tuple[list[Pool], list[ClusterQueue]]:
    """One cluster of a fleet: its scheduler, pools and (Kueue) ClusterQueues, whose quotas
    name pools of the same cluster."""
    errors = ErrorList()
    errors.take(lambda: check_keys(node, _CLUSTER_KEYS), None)
    name = errors.take(
        lambda: read_name(require(node, "name", "name the cluster"), "a cluster name"), "cluster"
    )
    scheduler = errors.take(
        lambda: _scheduler(require(node, "scheduler", "slurm or kueue")), SchedulerKind.SLURM
    )
    pools_node = errors.take(
        lambda: require(node, "pools", "list the cluster's GPU pools (name, gpu, num_gpus)"), None
    )
    result = _parse_pools_and_queues(
        errors, node, pools_node=pools_node, queues_node=optional(node, "queues"),
        anchor=anchor, scheduler=scheduler, cluster=name, taken=taken,
    )  # fmt: skip
    if scheduler is SchedulerKind.SLURM and optional(node, "queues") is not None:
        errors.found.append(
            node.error("ClusterQueues belong to a kueue cluster; use Slurm partitions", "queues")
        )
    errors.check()
    return result


def _scheduler(kind: Located | None) -> SchedulerKind:
    if kind is None:
        return SchedulerKind.SLURM
    if kind.value not in tuple(SchedulerKind):
        raise kind.error(f"must be slurm or kueue, got {kind.value!r}")
    return SchedulerKind(kind.value)


def _placement(node: Located | None) -> Placement:
    if node is None:
        return Placement.NODES
    if node.value not in tuple(Placement):
        raise node.error(
            f"must be nodes (jobs on whole nodes, the default) or gpus (on the pool's GPU "
            f"count, ignoring fragmentation), got {node.value!r}"
        )
    return Placement(node.value)


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
    errors = ErrorList()
    errors.take(lambda: check_keys(root, _FLEET_KEYS), None)
    own_start = errors.take(lambda: fleet_start_s(root), None)
    anchor = start_s if start_s is not None else own_start
    scheduler = errors.take(lambda: _scheduler(optional(root, "scheduler")), SchedulerKind.SLURM)
    pools: list[Pool] = []
    queues: list[ClusterQueue] = []
    clusters_node = optional(root, "clusters")
    if clusters_node is not None:
        for key in ("pools", "queues", "scheduler"):
            if optional(root, key) is not None:
                errors.found.append(
                    root.error(
                        "give it per cluster (clusters[].pools, .queues, .scheduler) in a fleet "
                        "of clusters",
                        key,
                    )
                )
        names_seen: set[str] = set()
        for item in errors.items(clusters_node):
            cluster = errors.call(None, _parse_cluster, item, anchor, names_seen)
            if cluster is not None:
                pools += cluster[0]
                queues += cluster[1]
        if pools and pools[0].scheduler is not None:
            scheduler = pools[0].scheduler
    else:
        pools_node = errors.take(
            lambda: require(root, "pools", "list the GPU pools (name, gpu, num_gpus)"), None
        )
        pools, queues = _parse_pools_and_queues(
            errors, root, pools_node=pools_node, queues_node=optional(root, "queues"),
            anchor=anchor, scheduler=scheduler,
        )  # fmt: skip
    horizon = optional(root, "horizon_days")
    rate = optional(root, "interruptions_per_gpu_hour")
    overhead = optional(root, "restart_overhead_minutes")
    name = optional(root, "name")
    placement = errors.take(lambda: _placement(optional(root, "placement")), Placement.NODES)
    horizon_s = errors.take(
        lambda: read_number(horizon) * 86400.0 if horizon else DEFAULT_HORIZON_S,
        DEFAULT_HORIZON_S,
    )
    if not math.isfinite(horizon_s):
        errors.found.append(
            root.error("must be finite: the review's length in days", "horizon_days")
        )
    rate_value = errors.take(
        lambda: read_number(rate, positive=False) if rate else LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
        0.0,
    )
    overhead_s = errors.take(
        lambda: (
            read_number(overhead, positive=False) * 60.0 if overhead else DEFAULT_RESTART_OVERHEAD_S
        ),
        0.0,
    )
    errors.check()
    if not pools:
        raise root.error("the fleet needs at least one pool", "pools")
    return Fleet(
        name=str(name.value) if name else "",
        scheduler=scheduler,
        pools=tuple(pools),
        queues=tuple(queues),
        interruptions=InterruptionModel(
            rate_per_gpu_hour=rate_value, restart_overhead_s=overhead_s
        ),
        horizon_s=horizon_s,
        start_s=own_start,
        placement=placement,
    )


def read_fleet(text: str, source: str, *, start_s: float | None = None) -> Fleet:
    """Parse the text of a fleet file (YAML or JSON) named ``source`` into a ``Fleet``
    (relative dates from ``start_s``, else from the fleet's ``start``)."""
    return parse_fleet(load_document(text, source), start_s=start_s)
