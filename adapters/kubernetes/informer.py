"""An informer: a thread-safe cache of one resource kept current by list + watch.

The loop (client-go's reflector, simplified):

1. LIST in pages (``limit``/``continue``) and replace the cache; remember the list's
   ``resourceVersion``.
2. WATCH from it with ``allowWatchBookmarks`` and a server-side ``timeoutSeconds``; apply
   ADDED/MODIFIED/DELETED, move the resourceVersion on every event and BOOKMARK; when the server
   ends the stream, watch again from the last resourceVersion.
3. Re-LIST on 410 Gone (resourceVersion compacted away) and every ``resync_s`` as a safety net.
4. On any other failure (dropped connection, 5xx, 429) wait and retry: ``Retry-After`` when the
   server sent one, else exponential backoff with jitter (``backoff_initial_s`` doubling up to
   ``backoff_max_s``). A missing CRD (404) is retried at ``backoff_max_s`` pace and reported as
   not installed. Nothing here ever raises out of the thread; counters in :class:`InformerStats`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from adapters.kubernetes.client import (
    ApiPermanentError,
    ApiTemporaryError,
    GoneError,
    KubeApi,
    NotFoundError,
    Resource,
    WatchStream,
)
from planner.errors import PlannerError

_log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


@dataclass(frozen=True, slots=True)
class InformerStats:
    """Counters of one informer (for metrics): lists, watches opened, events applied,
    bookmarks, 410 re-lists, errors, throttled answers (429), and state."""

    lists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    relists_gone: int = 0
    errors: int = 0
    throttled: int = 0
    synced: bool = False
    installed: bool = True
    last_sync_s: float | None = None
    last_error: str = ""


def object_key(obj: Mapping[str, Any]) -> ObjectKey | None:
    """``(namespace, name)`` of an object, None when it has no name."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    namespace = meta.get("namespace")
    return (namespace if isinstance(namespace, str) else "", name)


class Informer:
    """List + watch cache of one :class:`Resource` (all namespaces, or ``namespace``).

    Parameters:
        api: the client wrapper.
        resource: what to watch.
        namespace: only this namespace (None: cluster-wide).
        label_selector: server-side label filter.
        page_size: LIST page size (``limit``).
        watch_timeout_s: server-side ``timeoutSeconds`` of each watch request.
        resync_s: full re-list period, seconds.
        backoff_initial_s / backoff_max_s: retry delays after failures.
        clock: monotonic seconds (for resync); ``wall_clock`` epoch seconds (``last_sync_s``).
        sleep: ``sleep(seconds, stop_event)``; default waits on the stop event.
    """

    def __init__(
        self,
        api: KubeApi,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        page_size: int = 500,
        watch_timeout_s: int = 300,
        resync_s: float = 600.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout_s = max(1, int(watch_timeout_s))
        self.resync_s = resync_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._items: dict[ObjectKey, dict[str, Any]] = {}
        self._resource_version = ""
        self._stats = InformerStats()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: WatchStream | None = None

    # ------------------------------------------------------------------ cache reads

    def items(self) -> list[dict[str, Any]]:
        """A copy of the list of cached objects (the dicts themselves are shared: don't mutate)."""
        with self._lock:
            return list(self._items.values())

    def get(self, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The cached object, or None."""
        with self._lock:
            return self._items.get((namespace, name))

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (list, event or bookmark)."""
        with self._lock:
            return self._resource_version

    @property
    def stats(self) -> InformerStats:
        """A copy of the counters."""
        with self._lock:
            return self._stats

    @property
    def has_synced(self) -> bool:
        """True once a LIST has filled the cache."""
        return self._synced.is_set()

    def wait_synced(self, timeout_s: float) -> bool:
        """Block until the first LIST finished (True) or ``timeout_s`` passed (False)."""
        return self._synced.wait(timeout_s)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Run the list/watch loop in a daemon thread."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run, name=f"informer-{self.resource.key}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop and wait up to ``timeout_s`` for the thread."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _bump(self, **changes: Any) -> None:
        with self._lock:
            self._stats = replace(self._stats, **changes)

    def _count(self, name: str, by: int = 1) -> None:
        with self._lock:
            self._stats = replace(self._stats, **{name: getattr(self._stats, name) + by})

    # ------------------------------------------------------------------ one step each

    def relist(self) -> None:
        """LIST all pages and replace the cache (raises the client's errors)."""
        items: dict[ObjectKey, dict[str, Any]] = {}
        token: str | None = None
        version = ""
        while True:
            page = self.api.list(
                self.resource,
                namespace=self.namespace,
                limit=self.page_size,
                continue_token=token,
                label_selector=self.label_selector,
            )
            raw_meta = page.get("metadata")
            meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
            version = str(meta.get("resourceVersion") or version)
            raw_items = page.get("items")
            for obj in raw_items if isinstance(raw_items, list) else []:
                if not isinstance(obj, dict):
                    continue
                key = object_key(obj)
                if key is not None:
                    obj.setdefault("apiVersion", self.resource.api_version)
                    obj.setdefault("kind", self.resource.kind)
                    items[key] = obj
            token = meta.get("continue") or None
            if not token:
                break
        with self._lock:
            self._items = items
            self._resource_version = version
            self._stats = replace(
                self._stats,
                lists=self._stats.lists + 1,
                synced=True,
                installed=True,
                last_sync_s=self._wall_clock(),
                last_error="",
            )
        self._synced.set()

    def apply_event(self, event: Mapping[str, Any]) -> None:
        """Apply one watch event to the cache."""
        etype = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return
        raw_meta = obj.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        version = meta.get("resourceVersion")
        if etype == "BOOKMARK":
            with self._lock:
                if isinstance(version, str) and version:
                    self._resource_version = version
                self._stats = replace(self._stats, bookmarks=self._stats.bookmarks + 1)
            return
        key = object_key(obj)
        if key is None or etype not in ("ADDED", "MODIFIED", "DELETED"):
            return
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        with self._lock:
            if etype == "DELETED":
                self._items.pop(key, None)
            else:
                self._items[key] = obj
            if isinstance(version, str) and version:
                self._resource_version = version
            self._stats = replace(self._stats, events=self._stats.events + 1)

    def watch_once(self) -> None:
        """One watch request from the current resourceVersion until the server ends it (raises
        :class:`GoneError` for 410 and the client's errors otherwise)."""
        stream = self.api.watch(
            self.resource,
            resource_version=self.resource_version,
            timeout_s=self.watch_timeout_s,
            namespace=self.namespace,
            label_selector=self.label_selector,
        )
        self._stream = stream
        self._count("watches")
        try:
            for event in stream:
                self.apply_event(event)
                if self._stop.is_set():
                    break
        finally:
            self._stream = None
            stream.close()

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """The list/watch loop until :meth:`stop` (never raises)."""
        failures = 0
        need_list = True
        last_list = float("-inf")
        while not self._stop.is_set():
            try:
                if need_list or self._clock() - last_list >= self.resync_s:
                    self.relist()
                    last_list = self._clock()
                    need_list = False
                    failures = 0
                self.watch_once()
                failures = 0
            except GoneError:
                self._count("relists_gone")
                need_list = True
            except NotFoundError as exc:
                self._bump(installed=False, last_error=str(exc))
                self._count("errors")
                need_list = True
                self._sleep(self.backoff_max_s)
            except (ApiTemporaryError, ApiPermanentError, PlannerError, ValueError) as exc:
                if self._stop.is_set():
                    break
                failures += 1
                self._bump(last_error=str(exc))
                self._count("errors")
                retry_after: float | None = getattr(exc, "retry_after_s", None)
                if getattr(exc, "status", 0) == 429:
                    self._count("throttled")
                # After a failed watch, the cache may have missed events: list again unless
                # the failure was only the stream (a new watch resumes from the version).
                if isinstance(exc, ApiPermanentError):
                    need_list = True
                self._sleep(self._delay(failures, retry_after))
            except Exception as exc:
                failures += 1
                _log.exception("informer %s: unexpected failure", self.resource.key)
                self._bump(last_error=f"{type(exc).__name__}: {exc}")
                self._count("errors")
                need_list = True
                self._sleep(self._delay(failures, None))

    def _delay(self, failures: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return float(min(self.backoff_max_s, retry_after_s))
        base = min(self.backoff_max_s, self.backoff_initial_s * 2.0 ** min(failures - 1, 20))
        return base * (0.5 + self._rng.random() / 2)

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)
