"""The capacity review's Ray executor (``adapters.ray``, the optional ``[ray]`` extra), for
``planner review --ray-address`` and the service's scheduled reviews."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.capacity.montecarlo import Executor

__all__ = ["ray_executor"]


def ray_executor(address: str) -> Executor:
    """The capacity review's Monte Carlo executor on the Ray cluster at ``address``; raises
    ``SourcePermanentError`` when Ray is not installed and ``SourceTemporaryError`` when the
    cluster cannot be reached."""
    from adapters.ray import RayExecutor  # noqa: PLC0415 - Ray is optional and slow to import

    return RayExecutor(address)
