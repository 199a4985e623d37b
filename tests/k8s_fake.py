"""A fake Kubernetes API server for tests: real HTTP, the real wire format, no cluster.

It speaks what the adapter uses, so the official ``kubernetes`` client runs against it unchanged:

* ``/version``; collections and objects under ``/api/v1`` and ``/apis/GROUP/VERSION``
  (namespaced and cluster-scoped), ``status`` subresources;
* LIST with ``resourceVersion``, ``limit``/``continue`` and ``labelSelector`` (equality);
* WATCH (``?watch=true``): chunked JSON lines ``{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR,
  "object": ...}``; BOOKMARKs every ``bookmark_interval_s`` when ``allowWatchBookmarks``;
  ``timeoutSeconds`` (capped at ``max_watch_s``); a resourceVersion older than the compacted
  history gets an ``ERROR`` event carrying a 410 ``Status`` (as the real server does);
* POST (create, 409 AlreadyExists), PUT (replace; 409 Conflict on a stale
  ``metadata.resourceVersion``), DELETE;
* PATCH ``application/merge-patch+json`` (RFC 7386) and ``application/apply-patch+yaml``
  (server-side apply with ``fieldManager`` and ``force``, conflicts, field ownership recorded
  in ``metadata.managedFields`` as ``FieldsV1``, list-map merging by key for the lists the
  adapter writes: ``status.admissionChecks`` by ``name``, ``*.conditions`` by ``type``);
* Kueue's visibility API ``clusterqueues/NAME/pendingworkloads`` (positions computed from the
  stored Workloads and LocalQueues);
* injectable faults (:class:`Fault`: an HTTP status with ``Retry-After``, or a dropped
  connection), :meth:`FakeKube.compact` (forces 410s) and :meth:`FakeKube.drop_watches`.

Not a validating server: bodies are stored as sent (tests validate objects against the CRD
schemas separately, ``tests/adapters/kubernetes/crd_schema.py``).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

# (group, plural) -> (kind, namespaced, has status subresource)
RESOURCES: dict[tuple[str, str], tuple[str, bool, bool]] = {
    ("", "nodes"): ("Node", False, True),
    ("", "pods"): ("Pod", True, True),
    ("", "configmaps"): ("ConfigMap", True, False),
    ("batch", "jobs"): ("Job", True, True),
    ("coordination.k8s.io", "leases"): ("Lease", True, False),
    ("jobset.x-k8s.io", "jobsets"): ("JobSet", True, True),
    ("kubeflow.org", "pytorchjobs"): ("PyTorchJob", True, True),
    ("trainer.kubeflow.org", "trainjobs"): ("TrainJob", True, True),
    ("kueue.x-k8s.io", "workloads"): ("Workload", True, True),
    ("kueue.x-k8s.io", "localqueues"): ("LocalQueue", True, True),
    ("kueue.x-k8s.io", "clusterqueues"): ("ClusterQueue", False, True),
    ("kueue.x-k8s.io", "resourceflavors"): ("ResourceFlavor", False, False),
    ("kueue.x-k8s.io", "admissionchecks"): ("AdmissionCheck", False, True),
}
# Lists merged by key under server-side apply (x-kubernetes-list-type: map), by last path key.
LIST_MAP_KEYS = {"admissionChecks": "name", "conditions": "type", "podSetAssignments": "name"}

_CORE = re.compile(r"^/api/(v1)/(?:namespaces/([^/]+)/)?([^/]+)(?:/([^/]+))?(?:/([^/]+))?$")
_GROUP = re.compile(
    r"^/apis/([^/]+)/([^/]+)/(?:namespaces/([^/]+)/)?([^/]+)(?:/([^/]+))?(?:/([^/]+))?$"
)


def now_rfc3339() -> str:
    """The current time as the API server writes it."""
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_doc(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``meta/v1 Status`` failure object."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class Fault:
    """Make the next ``times`` matching requests fail: ``status`` (with ``retry_after_s`` as a
    ``Retry-After`` header) or, with ``drop``, close the connection without answering.
    Matches on ``method``, a substring of the path (``path``) and whether it is a watch."""

    status: int = 500
    retry_after_s: int | None = None
    drop: bool = False
    method: str | None = None
    path: str | None = None
    watch: bool | None = None
    times: int = 1
    hits: int = 0

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        return (
            self.times > 0
            and (self.method is None or self.method == method)
            and (self.path is None or self.path in path)
            and (self.watch is None or self.watch == is_watch)
        )


# ------------------------------------------------------------------ field sets (SSA)

Path = tuple[str, ...]


def _item_key(item: dict[str, Any], key: str) -> str:
    return "k:" + json.dumps({key: item.get(key)}, separators=(",", ":"))


def field_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """Leaf paths of an applied configuration (``f:`` map keys, ``k:`` list-map items; an item
    also owns its ``.`` node). ``metadata`` except labels/annotations is not owned."""
    out: set[Path] = set()
    if isinstance(obj, dict):
        if not obj and prefix:
            out.add(prefix)
        for key, value in obj.items():
            if not prefix and key in ("apiVersion", "kind"):
                continue
            if prefix == ("f:metadata",) and key not in ("labels", "annotations"):
                continue
            out |= field_paths(value, (*prefix, f"f:{key}"))
    elif isinstance(obj, list) and prefix and prefix[-1][2:] in LIST_MAP_KEYS:
        key = LIST_MAP_KEYS[prefix[-1][2:]]
        for item in obj:
            if isinstance(item, dict):
                item_path = (*prefix, _item_key(item, key))
                out.add((*item_path, "."))
                out |= field_paths(item, item_path)
    else:
        out.add(prefix)
    return out


def fields_v1(paths: set[Path]) -> dict[str, Any]:
    """Render a path set as ``FieldsV1`` JSON."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(part, {})
    return tree


def _get(obj: Any, path: Path) -> Any:
    node = obj
    for part in path:
        if part == ".":
            return node
        if part.startswith("f:") and isinstance(node, dict):
            node = node.get(part[2:], _MISSING)
        elif part.startswith("k:") and isinstance(node, list):
            want = json.loads(part[2:])
            node = next(
                (
                    i
                    for i in node
                    if isinstance(i, dict) and all(i.get(k) == v for k, v in want.items())
                ),
                _MISSING,
            )
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _remove(obj: Any, path: Path) -> None:
    if path and path[-1] == ".":
        path = path[:-1]
    parent = _get(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        want = json.loads(last[2:])
        parent[:] = [
            i
            for i in parent
            if not (isinstance(i, dict) and all(i.get(k) == v for k, v in want.items()))
        ]


class _Missing:
    pass


_MISSING = _Missing()


def ssa_merge(live: Any, applied: Any, last_key: str = "") -> Any:
    """Merge an applied configuration into the live value (maps merge, list maps merge by
    key, everything else is replaced)."""
    if isinstance(live, dict) and isinstance(applied, dict):
        out = dict(live)
        for key, value in applied.items():
            out[key] = ssa_merge(live.get(key), value, key) if key in live else value
        return out
    if isinstance(live, list) and isinstance(applied, list) and last_key in LIST_MAP_KEYS:
        key = LIST_MAP_KEYS[last_key]
        out_list = [copy.deepcopy(i) for i in live]
        for item in applied:
            if not isinstance(item, dict):
                continue
            index = next(
                (
                    n
                    for n, i in enumerate(out_list)
                    if isinstance(i, dict) and i.get(key) == item.get(key)
                ),
                None,
            )
            if index is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[index] = ssa_merge(out_list[index], item)
        return out_list
    return copy.deepcopy(applied)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _selector_matches(selector: str, labels: dict[str, Any]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term not in labels:
            return False
    return True


# ------------------------------------------------------------------ the store


@dataclass
class _Watch:
    conn: socket.socket
    dropped: bool = False


@dataclass
class _Stored:
    obj: dict[str, Any]
    # (manager, operation, subresource) -> owned paths
    owners: dict[tuple[str, str, str], set[Path]] = field(default_factory=dict)


class FakeKube:
    """The fake API server. Use as a context manager or call :meth:`start`/:meth:`stop`.

    Test helpers (server side, no HTTP): :meth:`put`, :meth:`remove`, :meth:`get`,
    :meth:`compact`, :meth:`drop_watches`, :attr:`faults`, :attr:`requests`.
    """

    def __init__(self, *, bookmark_interval_s: float = 0.2, max_watch_s: float = 1.5) -> None:
        self.bookmark_interval_s = bookmark_interval_s
        self.max_watch_s = max_watch_s
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Condition()
        self._rv = 100
        self._compacted_rv = 0
        self._objects: dict[tuple[str, str, str, str], _Stored] = {}
        self._events: list[tuple[int, str, tuple[str, str], dict[str, Any]]] = []
        self._watches: list[_Watch] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: TokenReview answers: bearer token -> (username, groups).
        self.tokens: dict[str, tuple[str, list[str]]] = {}
        #: SubjectAccessReview grants: (username or group, group, resource, verb, name).
        self.grants: set[tuple[str, str, str, str, str]] = set()

    def review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A TokenReview (from :attr:`tokens`) or SubjectAccessReview (from :attr:`grants`)."""
        spec = body.get("spec") or {}
        if path.endswith("/tokenreviews"):
            who = self.tokens.get(str(spec.get("token")))
            status: dict[str, Any] = {"authenticated": who is not None}
            if who is not None:
                status["user"] = {"username": who[0], "groups": who[1]}
            return {**body, "status": status}
        attrs = spec.get("resourceAttributes") or {}
        key = (attrs.get("group", ""), attrs.get("resource", ""), attrs.get("verb", ""))
        subjects = [spec.get("user", ""), *(spec.get("groups") or [])]
        allowed = any((who, *key, attrs.get("name", "")) in self.grants for who in subjects)
        return {**body, "status": {"allowed": allowed}}

    # -------------------------------------------------------------- lifecycle

    def start(self) -> FakeKube:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.drop_watches()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeKube:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def api_client(self, *, retries: int | None = 0) -> Any:
        """An official ``kubernetes.client.ApiClient`` pointed at this server."""
        from kubernetes import client

        config = client.Configuration()
        config.host = self.url
        config.retries = retries
        config.api_key = {"BearerToken": "Bearer fake-token"}
        return client.ApiClient(config)

    # -------------------------------------------------------------- server-side helpers

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def _key(self, group: str, plural: str, namespace: str, name: str) -> tuple[str, str, str, str]:
        namespaced = RESOURCES[(group, plural)][1]
        return (group, plural, namespace if namespaced else "", name)

    def _emit(self, etype: str, group: str, plural: str, obj: dict[str, Any]) -> None:
        self._events.append((self._rv, etype, (group, plural), copy.deepcopy(obj)))
        self._lock.notify_all()

    def _render(self, stored: _Stored) -> dict[str, Any]:
        managed = [
            {
                "manager": manager,
                "operation": op,
                "apiVersion": stored.obj.get("apiVersion", "v1"),
                "time": now_rfc3339(),
                "fieldsType": "FieldsV1",
                "fieldsV1": fields_v1(paths),
                **({"subresource": sub} if sub else {}),
            }
            for (manager, op, sub), paths in sorted(stored.owners.items())
            if paths
        ]
        if managed:
            stored.obj.setdefault("metadata", {})["managedFields"] = managed
        else:
            stored.obj.get("metadata", {}).pop("managedFields", None)
        return stored.obj

    def _store(
        self, group: str, plural: str, obj: dict[str, Any], stored: _Stored | None
    ) -> dict[str, Any]:
        self._rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self._rv)
        if stored is None:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_rfc3339())
            meta.setdefault("generation", 1)
            stored = _Stored(obj)
            etype = "ADDED"
        else:
            old_spec = stored.obj.get("spec")
            meta["uid"] = stored.obj["metadata"].get("uid")
            meta["creationTimestamp"] = stored.obj["metadata"].get("creationTimestamp")
            generation = stored.obj["metadata"].get("generation", 1)
            meta["generation"] = generation + (1 if obj.get("spec") != old_spec else 0)
            stored.obj = obj
            etype = "MODIFIED"
        kind = RESOURCES[(group, plural)][0]
        obj.setdefault("kind", kind)
        self._objects[self._key(group, plural, meta.get("namespace", ""), meta["name"])] = stored
        rendered = self._render(stored)
        self._emit(etype, group, plural, rendered)
        return copy.deepcopy(rendered)

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object as a controller would (no ownership recorded)."""
        group, plural = self._resource_of(obj)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        with self._lock:
            stored = self._objects.get(
                self._key(group, plural, meta.get("namespace", ""), meta["name"])
            )
            meta.pop("resourceVersion", None)
            return self._store(group, plural, obj, stored)

    def remove(self, obj: dict[str, Any]) -> None:
        """Delete an object (DELETED event)."""
        group, plural = self._resource_of(obj)
        meta = obj["metadata"]
        with self._lock:
            stored = self._objects.pop(
                self._key(group, plural, meta.get("namespace", ""), meta["name"]), None
            )
            if stored is not None:
                self._rv += 1
                stored.obj["metadata"]["resourceVersion"] = str(self._rv)
                self._emit("DELETED", group, plural, stored.obj)

    def get(self, group: str, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The stored object (a copy), or None."""
        with self._lock:
            stored = self._objects.get(self._key(group, plural, namespace, name))
            return copy.deepcopy(stored.obj) if stored else None

    def owners(
        self, group: str, plural: str, name: str, namespace: str = ""
    ) -> dict[tuple[str, str, str], set[Path]]:
        """Field ownership of an object: ``{(manager, operation, subresource): paths}``."""
        with self._lock:
            stored = self._objects[self._key(group, plural, namespace, name)]
            return {k: set(v) for k, v in stored.owners.items()}

    def compact(self) -> None:
        """Forget the event history: watches from an older resourceVersion now get 410."""
        with self._lock:
            self._events.clear()
            self._rv += 1  # as if etcd moved on: every version seen so far is now too old
            self._compacted_rv = self._rv
            self._lock.notify_all()

    def drop_watches(self) -> None:
        """Close every open watch connection abruptly (no final chunk)."""
        with self._lock:
            for watch in self._watches:
                watch.dropped = True
                with contextlib.suppress(OSError):
                    watch.conn.shutdown(socket.SHUT_RDWR)
            self._lock.notify_all()

    @staticmethod
    def _resource_of(obj: dict[str, Any]) -> tuple[str, str]:
        api_version = obj.get("apiVersion", "v1")
        group = api_version.split("/")[0] if "/" in api_version else ""
        kind = obj.get("kind")
        for (g, plural), (k, _ns, _st) in RESOURCES.items():
            if g == group and k == kind:
                return g, plural
        raise KeyError(f"unknown resource {api_version} {kind}")

    # -------------------------------------------------------------- request handling

    def take_fault(self, method: str, path: str, is_watch: bool) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path, is_watch):
                    fault.times -= 1
                    fault.hits += 1
                    return fault
        return None

    def list(
        self, group: str, version: str, plural: str, namespace: str, query: dict[str, str]
    ) -> dict[str, Any]:
        with self._lock:
            items = [
                copy.deepcopy(s.obj)
                for (g, p, ns, _n), s in sorted(self._objects.items())
                if g == group
                and p == plural
                and (not namespace or ns == namespace)
                and _selector_matches(
                    query.get("labelSelector", ""), s.obj.get("metadata", {}).get("labels") or {}
                )
            ]
            rv = self._rv
        start = 0
        if query.get("continue"):
            decoded = json.loads(base64.b64decode(query["continue"]))
            start, rv = decoded["start"], decoded["rv"]
        limit = int(query.get("limit") or 0)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and start + limit < len(items):
            token = json.dumps({"start": start + limit, "rv": rv}).encode()
            meta["continue"] = base64.b64encode(token).decode()
            items = items[start : start + limit]
        else:
            items = items[start:]
        kind = RESOURCES[(group, plural)][0]
        return {
            "kind": f"{kind}List",
            "apiVersion": f"{group}/{version}" if group else version,
            "metadata": meta,
            "items": items,
        }

    def watch_events(
        self,
        group: str,
        plural: str,
        namespace: str,
        query: dict[str, str],
        conn: socket.socket,
    ) -> Iterator[dict[str, Any] | None]:
        """Events for one watch request; yields None when the connection must be dropped."""
        timeout = min(float(query.get("timeoutSeconds") or self.max_watch_s), self.max_watch_s)
        deadline = time.monotonic() + timeout
        bookmarks = query.get("allowWatchBookmarks") == "true"
        selector = query.get("labelSelector", "")
        watch = _Watch(conn)
        raw_rv = query.get("resourceVersion", "")
        kind = RESOURCES[(group, plural)][0]

        def wanted(g: str, p: str, obj: dict[str, Any]) -> bool:
            meta = obj.get("metadata", {})
            return (
                g == group
                and p == plural
                and (not namespace or meta.get("namespace") == namespace)
                and _selector_matches(selector, meta.get("labels") or {})
            )

        with self._lock:
            self._watches.append(watch)
            if raw_rv in ("", "0"):
                initial = [
                    copy.deepcopy(s.obj)
                    for (g, p, _ns, _n), s in sorted(self._objects.items())
                    if wanted(g, p, s.obj)
                ]
                last = self._rv
            else:
                initial = []
                last = int(raw_rv)
                if last < self._compacted_rv:
                    self._watches.remove(watch)
                    yield {
                        "type": "ERROR",
                        "object": status_doc(
                            410, "Expired", f"too old resource version: {last} ({self._rv})"
                        ),
                    }
                    return
        try:
            for obj in initial:
                yield {"type": "ADDED", "object": obj}
            next_bookmark = time.monotonic() + self.bookmark_interval_s
            while True:
                with self._lock:
                    if watch.dropped:
                        yield None
                        return
                    if last < self._compacted_rv:
                        yield {
                            "type": "ERROR",
                            "object": status_doc(410, "Expired", "too old resource version"),
                        }
                        return
                    pending = [e for e in self._events if e[0] > last]
                    if not pending:
                        wait = min(deadline, next_bookmark) - time.monotonic()
                        if wait > 0:
                            self._lock.wait(wait)
                        if last < self._compacted_rv:  # compacted while waiting: 410 first,
                            continue  # never the newer events (the loop's top answers)
                        pending = [e for e in self._events if e[0] > last]
                    current = self._rv
                for rv, etype, (g, p), obj in pending:
                    last = max(last, rv)
                    if wanted(g, p, obj):
                        yield {"type": etype, "object": obj}
                now = time.monotonic()
                if now >= deadline:
                    return
                if bookmarks and now >= next_bookmark:
                    next_bookmark = now + self.bookmark_interval_s
                    last = max(last, current)
                    yield {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": kind,
                            "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(last)},
                        },
                    }
        finally:
            with self._lock:
                if watch in self._watches:
                    self._watches.remove(watch)

    def write(
        self,
        method: str,
        group: str,
        plural: str,
        namespace: str,
        name: str,
        subresource: str,
        query: dict[str, str],
        content_type: str,
        body: Any,
    ) -> tuple[int, dict[str, Any]]:
        """POST/PUT/PATCH/DELETE; returns (HTTP status, body)."""
        _kind, namespaced, has_status = RESOURCES[(group, plural)]
        manager = query.get("fieldManager", "")
        with self._lock:
            key = self._key(group, plural, namespace, name)
            stored = self._objects.get(key)
            if method == "POST":
                name = (body.get("metadata") or {}).get("name", "")
                key = self._key(group, plural, namespace, name)
                if key in self._objects:
                    return 409, status_doc(
                        409, "AlreadyExists", f'{plural} "{name}" already exists'
                    )
                obj = copy.deepcopy(body)
                if namespaced:
                    obj["metadata"]["namespace"] = namespace
                return 201, self._store(group, plural, obj, None)
            if stored is None:
                return 404, status_doc(404, "NotFound", f'{plural} "{name}" not found')
            if method == "DELETE":
                del self._objects[key]
                self._rv += 1
                stored.obj["metadata"]["resourceVersion"] = str(self._rv)
                self._emit("DELETED", group, plural, stored.obj)
                return 200, copy.deepcopy(stored.obj)
            if subresource and (subresource != "status" or not has_status):
                return 404, status_doc(404, "NotFound", f"no subresource {subresource}")
            old = copy.deepcopy(stored.obj)
            if method == "PUT":
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
                if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                    return 409, status_doc(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {plural} "{name}": the object has '
                        "been modified; please apply your changes to the latest version and "
                        "try again",
                    )
                new = copy.deepcopy(body)
                new.setdefault("metadata", {})
                new["metadata"]["name"] = name
                if namespaced:
                    new["metadata"]["namespace"] = namespace
                for keep in ("labels", "annotations"):
                    if keep not in new["metadata"] and keep in old["metadata"] and subresource:
                        new["metadata"][keep] = old["metadata"][keep]
                new = self._scope(old, new, subresource, has_status)
                self._take_update(stored, old, new, manager or "unknown", subresource)
                return 200, self._store(group, plural, new, stored)
            # PATCH
            if content_type.startswith("application/merge-patch+json"):
                patch = body if subresource != "status" else {"status": body.get("status")}
                new = merge_patch(old, patch)
                new = self._scope(old, new, subresource, has_status)
                self._take_update(stored, old, new, manager or "unknown", subresource)
                return 200, self._store(group, plural, new, stored)
            if content_type.startswith("application/apply-patch+yaml"):
                if not manager:
                    return 422, status_doc(422, "Invalid", "fieldManager is required for apply")
                return self._apply(
                    stored, old, body, group, plural, manager, subresource, has_status, query
                )
            return 415, status_doc(415, "UnsupportedMediaType", f"unsupported {content_type}")

    @staticmethod
    def _scope(
        old: dict[str, Any], new: dict[str, Any], subresource: str, has_status: bool
    ) -> dict[str, Any]:
        """Writes to the main resource leave status alone and vice versa."""
        if not has_status:
            return new
        if subresource == "status":
            out = copy.deepcopy(old)
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            return out
        out = copy.deepcopy(new)
        if "status" in old:
            out["status"] = old["status"]
        else:
            out.pop("status", None)
        return out

    @staticmethod
    def _take_update(
        stored: _Stored, old: dict[str, Any], new: dict[str, Any], manager: str, sub: str
    ) -> None:
        changed = {p for p in field_paths(new) if _get(old, p) != _get(new, p)}
        for owned_key, paths in stored.owners.items():
            if owned_key[0] != manager:
                paths.difference_update(changed)
        stored.owners.setdefault((manager, "Update", sub), set()).update(changed)

    def _apply(
        self,
        stored: _Stored,
        old: dict[str, Any],
        body: dict[str, Any],
        group: str,
        plural: str,
        manager: str,
        subresource: str,
        has_status: bool,
        query: dict[str, str],
    ) -> tuple[int, dict[str, Any]]:
        config = copy.deepcopy(body)
        if has_status:
            if subresource == "status":
                config = {
                    k: v
                    for k, v in config.items()
                    if k in ("apiVersion", "kind", "metadata", "status")
                }
            else:
                config.pop("status", None)
        applied = field_paths(config)
        force = query.get("force") == "true"
        conflicts = []
        for (other, _op, _sub), paths in stored.owners.items():
            if other == manager:
                continue
            for path in paths & applied:
                if path[-1] != "." and _get(old, path) != _get(config, path):
                    conflicts.append((other, path))
        if conflicts and not force:
            causes = [
                {
                    "reason": "FieldManagerConflict",
                    "message": f'conflict with "{other}"',
                    "field": ".".join(p[2:] for p in path),
                }
                for other, path in conflicts
            ]
            doc = status_doc(
                409,
                "Conflict",
                f"Apply failed with {len(conflicts)} conflict(s): "
                + "; ".join(
                    f'conflict with "{o}": {".".join(p[2:] for p in path)}' for o, path in conflicts
                ),
            )
            doc["details"] = {"causes": causes}
            return 409, doc
        for owned_key, paths in stored.owners.items():
            if owned_key[0] != manager:
                paths.difference_update(applied)
        mine = (manager, "Apply", subresource)
        previously = stored.owners.get(mine, set())
        new = ssa_merge(old, {k: v for k, v in config.items() if k != "metadata"})
        meta_cfg = config.get("metadata") or {}
        for key in ("labels", "annotations"):
            if key in meta_cfg:
                new["metadata"][key] = {**(old["metadata"].get(key) or {}), **meta_cfg[key]}
        others = set().union(*(p for k, p in stored.owners.items() if k != mine))
        for path in sorted(previously - applied - others, key=len, reverse=True):
            _remove(new, path)
        stored.owners[mine] = applied
        return 200, self._store(group, plural, new, stored)

    def pending_workloads(self, cluster_queue: str) -> dict[str, Any]:
        """Kueue visibility ``PendingWorkloadsSummary`` for a ClusterQueue."""
        with self._lock:
            lq_target = {
                (k[2], k[3]): (s.obj.get("spec") or {}).get("clusterQueue")
                for k, s in self._objects.items()
                if k[1] == "localqueues"
            }
            pending = []
            for k, s in sorted(self._objects.items()):
                if k[1] != "workloads":
                    continue
                obj = s.obj
                spec = obj.get("spec") or {}
                conds = {
                    c.get("type"): c.get("status")
                    for c in (obj.get("status") or {}).get("conditions", [])
                }
                if conds.get("Admitted") == "True" or conds.get("Finished") == "True":
                    continue
                if lq_target.get((k[2], spec.get("queueName"))) != cluster_queue:
                    continue
                pending.append(obj)
        pending.sort(
            key=lambda o: (
                -(o.get("spec") or {}).get("priority", 0),
                o["metadata"]["creationTimestamp"],
                o["metadata"]["name"],
            )
        )
        items = []
        per_lq: dict[tuple[str, str], int] = {}
        for pos, obj in enumerate(pending):
            lq = (obj["metadata"]["namespace"], obj["spec"].get("queueName"))
            items.append(
                {
                    "metadata": {
                        "name": obj["metadata"]["name"],
                        "namespace": lq[0],
                        "creationTimestamp": obj["metadata"]["creationTimestamp"],
                    },
                    "priority": (obj.get("spec") or {}).get("priority", 0),
                    "localQueueName": lq[1],
                    "positionInClusterQueue": pos,
                    "positionInLocalQueue": per_lq.get(lq, 0),
                }
            )
            per_lq[lq] = per_lq.get(lq, 0) + 1
        return {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
            "metadata": {"name": cluster_queue},
            "items": items,
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeKube

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _route(self) -> tuple[str, str, str, str, str, str] | None:
        path = urlsplit(self.path).path
        match = _CORE.match(path)
        if match:
            version, ns, plural, name, sub = match.groups()
            return "", version, ns or "", plural, name or "", sub or ""
        match = _GROUP.match(path)
        if match:
            group, version, ns, plural, name, sub = match.groups()
            return group, version, ns or "", plural, name or "", sub or ""
        return None

    def _handle(self, method: str) -> None:
        fake = self.server_fake
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        is_watch = query.get("watch") in ("true", "1")
        fake.requests.append((method, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        fault = fake.take_fault(method, parts.path, is_watch)
        if fault is not None:
            if fault.drop:
                self._drop()
                return
            headers = (
                {"Retry-After": str(fault.retry_after_s)} if fault.retry_after_s is not None else {}
            )
            reason = "TooManyRequests" if fault.status == 429 else "InternalError"
            self._send(fault.status, status_doc(fault.status, reason, "injected fault"), headers)
            return
        if parts.path == "/version":
            self._send(200, {"major": "1", "minor": "34", "gitVersion": "v1.34.0-fake"})
            return
        if method == "POST" and parts.path.endswith(("/tokenreviews", "/subjectaccessreviews")):
            self._send(201, fake.review(parts.path, json.loads(raw or b"{}")))
            return
        route = self._route()
        if route is None:
            self._send(404, status_doc(404, "NotFound", f"no route {parts.path}"))
            return
        group, version, namespace, plural, name, sub = route
        if (
            group == "visibility.kueue.x-k8s.io"
            and plural == "clusterqueues"
            and sub == "pendingworkloads"
        ):
            self._send(200, fake.pending_workloads(name))
            return
        if (group, plural) not in RESOURCES:
            self._send(
                404,
                status_doc(
                    404, "NotFound", f"the server could not find the requested resource ({plural})"
                ),
            )
            return
        if method == "GET" and not name:
            if is_watch:
                self._stream(fake.watch_events(group, plural, namespace, query, self.connection))
            else:
                self._send(200, fake.list(group, version, plural, namespace, query))
            return
        if method == "GET":
            obj = fake.get(group, plural, name, namespace)
            if obj is None:
                self._send(404, status_doc(404, "NotFound", f'{plural} "{name}" not found'))
            else:
                self._send(200, obj)
            return
        content_type = self.headers.get("Content-Type", "application/json")
        try:
            if content_type.startswith("application/apply-patch+yaml"):
                body = yaml.safe_load(raw.decode()) if raw else {}
            else:
                body = json.loads(raw) if raw else {}
        except (ValueError, yaml.YAMLError) as exc:
            self._send(400, status_doc(400, "BadRequest", f"cannot decode body: {exc}"))
            return
        code, doc = fake.write(
            method, group, plural, namespace, name, sub, query, content_type, body
        )
        self._send(code, doc)

    def _stream(self, events: Iterator[dict[str, Any] | None]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                if event is None:
                    self._drop()
                    return
                data = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0, step_s: float = 0.01) -> bool:
    """Poll ``predicate`` until true (True) or ``timeout_s`` passed (False). The generous default
    only costs time when the predicate never holds (a failing test), and leaves the informer
    threads seconds to get a CPU on a loaded 2-core CI machine."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()
