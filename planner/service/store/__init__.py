"""The service's store: the ``Store`` port (``port``) and its SQLAlchemy implementation
(``sql``); the tables are in ``planner.service.models``, the migrations in
``planner.service.migrations``."""

from planner.service.store.port import Store, UnitOfWork
from planner.service.store.sql import SqlStore
from planner.service.store.unit_of_work import SqlUnitOfWork

__all__ = ["SqlStore", "SqlUnitOfWork", "Store", "UnitOfWork"]
