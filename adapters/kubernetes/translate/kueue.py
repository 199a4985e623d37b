"""Kueue objects (``kueue.x-k8s.io/v1beta2``): Workloads, LocalQueues, ResourceFlavors and the
visibility API's pending positions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from adapters.kubernetes.translate.objects import (
    PodGroup,
    as_int,
    as_list,
    as_map,
    as_str,
    condition,
    condition_time,
    gpu_product_of,
    name_of,
    namespace_of,
    template_gpus,
)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


def workload_pod_groups(workload: Mapping[str, Any]) -> list[PodGroup]:
    """Pod groups of a Kueue Workload: ``spec.podSets``, with the admitted counts when admitted."""
    admitted = {
        as_str(as_map(a).get("name")): as_int(as_map(a).get("count"), -1)
        for a in as_list(
            as_map(as_map(workload.get("status")).get("admission")).get("podSetAssignments")
        )
    }
    groups = []
    for pod_set in as_list(as_map(workload.get("spec")).get("podSets")):
        pmap = as_map(pod_set)
        name = as_str(pmap.get("name")) or "main"
        count = as_int(pmap.get("count"), 1)
        if admitted.get(name, -1) >= 0:
            count = admitted[name]
        template = as_map(pmap.get("template"))
        groups.append(PodGroup(name, count, template_gpus(template), template))
    return groups


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadView:
    """What the planner reads from a Kueue Workload (``kueue.x-k8s.io/v1beta2``)."""

    namespace: str
    name: str
    queue_name: str
    cluster_queue: str
    quota_reserved: bool
    admitted: bool
    finished: bool
    evicted: bool
    active: bool
    reason: str
    message: str
    admitted_time_s: float | None
    finished_time_s: float | None
    max_execution_time_s: float | None
    flavors: tuple[str, ...]
    pod_groups: tuple[PodGroup, ...]


def workload_view(workload: Mapping[str, Any]) -> WorkloadView:
    """Read a Workload's queue, admission and conditions."""
    spec = as_map(workload.get("spec"))
    status = as_map(workload.get("status"))
    admission = as_map(status.get("admission"))
    flavors: list[str] = []
    for assignment in as_list(admission.get("podSetAssignments")):
        for flavor in as_map(as_map(assignment).get("flavors")).values():
            if isinstance(flavor, str) and flavor not in flavors:
                flavors.append(flavor)
    quota = condition(workload, "QuotaReserved")
    admitted = condition(workload, "Admitted")
    finished = condition(workload, "Finished")
    evicted = condition(workload, "Evicted")
    pending_cond = quota if quota is not None and quota.get("status") != "True" else None
    if evicted is not None and evicted.get("status") == "True":
        pending_cond = evicted
    elif pending_cond is None and admitted is not None and admitted.get("status") != "True":
        pending_cond = admitted
    max_exec = spec.get("maximumExecutionTimeSeconds")
    return WorkloadView(
        namespace=namespace_of(workload),
        name=name_of(workload),
        queue_name=as_str(spec.get("queueName")),
        cluster_queue=as_str(admission.get("clusterQueue")),
        quota_reserved=quota is not None and quota.get("status") == "True",
        admitted=admitted is not None and admitted.get("status") == "True",
        finished=finished is not None and finished.get("status") == "True",
        evicted=evicted is not None and evicted.get("status") == "True",
        active=spec.get("active") is not False,
        reason=as_str(pending_cond.get("reason")) if pending_cond else "",
        message=as_str(pending_cond.get("message")) if pending_cond else "",
        admitted_time_s=condition_time(admitted)
        if admitted and admitted.get("status") == "True"
        else None,
        finished_time_s=condition_time(finished) if finished else None,
        max_execution_time_s=float(max_exec) if isinstance(max_exec, int) else None,
        flavors=tuple(flavors),
        pod_groups=tuple(workload_pod_groups(workload)),
    )


def flavor_product(flavor: Mapping[str, Any]) -> str | None:
    """GPU product a Kueue ResourceFlavor selects through ``spec.nodeLabels``."""
    labels = {
        k: v
        for k, v in as_map(as_map(flavor.get("spec")).get("nodeLabels")).items()
        if isinstance(v, str)
    }
    return gpu_product_of(labels)


def queue_products(
    cluster_queues: Iterable[Mapping[str, Any]], flavor_products: Mapping[str, str]
) -> dict[str, str]:
    """``{ClusterQueue name: GPU product}``: the product of the first flavor, in
    ``spec.resourceGroups[].flavors[]`` order (Kueue tries them in that order), whose
    ResourceFlavor selects one (``flavor_products``). Queues without one are left out."""
    out: dict[str, str] = {}
    for queue in cluster_queues:
        name = name_of(queue)
        groups = as_list(as_map(queue.get("spec")).get("resourceGroups"))
        flavors = [
            as_str(as_map(f).get("name")) for g in groups for f in as_list(as_map(g).get("flavors"))
        ]
        product = next((flavor_products[f] for f in flavors if f in flavor_products), None)
        if name and product is not None:
            out[name] = product
    return out


def local_queue_target(local_queue: Mapping[str, Any]) -> str:
    """The ClusterQueue a LocalQueue points at (``spec.clusterQueue``)."""
    return as_str(as_map(local_queue.get("spec")).get("clusterQueue"))


def pending_positions(pending: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """``{(namespace, workload): positionInClusterQueue}`` from a Kueue visibility
    ``PendingWorkloadsSummary`` (``visibility.kueue.x-k8s.io/v1beta2``)."""
    out: dict[tuple[str, str], int] = {}
    for item in as_list(pending.get("items")):
        imap = as_map(item)
        pos = imap.get("positionInClusterQueue")
        if isinstance(pos, int) and not isinstance(pos, bool) and name_of(imap):
            out[(namespace_of(imap), name_of(imap))] = pos
    return out
