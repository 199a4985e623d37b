"""The one place that calls the official ``kubernetes`` client; everything else works on dicts.

Every call asks for the raw response (``_preload_content=False``) and decodes the JSON itself,
so the adapter does not depend on the generated models (Pydantic since client 37.x). Library
exceptions become the planner's error tree: :class:`ApiTemporaryError` (retry: 429, 5xx,
timeouts, dropped connections; 409 and 410 as their own subclasses) and :class:`ApiPermanentError`
(400, 401, 403, 404, 422: fix the configuration or RBAC).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3.exceptions
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from planner.errors import SourcePermanentError, SourceTemporaryError

FIELD_MANAGER = "llm-capacity-planner"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: ``group`` ("" for core), ``version``, ``plural``, ``kind``."""

    key: str
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``group/version`` (``v1`` for core)."""
        return f"{self.group}/{self.version}" if self.group else self.version


NODES = Resource("nodes", "", "v1", "nodes", "Node", False)
PODS = Resource("pods", "", "v1", "pods", "Pod", True)
JOBS = Resource("jobs", "batch", "v1", "jobs", "Job", True)
JOBSETS = Resource("jobsets", "jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True)
PYTORCHJOBS = Resource("pytorchjobs", "kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True)
TRAINJOBS = Resource("trainjobs", "trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True)
WORKLOADS = Resource("workloads", "kueue.x-k8s.io", "v1beta2", "workloads", "Workload", True)
LOCALQUEUES = Resource(
    "localqueues", "kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", True
)
CLUSTERQUEUES = Resource(
    "clusterqueues", "kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False
)
RESOURCEFLAVORS = Resource(
    "resourceflavors", "kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", False
)
ADMISSIONCHECKS = Resource(
    "admissionchecks", "kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck", False
)
LEASES = Resource("leases", "coordination.k8s.io", "v1", "leases", "Lease", True)
CONFIGMAPS = Resource("configmaps", "", "v1", "configmaps", "ConfigMap", True)


class ApiTemporaryError(SourceTemporaryError):
    """A failed call worth retrying. ``status`` is the HTTP status (0: no response);
    ``retry_after_s`` the server's ``Retry-After`` (429/503), if it sent one."""

    def __init__(
        self, source: str, message: str, *, status: int = 0, retry_after_s: float | None = None
    ) -> None:
        super().__init__(source, message)
        self.status = status
        self.retry_after_s = retry_after_s


class GoneError(ApiTemporaryError):
    """410 Gone: the resourceVersion is too old; re-list."""


class ConflictError(ApiTemporaryError):
    """409 Conflict: the object changed (stale resourceVersion) or an apply conflict."""


class ApiPermanentError(SourcePermanentError):
    """A failed call that retrying will not fix (bad request, RBAC, missing CRD). ``status``."""

    def __init__(self, source: str, message: str, *, status: int = 0) -> None:
        super().__init__(source, message)
        self.status = status


class NotFoundError(ApiPermanentError):
    """404: the object or the resource type (CRD not installed) does not exist."""


def _retry_after(headers: object) -> float | None:
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    value = getter("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def _status_message(body: object) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            doc = json.loads(body)
        except ValueError:
            return body[:200]
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return str(doc["message"])
    return ""


def translate_error(source: str, exc: BaseException) -> Exception:
    """Map a client/urllib3 exception to the planner's error tree (returned, not raised)."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        message = _status_message(exc.body) or str(exc.reason or "")
        text = f"HTTP {status}: {message}" if status else message or "no response"
        retry = _retry_after(exc.headers)
        if status == 410:
            return GoneError(source, text, status=status)
        if status == 409:
            return ConflictError(source, text, status=status)
        if status == 404:
            return NotFoundError(source, text, status=status)
        if status in (400, 401, 403, 405, 415, 422):
            return ApiPermanentError(source, text, status=status)
        return ApiTemporaryError(source, text, status=status, retry_after_s=retry)
    if isinstance(exc, OSError | TimeoutError):
        return ApiTemporaryError(source, f"connection failed: {exc}")
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return ApiTemporaryError(source, f"connection failed: {exc}")
    return ApiTemporaryError(source, f"{type(exc).__name__}: {exc}")


def _decode(resp: Any) -> dict[str, Any]:
    data = resp.data if hasattr(resp, "data") else resp.read()
    doc = json.loads(data) if data else {}
    if not isinstance(doc, dict):
        raise ValueError("the API server answered something that is not a JSON object")
    return doc


class WatchStream:
    """The events of one watch request: an iterator of ``{"type", "object"}`` dicts.

    Ends when the server closes the stream (its ``timeoutSeconds``); raises
    :class:`GoneError` for an ``ERROR`` event with code 410, :class:`ApiTemporaryError` for other
    ERROR events, a read timeout or a dropped connection. :meth:`close` (from any thread)
    interrupts a blocked read.
    """

    def __init__(self, resp: Any, source: str) -> None:
        self._resp = resp
        self._source = source
        self._closed = False

    def close(self) -> None:
        """Stop the stream; safe to call from another thread and more than once."""
        self._closed = True
        try:
            sock = getattr(getattr(self._resp, "connection", None), "sock", None)
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._resp.close()
            self._resp.release_conn()
        except Exception:
            pass

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = bytearray()
        try:
            for chunk in self._resp.stream(amt=None, decode_content=False):
                if self._closed:
                    return
                buffer.extend(chunk if isinstance(chunk, bytes) else str(chunk).encode())
                while (cut := buffer.find(b"\n")) != -1:
                    line, buffer = bytes(buffer[:cut]), buffer[cut + 1 :]
                    event = self._event(line)
                    if event is not None:
                        yield event
            if buffer.strip():
                event = self._event(bytes(buffer))
                if event is not None:
                    yield event
        except (GoneError, ApiTemporaryError):
            raise
        except Exception as exc:
            if self._closed:
                return
            raise translate_error(self._source, exc) from exc
        finally:
            self.close()

    def _event(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        try:
            event = json.loads(line)
        except ValueError:
            raise ApiTemporaryError(
                self._source, "watch stream sent a line that is not JSON"
            ) from None
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            return None
        if event.get("type") == "ERROR":
            obj = event["object"]
            code = obj.get("code") if isinstance(obj.get("code"), int) else 0
            text = f"watch error {code}: {obj.get('reason', '')} {obj.get('message', '')}".strip()
            if code == 410:
                raise GoneError(self._source, text, status=410)
            raise ApiTemporaryError(self._source, text, status=code)
        return event


class KubeApi:
    """Dict-in, dict-out calls over an official ``kubernetes.client.ApiClient``.

    ``request_timeout_s`` bounds each ordinary call (connect and read); a watch reads with a
    timeout a little longer than the server-side ``timeoutSeconds`` it asks for.
    """

    def __init__(self, api_client: Any, *, request_timeout_s: float = 30.0) -> None:
        self.api_client = api_client
        self.request_timeout_s = request_timeout_s
        # Typed as Any: the adapter passes dict bodies and reads raw responses, which the
        # generated signatures (models) do not describe.
        self._core: Any = k8s_client.CoreV1Api(api_client)
        self._batch: Any = k8s_client.BatchV1Api(api_client)
        self._custom: Any = k8s_client.CustomObjectsApi(api_client)
        self._coordination: Any = k8s_client.CoordinationV1Api(api_client)

    def _call(self, source: str, method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``method(*args, **kwargs)`` of a generated API, raw response decoded as a JSON object;
        any failure raised as the planner's error for ``source`` (``translate_error``)."""
        try:
            resp = method(
                *args, _preload_content=False, _request_timeout=self.request_timeout_s, **kwargs
            )
            return _decode(resp)
        except (ApiTemporaryError, ApiPermanentError):
            raise
        except Exception as exc:
            raise translate_error(source, exc) from exc

    # -------------------------------------------------------------- reading

    def _list_call(
        self, res: Resource, namespace: str | None, **kwargs: Any
    ) -> Any:  # returns the raw urllib3 response
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        kwargs["_preload_content"] = False
        if res is NODES:
            return self._core.list_node(**kwargs)
        if res is PODS:
            if namespace:
                return self._core.list_namespaced_pod(namespace, **kwargs)
            return self._core.list_pod_for_all_namespaces(**kwargs)
        if res is JOBS:
            if namespace:
                return self._batch.list_namespaced_job(namespace, **kwargs)
            return self._batch.list_job_for_all_namespaces(**kwargs)
        if res.group in ("", "batch", "coordination.k8s.io"):
            raise ApiPermanentError(f"kubernetes:{res.key}", "listing it is not supported")
        if namespace and res.namespaced:
            return self._custom.list_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, **kwargs
            )
        return self._custom.list_cluster_custom_object(res.group, res.version, res.plural, **kwargs)

    def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        label_selector: str | None = None,
    ) -> dict[str, Any]:
        """One page of a list: the ``*List`` object (``items``, ``metadata.resourceVersion`` and
        ``metadata.continue``)."""
        return self._call(
            f"kubernetes:list {res.key}",
            self._list_call,
            res,
            namespace,
            limit=limit,
            _continue=continue_token,
            label_selector=label_selector,
        )

    def watch(
        self,
        res: Resource,
        *,
        resource_version: str,
        timeout_s: int,
        namespace: str | None = None,
        label_selector: str | None = None,
        bookmarks: bool = True,
    ) -> WatchStream:
        """Open a watch from ``resource_version`` that the server ends after ``timeout_s``."""
        source = f"kubernetes:watch {res.key}"
        try:
            resp = self._list_call(
                res,
                namespace,
                watch=True,
                allow_watch_bookmarks=bookmarks,
                resource_version=resource_version,
                timeout_seconds=int(timeout_s),
                label_selector=label_selector,
                _request_timeout=(self.request_timeout_s, float(timeout_s) + 5.0),
            )
        except Exception as exc:
            raise translate_error(source, exc) from exc
        return WatchStream(resp, source)

    def get_path(self, path: str, query: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET an API path the typed APIs lack (e.g. Kueue's visibility API); a JSON object."""
        source = f"kubernetes:GET {path}"
        try:
            params = self.api_client.param_serialize(
                method="GET",
                resource_path=path,
                query_params=list((query or {}).items()),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            resp = self.api_client.call_api(*params, _request_timeout=self.request_timeout_s)
            resp.read()
            if not 200 <= resp.status <= 299:
                raise ApiException(http_resp=resp)
            return _decode(resp)
        except (ApiTemporaryError, ApiPermanentError):
            raise
        except Exception as exc:
            raise translate_error(source, exc) from exc

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any]:
        """A ConfigMap as a dict."""
        return self._call(
            f"kubernetes:configmap {namespace}/{name}",
            self._core.read_namespaced_config_map,
            name,
            namespace,
        )

    # -------------------------------------------------------------- writing

    def apply_status(
        self,
        res: Resource,
        name: str,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str = FIELD_MANAGER,
        force: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply of ``body`` to the object's ``status`` subresource."""
        source = f"kubernetes:apply {res.key}/status {name}"
        options = {"field_manager": field_manager, "force": force, "_content_type": APPLY_PATCH}
        if res.namespaced:
            return self._call(
                source,
                self._custom.patch_namespaced_custom_object_status,
                *(res.group, res.version, namespace, res.plural, name, dict(body)),
                **options,
            )
        return self._call(
            source,
            self._custom.patch_cluster_custom_object_status,
            *(res.group, res.version, res.plural, name, dict(body)),
            **options,
        )

    def merge_patch(
        self,
        res: Resource,
        name: str,
        body: Mapping[str, Any],
        *,
        namespace: str,
        field_manager: str = FIELD_MANAGER,
    ) -> dict[str, Any]:
        """JSON merge patch (RFC 7386) of a namespaced object: only the keys in ``body`` change
        (a ``None`` value deletes its key)."""
        source = f"kubernetes:patch {res.key} {namespace}/{name}"
        options = {"field_manager": field_manager, "_content_type": MERGE_PATCH}
        if res is JOBS:
            return self._call(
                source, self._batch.patch_namespaced_job, name, namespace, dict(body), **options
            )
        return self._call(
            source,
            self._custom.patch_namespaced_custom_object,
            *(res.group, res.version, namespace, res.plural, name, dict(body)),
            **options,
        )

    # -------------------------------------------------------------- leases

    def read_lease(self, namespace: str, name: str) -> dict[str, Any]:
        """The Lease, as a dict; raises :class:`NotFoundError` when it does not exist."""
        return self._call(
            f"kubernetes:lease {namespace}/{name}",
            self._coordination.read_namespaced_lease,
            name,
            namespace,
        )

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create a Lease; :class:`ConflictError` when another replica created it first."""
        return self._call(
            f"kubernetes:lease {namespace}",
            self._coordination.create_namespaced_lease,
            namespace,
            dict(body),
        )

    def replace_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Replace a Lease; ``body.metadata.resourceVersion`` makes it conditional (409 when the
        Lease changed since it was read)."""
        return self._call(
            f"kubernetes:lease {namespace}/{name}",
            self._coordination.replace_namespaced_lease,
            name,
            namespace,
            dict(body),
        )

    # -------------------------------------------------------------- reviews (API authentication)

    def create_token_review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST an ``authentication.k8s.io/v1`` TokenReview; the answer with its ``status``."""
        api: Any = k8s_client.AuthenticationV1Api(self.api_client)
        return self._call("kubernetes:tokenreview", api.create_token_review, dict(body))

    def create_subject_access_review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST an ``authorization.k8s.io/v1`` SubjectAccessReview; the answer."""
        api: Any = k8s_client.AuthorizationV1Api(self.api_client)
        return self._call(
            "kubernetes:subjectaccessreview", api.create_subject_access_review, dict(body)
        )
