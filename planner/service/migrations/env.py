"""Alembic environment: migrates the connection that ``planner.service.store`` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from planner.service.store.tables import METADATA

connection: Connection | None = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - the store always passes its connection
    raise RuntimeError("run migrations through planner.service.store.sql.SqlStore.migrate()")

context.configure(
    connection=connection,
    target_metadata=METADATA,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
