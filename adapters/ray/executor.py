"""``RayExecutor``: ``Executor.map`` over a Ray cluster (one task per item, the shared input
put in the object store once)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

from planner.errors import SourcePermanentError, SourceTemporaryError

__all__ = ["RayExecutor"]

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")


def _ray() -> ModuleType:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise SourcePermanentError(
            "ray",
            "Ray is not installed; pip install 'llm-capacity-planner[ray]' (or drop --ray-address)",
        ) from None


class RayExecutor:
    """Connects to the Ray cluster at ``address`` (``ray://host:10001`` or ``host:6379``,
    ``auto``) and runs ``fn(shared, item)`` for every item as a Ray task.

    The cluster's workers must import the same ``planner`` (install the project there, or
    start the head where it is on ``PYTHONPATH``). Raises ``SourcePermanentError`` when Ray is
    missing and ``SourceTemporaryError`` when the cluster cannot be reached.
    """

    def __init__(self, address: str, *, num_cpus_per_task: float = 1.0) -> None:
        self._ray = _ray()
        self.address = address
        self.num_cpus_per_task = num_cpus_per_task
        try:
            self._ray.init(
                address=address,
                ignore_reinit_error=True,
                log_to_driver=False,
                logging_level="WARNING",
            )
        except (ConnectionError, RuntimeError, TimeoutError) as exc:
            raise SourceTemporaryError("ray", f"cannot connect to {address}: {exc}") from None

    def map(self, fn: Callable[[S, T], R], shared: S, items: Sequence[T]) -> list[R]:
        """``[fn(shared, item) for item in items]``, each call a Ray task; ``shared`` is put
        in the object store once and handed to every task by reference."""
        ray: Any = self._ray
        ref = ray.put(shared)
        task = ray.remote(num_cpus=self.num_cpus_per_task)(fn)
        return list(ray.get([task.remote(ref, item) for item in items]))

    @property
    def num_cpus(self) -> int:
        """CPUs the cluster offers (``ray.cluster_resources()``)."""
        return int(self._ray.cluster_resources().get("CPU", 0))

    def close(self) -> None:
        """Disconnect from the cluster (the cluster keeps running)."""
        self._ray.shutdown()
