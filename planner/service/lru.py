"""A bounded, thread-safe cache of the last used values (the service's caches of descriptions,
predictions and token reviews)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class Lru(Generic[_K, _V]):
    """The last used values, by key: at most ``max_entries`` of them and, with ``max_bytes``,
    at most that many of their ``weigh(value)`` together (the least recently used go first;
    one value over ``max_bytes`` is not kept). Thread-safe: the API's requests and the ingest
    loop use the same caches concurrently."""

    def __init__(
        self,
        *,
        max_entries: int,
        max_bytes: int | None = None,
        weigh: Callable[[_V], int] = lambda _: 0,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._weigh = weigh
        self._entries: OrderedDict[_K, tuple[_V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        """The value kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            return hit[0]

    def put(self, key: _K, value: _V) -> None:
        """Keep ``value`` under ``key``, dropping the least recently used over the bounds."""
        size = self._weigh(value)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if self.max_bytes is not None and size > self.max_bytes:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while len(self._entries) > self.max_entries or (
                self.max_bytes is not None and self._bytes > self.max_bytes
            ):
                self._bytes -= self._entries.popitem(last=False)[1][1]

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[_V]:
        """The values kept, least recently used first."""
        with self._lock:
            return [value for value, _ in self._entries.values()]

    @property
    def bytes(self) -> int:
        """The weight of the values kept."""
        return self._bytes

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
