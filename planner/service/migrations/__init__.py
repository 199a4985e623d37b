"""Alembic migrations of the planner's store (run by ``Store.migrate`` on start)."""
