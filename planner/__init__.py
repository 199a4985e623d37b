"""LLM capacity planner: performance models of LLM training and the service that applies them.

The pure core (``planner.specs``, ``planner.catalog``, ``planner.perf``, ``planner.scenario``,
``planner.forecast``) does no I/O; ``planner.service`` is the only part that talks to the outside
world, and it does so through the adapters in the top-level ``adapters`` package.
"""

__version__ = "0.1.0"
