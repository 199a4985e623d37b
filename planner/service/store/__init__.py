"""The service's store: the ``Store`` port (``port``), what the service's loops and routes
ask of the database. Its SQLAlchemy implementation is ``planner.service.store.sql``
(``SqlStore``), the tables and their mapping onto the record classes of
``planner.service.models`` are in ``planner.service.store.tables``, the migrations in
``planner.service.migrations``. This package imports no database library: the loops and
routes depend on the port only."""

from planner.service.store.port import Store, UnitOfWork

__all__ = ["Store", "UnitOfWork"]
