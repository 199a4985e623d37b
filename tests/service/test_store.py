"""The store: migrations are idempotent, data survives reopening, failures are StoreErrors."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import SQLAlchemyError

from planner.errors import StoreError
from planner.service.models import SourceRow
from planner.service.store.sql import SqlStore
from planner.service.store.tables import METADATA


def test_migrate_twice_and_reopen_keeps_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'p.db'}"
    store = SqlStore(url)
    store.migrate()
    store.migrate()
    assert store.revision() == "0011_heartbeats"
    with store.session() as s:
        s.add(SourceRow(name="slurm", scheduler="slurm", cluster="c", consecutive_failures=0))
    store.dispose()
    again = SqlStore(url)
    again.migrate()
    assert [r.name for r in again.sources()] == ["slurm"]


def test_migrations_create_the_tables_the_store_maps(tmp_path: Path) -> None:
    # the records are mapped onto ``METADATA``'s tables; the migrations own the schema: both
    # must agree column by column, index by index (Alembic's autogenerate comparison)
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), METADATA) == []


def test_a_record_takes_only_its_columns() -> None:
    row = SourceRow(name="slurm", scheduler="slurm")
    assert (row.name, row.scheduler) == ("slurm", "slurm")
    with pytest.raises(TypeError, match="'nodez' is an invalid keyword argument for SourceRow"):
        SourceRow(name="slurm", nodez=[])


def test_sources_without_their_nodes_do_not_load_them(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    nodes = [{"name": f"n{i}", "gpus": 8} for i in range(3)]
    with store.session() as s:
        s.add(SourceRow(name="slurm", scheduler="slurm", cluster="c", consecutive_failures=0))
        row = s.get(SourceRow, "slurm")
        assert row is not None
        row.nodes = nodes
    (whole,) = store.sources()
    assert whole.nodes == nodes
    (light,) = store.sources(nodes=False)
    assert (light.name, light.cluster) == ("slurm", "c")
    with pytest.raises(SQLAlchemyError):  # not loaded, and not loaded behind our back
        _ = light.nodes


def test_failed_write_rolls_back_and_keeps_stored_data(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    with store.session() as s:
        s.add(SourceRow(name="slurm", scheduler="slurm", cluster="c", consecutive_failures=0))
    with pytest.raises(StoreError), store.session() as s:
        s.add(SourceRow(name="slurm", scheduler="slurm", cluster="dup", consecutive_failures=0))
    assert [r.cluster for r in store.sources()] == ["c"]


def test_bad_url_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="not a SQLAlchemy URL"):
        SqlStore("not a url")
