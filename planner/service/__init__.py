"""The planner service (``planner serve``): the only I/O in ``planner``.

``main`` (the composition root: settings to running pieces, the only importer of ``adapters``),
``api`` (FastAPI routers and models), ``loops`` (the ingest cycle as functions), ``store`` (the
``Store`` port and SQLAlchemy), ``runtime`` (what routes and loops share), ``metrics``,
``settings``, ``describe`` (what a job trains).
"""
