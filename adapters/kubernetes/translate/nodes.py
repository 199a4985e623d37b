"""Nodes (``v1``) as :class:`~planner.specs.job.NodeState`, and the pods bound to them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from adapters.kubernetes.translate.objects import (
    as_map,
    as_str,
    condition,
    gpu_product_of,
    gpus_in,
    labels_of,
    name_of,
    parse_quantity,
    pod_spec_gpus,
)
from planner.specs.job import NodeState

#: Node labels that place a node in the network/NVLink topology, when present.
TOPOLOGY_LABELS = (
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.clique",
    "network.topology.nvidia.com/accelerator",
    "network.topology.nvidia.com/block",
    "network.topology.nvidia.com/spine",
    "network.topology.nvidia.com/datacenter",
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
)


def node_topology(node: Mapping[str, Any]) -> dict[str, str]:
    """The topology labels of ``TOPOLOGY_LABELS`` a node carries."""
    labels = labels_of(node)
    return {key: labels[key] for key in TOPOLOGY_LABELS if labels.get(key)}


def pod_is_terminal(pod: Mapping[str, Any]) -> bool:
    """True for pods that hold no resources any more (Succeeded/Failed)."""
    return as_map(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def pod_gpus(pod: Mapping[str, Any]) -> int:
    """GPUs the pod requests."""
    return pod_spec_gpus(as_map(pod.get("spec")))


def pod_node(pod: Mapping[str, Any]) -> str:
    """The node the pod is bound to ("" when not scheduled)."""
    return as_str(as_map(pod.get("spec")).get("nodeName"))


def node_state(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] = ()) -> NodeState:
    """A Node (``v1``) as :class:`NodeState`.

    ``num_gpus`` is the allocatable GPU count (capacity when allocatable is missing);
    ``num_gpus_allocated`` sums the GPU requests of the non-terminal ``pods`` bound to it.
    ``state``: ``ready``, ``not-ready``, ``unknown`` (no Ready condition), with ``+cordoned``
    when ``spec.unschedulable``. ``gpu_type`` is the GPU product label (see
    ``GPU_PRODUCT_LABELS``), as the label spells it; ``partitions`` the node pool label, if any.
    """
    name = name_of(node)
    status = as_map(node.get("status"))
    allocatable = as_map(status.get("allocatable"))
    capacity = as_map(status.get("capacity"))
    num_gpus = gpus_in(allocatable) if allocatable else gpus_in(capacity)
    ready = condition(node, "Ready")
    if ready is None:
        state = "unknown"
    else:
        state = "ready" if ready.get("status") == "True" else "not-ready"
    if as_map(node.get("spec")).get("unschedulable") is True:
        state += "+cordoned"
    used = sum(pod_gpus(p) for p in pods if pod_node(p) == name and not pod_is_terminal(p))
    cpus = parse_quantity(allocatable.get("cpu") or capacity.get("cpu"))
    memory = parse_quantity(allocatable.get("memory") or capacity.get("memory"))
    labels = labels_of(node)
    pool = next(
        (
            labels[k]
            for k in (
                "cloud.google.com/gke-nodepool",
                "eks.amazonaws.com/nodegroup",
                "karpenter.sh/nodepool",
                "agentpool",
            )
            if labels.get(k)
        ),
        None,
    )
    return NodeState(
        name=name,
        state=state,
        num_gpus=num_gpus,
        num_gpus_allocated=used,
        gpu_type=gpu_product_of(labels),
        num_cpus=int(cpus) if cpus is not None else 0,
        memory_bytes=memory if memory is not None else 0.0,
        partitions=(pool,) if pool else (),
    )
