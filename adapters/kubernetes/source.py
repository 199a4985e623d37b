"""``KubernetesSource``: a :class:`planner.ports.SchedulerSource` over informer caches.

One :class:`~adapters.kubernetes.informer.Informer` per resource keeps a cache current (list +
watch in a background thread); :meth:`KubernetesSource.snapshot` only reads the caches and
translates them with the pure functions of :mod:`adapters.kubernetes.translate`, so a snapshot
never waits on the API server (except the optional queue-position query to Kueue's visibility
API).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adapters.files import DEFAULT_TIMEOUT_S, read_job_file, utf8_head, utf8_text
from adapters.kubernetes.client import (
    CLUSTERQUEUES,
    JOBS,
    JOBSETS,
    LOCALQUEUES,
    NODES,
    PODS,
    PYTORCHJOBS,
    RESOURCEFLAVORS,
    TRAINJOBS,
    WORKLOADS,
    KubeApi,
    Resource,
)
from adapters.kubernetes.informer import Informer, InformerStats
from adapters.kubernetes.translate import (
    ANNOTATION_SCHEME,
    CONFIGMAP_SCHEME,
    KIND_JOB,
    KIND_JOBSET,
    KIND_PYTORCHJOB,
    KIND_TRAINJOB,
    SCHEDULER,
    JobContext,
    description_fields,
    flavor_product,
    gpu_product_of,
    is_child_job,
    job_state,
    labels_of,
    local_queue_target,
    name_of,
    namespace_of,
    node_state,
    node_topology,
    owner_key,
    pending_positions,
    pod_groups,
    pods_of_job,
    queue_products,
)
from planner.errors import PlannerError, SourcePermanentError, SourceTemporaryError
from planner.specs.job import ClusterSnapshot, JobState

_log = logging.getLogger(__name__)

_JOB_RESOURCES: dict[str, Resource] = {
    KIND_TRAINJOB: TRAINJOBS,
    KIND_JOBSET: JOBSETS,
    KIND_PYTORCHJOB: PYTORCHJOBS,
    KIND_JOB: JOBS,
}
#: Resources watched by default. Nodes and pods are required; the others are optional (a CRD
#: that is not installed is reported as a warning, not an error).
DEFAULT_RESOURCES: tuple[Resource, ...] = (
    NODES,
    PODS,
    JOBS,
    JOBSETS,
    PYTORCHJOBS,
    TRAINJOBS,
    WORKLOADS,
    LOCALQUEUES,
    CLUSTERQUEUES,
    RESOURCEFLAVORS,
)
_REQUIRED = frozenset({NODES.key, PODS.key})


class KubernetesSource:
    """Reads a Kubernetes cluster (jobs of Kueue, JobSet, Kubeflow, batch) as a scheduler source.

    Parameters:
        api_client: an official ``kubernetes.client.ApiClient`` (from
            ``kubernetes.config.load_incluster_config()`` / ``load_kube_config()`` or a
            ``Configuration`` of your own).
        cluster: the cluster name reported in snapshots.
        namespace: watch only this namespace (None: all; nodes and cluster queues are always
            cluster-wide).
        resources: what to watch (default :data:`DEFAULT_RESOURCES`).
        label_selector: server-side filter for the job kinds (e.g. ``"team=llm"``).
        watch_timeout_s / resync_s / page_size / request_timeout_s / backoff_initial_s /
            backoff_max_s: see :class:`~adapters.kubernetes.informer.Informer`.
        queue_positions: ask Kueue's visibility API for each ClusterQueue's pending workloads
            at each snapshot (``visibility.kueue.x-k8s.io/v1beta2``; needs RBAC ``get`` on
            ``clusterqueues/pendingworkloads``). Failures become warnings.
        allowed_file_roots: directories under which ``planner.llm/scenario`` paths may be read
            (volumes mounted into the planner's pod; setting ``kubernetes.allowed_file_roots``);
            default none: no local file is read. A Kubernetes job has no user on the planner's
            host, so only world-readable files under world-searchable directories are read
            (see :mod:`adapters.files`: regular files only, bounded, symlinks out refused).
        scenario_roots: older name of ``allowed_file_roots`` (both are used).
        file_timeout_s: time limit of one local file read, seconds.
        allow_configmap_scenarios: read ``configmap:NAME/KEY`` scenarios (RBAC ``get`` on
            configmaps in the jobs' namespaces).
        clock: epoch seconds for ``taken_at_s``.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        cluster: str = "kubernetes",
        namespace: str | None = None,
        resources: Sequence[Resource] = DEFAULT_RESOURCES,
        label_selector: str | None = None,
        watch_timeout_s: int = 300,
        resync_s: float = 600.0,
        page_size: int = 500,
        request_timeout_s: float = 30.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        queue_positions: bool = True,
        allowed_file_roots: Sequence[str] = (),
        scenario_roots: Sequence[str] = (),
        file_timeout_s: float = DEFAULT_TIMEOUT_S,
        allow_configmap_scenarios: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = KubeApi(api_client, request_timeout_s=request_timeout_s)
        self.cluster = cluster
        self._clock = clock
        self._queue_positions = queue_positions
        self._allowed_file_roots = (*allowed_file_roots, *scenario_roots)
        self._file_timeout_s = float(file_timeout_s)
        self._allow_configmaps = allow_configmap_scenarios
        self._inline_lock = threading.Lock()
        self._inline: dict[str, str] = {}
        self.informers: dict[str, Informer] = {}
        for res in resources:
            cluster_wide = not res.namespaced
            selector = label_selector if res in _JOB_RESOURCES.values() else None
            self.informers[res.key] = Informer(
                self.api,
                res,
                namespace=None if cluster_wide else namespace,
                label_selector=selector,
                page_size=page_size,
                watch_timeout_s=watch_timeout_s,
                resync_s=resync_s,
                backoff_initial_s=backoff_initial_s,
                backoff_max_s=backoff_max_s,
            )

    # ------------------------------------------------------------------ lifecycle

    @property
    def scheduler(self) -> str:
        """``"kubernetes"``."""
        return SCHEDULER

    def start(self) -> None:
        """Start every informer's list/watch thread."""
        for informer in self.informers.values():
            informer.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop every informer."""
        for informer in self.informers.values():
            informer.stop(timeout_s)

    def wait_synced(self, timeout_s: float) -> bool:
        """True once every informer listed once (or found its CRD missing) within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        for informer in self.informers.values():
            while not informer.has_synced and informer.stats.installed:
                step = min(0.05, max(0.0, deadline - time.monotonic()))
                if not informer.wait_synced(step) and time.monotonic() >= deadline:
                    return False
        return True

    def stats(self) -> dict[str, InformerStats]:
        """Counters per resource (``lists``, ``events``, ``relists_gone``, ``errors``, ...)."""
        return {key: informer.stats for key, informer in self.informers.items()}

    def _items(self, res: Resource) -> list[dict[str, Any]]:
        informer = self.informers.get(res.key)
        return informer.items() if informer is not None else []

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> ClusterSnapshot:
        """Jobs and nodes from the caches now.

        Raises ``SourceTemporaryError`` until nodes and pods have been listed once. Optional
        resources that failed or whose CRD is missing add warnings.
        """
        taken_at_s = self._clock()
        warnings: list[str] = []
        for key, informer in self.informers.items():
            st = informer.stats
            if not informer.has_synced:
                if key in _REQUIRED:
                    raise SourceTemporaryError(
                        f"kubernetes:{key}", f"not listed yet ({st.last_error or 'starting'})"
                    )
                why = "not installed" if not st.installed else st.last_error or "starting"
                warnings.append(f"{key}: not available ({why})")
            elif st.last_error:
                warnings.append(f"{key}: {st.last_error} (serving the cached copy)")

        nodes_raw = self._items(NODES)
        pods = self._items(PODS)
        workloads = self._items(WORKLOADS)
        node_products = {
            name_of(n): p for n in nodes_raw if (p := gpu_product_of(labels_of(n))) is not None
        }
        flavor_products = {
            name_of(f): p for f in self._items(RESOURCEFLAVORS) if (p := flavor_product(f))
        }
        local_queues = {
            (namespace_of(q), name_of(q)): local_queue_target(q) for q in self._items(LOCALQUEUES)
        }
        cq_products = queue_products(self._items(CLUSTERQUEUES), flavor_products)
        by_owner: dict[tuple[str, str, str], dict[str, Any]] = {}
        for wl in workloads:
            owner = owner_key(wl)
            if owner is not None:
                by_owner[(namespace_of(wl), owner[0], owner[1])] = wl
        positions = self._positions(workloads, warnings) if self._queue_positions else {}

        pods_by_ns: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            pods_by_ns.setdefault(namespace_of(pod), []).append(pod)

        jobs: list[JobState] = []
        inline: dict[str, str] = {}
        for kind, res in _JOB_RESOURCES.items():
            for obj in self._items(res):
                if is_child_job(kind, obj):
                    continue
                try:
                    job = self._job(
                        kind,
                        obj,
                        pods_by_ns,
                        by_owner,
                        local_queues,
                        positions,
                        node_products,
                        (flavor_products, cq_products),
                        inline,
                    )
                except Exception as exc:
                    warnings.append(
                        f"{kind} {namespace_of(obj)}/{name_of(obj)}: not readable ({exc})"
                    )
                    continue
                jobs.append(job)
        with self._inline_lock:
            self._inline = inline

        nodes = [node_state(n, pods) for n in nodes_raw if name_of(n)]
        return ClusterSnapshot(
            scheduler=SCHEDULER,
            cluster=self.cluster,
            taken_at_s=taken_at_s,
            jobs=tuple(sorted(jobs, key=lambda j: j.job_id)),
            nodes=tuple(sorted(nodes, key=lambda n: n.name)),
            warnings=tuple(warnings),
        )

    def _job(  # noqa: PLR0917 - private helper of snapshot()
        self,
        kind: str,
        obj: Mapping[str, Any],
        pods_by_ns: Mapping[str, list[dict[str, Any]]],
        by_owner: Mapping[tuple[str, str, str], dict[str, Any]],
        local_queues: Mapping[tuple[str, str], str],
        positions: Mapping[tuple[str, str], int],
        node_products: Mapping[str, str],
        products: tuple[Mapping[str, str], Mapping[str, str]],
        inline: dict[str, str],
    ) -> JobState:
        namespace, name = namespace_of(obj), name_of(obj)
        context = JobContext(
            pods=pods_of_job(kind, obj, pods_by_ns.get(namespace, [])),
            workload=by_owner.get((namespace, kind, name)),
            local_queues=local_queues,
            queue_positions=positions,
            node_products=node_products,
            flavor_products=products[0],
            queue_products=products[1],
        )
        groups = pod_groups(kind, obj)
        _, _, _, scenario = description_fields(kind, obj, groups[0].template if groups else None)
        inline.update(scenario)
        return job_state(kind, obj, context, cluster=self.cluster)

    def _positions(
        self, workloads: Sequence[Mapping[str, Any]], warnings: list[str]
    ) -> dict[tuple[str, str], int]:
        """Positions of pending workloads per ClusterQueue (Kueue visibility API)."""
        queues = {name_of(q) for q in self._items(CLUSTERQUEUES) if name_of(q)}
        if not queues or not workloads:
            return {}
        out: dict[tuple[str, str], int] = {}
        for queue in sorted(queues):
            path = f"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{queue}/pendingworkloads"
            try:
                out.update(pending_positions(self.api.get_path(path)))
            except PlannerError as exc:
                warnings.append(f"queue positions of {queue}: {exc}")
        return out

    def node_topology(self) -> dict[str, dict[str, str]]:
        """``{node: {topology label: value}}`` for the cached nodes (see ``TOPOLOGY_LABELS``)."""
        return {name_of(n): node_topology(n) for n in self._items(NODES) if name_of(n)}

    # ------------------------------------------------------------------ scenario files

    def read_text_file(
        self, path: str, max_bytes: int, *, job: JobState | None = None, head: bool = False
    ) -> str:
        """Read a scenario a job's ``planner.llm/scenario`` annotation names (``job``: that
        job; the rules are the same for every Kubernetes job).

        ``k8s-annotation:...`` paths return the inline annotation text seen at the last
        snapshot; ``k8s-configmap:NAMESPACE/NAME/KEY`` reads a ConfigMap key (when allowed);
        absolute paths read a world-readable local file under ``allowed_file_roots``. Raises
        ``SourcePermanentError`` (missing, too large, not allowed) or
        ``SourceTemporaryError`` (API unreachable).
        """
        source = "kubernetes:scenario"
        if path.startswith(ANNOTATION_SCHEME):
            with self._inline_lock:
                text = self._inline.get(path)
            if text is None:
                raise SourcePermanentError(source, f"{path}: the annotation is gone")
            return _limit(source, path, text, max_bytes, head=head)
        if path.startswith(CONFIGMAP_SCHEME):
            if not self._allow_configmaps:
                raise SourcePermanentError(
                    source, f"{path}: ConfigMap scenarios are disabled (allow_configmap_scenarios)"
                )
            parts = path.removeprefix(CONFIGMAP_SCHEME).split("/")
            if len(parts) != 3 or not all(parts):
                raise SourcePermanentError(source, f"{path}: expected configmap:NAME/KEY")
            namespace, name, key = parts
            data = self.api.read_config_map(namespace, name).get("data")
            text = data.get(key) if isinstance(data, dict) else None
            if not isinstance(text, str):
                raise SourcePermanentError(source, f"{path}: ConfigMap has no key {key!r}")
            return _limit(source, path, text, max_bytes, head=head)
        return self._read_local(source, path, max_bytes, head=head)

    def _read_local(self, source: str, path: str, max_bytes: int, *, head: bool = False) -> str:
        data = read_job_file(
            source,
            path,
            roots=self._allowed_file_roots,
            user=None,  # no host identity: only what others may read
            max_bytes=max_bytes,
            timeout_s=self._file_timeout_s,
            head=head,
        )
        return utf8_head(data) if head else utf8_text(source, path, data)


def _limit(source: str, path: str, text: str, max_bytes: int, *, head: bool = False) -> str:
    if head:
        return text.encode()[:max_bytes].decode("utf-8", errors="replace")
    if len(text.encode()) > max_bytes:
        raise SourcePermanentError(source, f"{path}: larger than the {max_bytes}-byte limit")
    return text
