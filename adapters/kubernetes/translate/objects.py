"""Reading Kubernetes API objects (plain dicts, as the API server sends them): metadata,
conditions, quantities, times and the GPUs pod specs ask for.

Nothing here does I/O or raises on odd input (missing fields, wrong types): what cannot be read
is left at its default. The translators of nodes, jobs and Kueue objects build on these readers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity as _client_parse_quantity

# The client's parser is untyped: str or number in, Decimal out, ValueError on garbage.
_k8s_parse_quantity: Callable[[int | float | str], Decimal] = _client_parse_quantity

SCHEDULER = "kubernetes"

#: Extended resources that count as GPUs, in the order they are looked up.
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/xe", "gpu.intel.com/i915")

#: Node labels naming the GPU product (NVIDIA GPU feature discovery, AMD node labeller, GKE, EKS).
GPU_PRODUCT_LABELS = (
    "nvidia.com/gpu.product",
    "amd.com/gpu.product-name",
    "beta.amd.com/gpu.product-name",
    "cloud.google.com/gke-accelerator",
    "k8s.amazonaws.com/accelerator",
)


def as_map(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[Any]:
    """A copy of ``value`` if it is a list, else ``[]``."""
    return list(value) if isinstance(value, list) else []


def as_str(value: object) -> str:
    """``value`` if it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def as_int(value: object, default: int = 0) -> int:
    """``value`` as an int (integral numbers, numeric strings), else ``default``."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj["metadata"]`` or an empty mapping."""
    return as_map(obj.get("metadata"))


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name`` ("" when missing)."""
    return as_str(metadata(obj).get("name"))


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace`` ("" for cluster-scoped objects)."""
    return as_str(metadata(obj).get("namespace"))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.labels`` with non-string values dropped."""
    return {k: v for k, v in as_map(metadata(obj).get("labels")).items() if isinstance(v, str)}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.annotations`` with non-string values dropped."""
    raw = as_map(metadata(obj).get("annotations"))
    return {k: v for k, v in raw.items() if isinstance(v, str)}


def parse_quantity(value: object) -> float | None:
    """A Kubernetes resource quantity (``8``, ``"8"``, ``"500m"``, ``"16Gi"``, ``"1e3"``) as a
    float in the base unit; None when absent or not a finite quantity.

    Parsed by the official client's ``kubernetes.utils.parse_quantity`` (the suffixes of
    apimachinery's ``resource.Quantity``: ``n u m k M G T P E`` and ``Ki Mi Gi Ti Pi Ei``).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        parsed = float(_k8s_parse_quantity(value.strip() if isinstance(value, str) else value))
    except (ValueError, ArithmeticError):
        return None
    return parsed if math.isfinite(parsed) else None


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp (``metav1.Time``/``MicroTime``) as epoch seconds; None if absent or
    unparseable."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp()


def gpus_in(resources: Mapping[str, Any]) -> int:
    """GPUs in a ``{resource: quantity}`` map (requests or limits); 0 when none or unreadable."""
    total = 0.0
    for key in GPU_RESOURCES:
        qty = parse_quantity(resources.get(key))
        if qty is not None and qty > 0:
            total += qty
    return int(total)


def container_gpus(container: Mapping[str, Any]) -> int:
    """GPUs one container asks for: its requests, else its limits (extended resources default
    their request to the limit)."""
    resources = as_map(container.get("resources"))
    requested = gpus_in(as_map(resources.get("requests")))
    return requested or gpus_in(as_map(resources.get("limits")))


def pod_spec_gpus(pod_spec: Mapping[str, Any]) -> int:
    """GPUs one pod of this spec needs: sum over its containers (init containers run before and
    release theirs, so the larger of that sum and the largest init container)."""
    main = sum(container_gpus(as_map(c)) for c in as_list(pod_spec.get("containers")))
    init = max(
        (container_gpus(as_map(c)) for c in as_list(pod_spec.get("initContainers"))), default=0
    )
    return max(main, init)


def template_gpus(template: Mapping[str, Any]) -> int:
    """GPUs per pod of a ``PodTemplateSpec``."""
    return pod_spec_gpus(as_map(template.get("spec")))


def gpu_product_of(labels: Mapping[str, str]) -> str | None:
    """GPU product named by node labels or a node selector (first of ``GPU_PRODUCT_LABELS``)."""
    for key in GPU_PRODUCT_LABELS:
        value = labels.get(key)
        if value:
            return value
    return None


def condition(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    """The ``status.conditions[]`` entry of type ``ctype``, or None."""
    for cond in as_list(as_map(obj.get("status")).get("conditions")):
        cmap = as_map(cond)
        if cmap.get("type") == ctype:
            return cmap
    return None


def condition_true(obj: Mapping[str, Any], ctype: str) -> bool:
    """True when condition ``ctype`` exists with status ``"True"``."""
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def condition_time(cond: Mapping[str, Any] | None) -> float | None:
    """When a condition last changed (``lastTransitionTime``, else ``lastUpdateTime``)."""
    if cond is None:
        return None
    return parse_time(cond.get("lastTransitionTime")) or parse_time(cond.get("lastUpdateTime"))


@dataclass(frozen=True, slots=True)
class PodGroup:
    """One group of identical pods of a job: ``count`` pods of ``gpus_per_pod`` GPUs each."""

    name: str
    count: int
    gpus_per_pod: int
    template: Mapping[str, Any] = field(default_factory=dict)


def owner_key(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, name)`` of the controlling owner reference (kind lower case), or None."""
    refs = [as_map(r) for r in as_list(metadata(obj).get("ownerReferences"))]
    chosen = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    if chosen is None:
        return None
    return as_str(chosen.get("kind")).lower(), as_str(chosen.get("name"))
