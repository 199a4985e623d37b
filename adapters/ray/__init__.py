"""Ray: run the capacity review's Monte Carlo chunks and what-if scenarios as Ray tasks.

``RayExecutor(address)`` implements ``planner.capacity.Executor``: the same task function
(``planner.capacity.simulate_chunk``) that the local loop calls runs in Ray workers. Ray is an
optional extra (``pip install 'llm-capacity-planner[ray]'``); without it, constructing the
executor raises ``SourcePermanentError`` with that hint and nothing else changes.
"""

from adapters.ray.executor import RayExecutor

__all__ = ["RayExecutor"]
