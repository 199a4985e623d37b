"""The planner's store: SQLAlchemy over any database URL (SQLite file by default).

:class:`SqlStore` implements the ``Store`` port (``planner.service.store.port``) and
:class:`SqlUnitOfWork` (``unit_of_work``) its ``UnitOfWork``. The schema is created and
upgraded by the Alembic migrations in ``planner/service/migrations`` when the service starts
(:meth:`SqlStore.migrate`); data already stored is never dropped. Every database failure is
raised as :class:`planner.errors.StoreError` and the transaction is rolled back, so a failed
write leaves what was stored before untouched.

Faults: error texts never carry the URL's password (``redact``) and the API sees only
``StoreError.public_message``; connections are checked before use (``pool_pre_ping``), a server
that cannot be reached is not asked again before a backoff (1 s doubling to 30 s), so requests
fail fast while PostgreSQL is down and recover when it is back; a SQLite file that was deleted
or replaced under the running service (its device and inode changed) fails every unit of work
and :meth:`SqlStore.check` (``/readyz``) instead of writing to an unlinked file; SQLite commits
are synchronous (``synchronous=FULL``), so an accepted write survives a crash.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import (
    Engine,
    String,
    and_,
    cast,
    create_engine,
    delete,
    event,
    func,
    select,
    text,
    tuple_,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, defer, load_only, sessionmaker
from sqlalchemy.sql import ColumnElement

from planner.errors import StoreError
from planner.service.models import (
    METRIC_COLUMNS,
    AuditEntry,
    AuditRow,
    CalibrationRow,
    HeartbeatRow,
    JobRow,
    JobSortKey,
    ObservedRunCount,
    ObservedRunRow,
    PredictionRow,
    RetentionPolicy,
    ReviewRow,
    SourceRow,
    StepSampleRow,
    listing_key,
    soonest_first,
)
from planner.service.store import maintenance
from planner.service.store.tables import (
    AUDIT,
    CALIBRATION,
    HEARTBEAT,
    JOB,
    OBSERVED_RUN,
    PREDICTION,
    REVIEW,
    SOURCE,
    STEP_SAMPLE,
)
from planner.service.store.unit_of_work import JobCache, SqlUnitOfWork

log = logging.getLogger(__name__)

_MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
_LOCK = 0x504C414E  # advisory lock key of the schema migration ("PLAN")
#: Backoff after a failed connection: first and longest wait, seconds.
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
UNAVAILABLE = "store: the database is unavailable (details in the planner's log); retry later"
_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def redact(text: str, url: str | None = None) -> str:
    """``text`` without the password of ``url`` nor any ``scheme://user:password@`` one."""
    out = _PASSWORD_IN_URL.sub(r"\1***@", text)
    if url:
        try:
            password = make_url(url).password
        except (ArgumentError, ValueError):
            password = None
        if password and len(str(password)) >= 3:
            out = out.replace(str(password), "***")
    return out


_REVIEW_SUMMARY = ("id", "made_at_s", "trigger", "fleet", "elapsed_s", "error", "summary")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


class SqlStore:
    """Database access for the service; thread-safe (one session per unit of work).

    ``url`` is any SQLAlchemy URL; for a SQLite file the parent directory is created. Raises
    ``StoreError`` when the URL is malformed or the database cannot be opened.
    """

    def __init__(self, url: str) -> None:
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            raise StoreError(
                f"database_url {redact(url)!r} is not a SQLAlchemy URL "
                "(dialect+driver://user:password@host/database, or sqlite:///PATH)"
            ) from None
        self.url = url
        self.safe_url = parsed.render_as_string(hide_password=True)
        self.backend = parsed.get_backend_name()
        self.sqlite_path: Path | None = None
        self._identity: tuple[int, int] | None = None
        self._down_until = 0.0
        self._delay = 0.0
        self._lock = threading.Lock()
        connect_args: dict[str, object] = {}
        pool_recycle = -1  # SQLAlchemy's default: connections are not recycled by age
        if self.backend == "sqlite":
            connect_args["check_same_thread"] = False
            if parsed.database and parsed.database != ":memory:":
                self.sqlite_path = Path(parsed.database).expanduser()
                try:
                    self.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(
                        f"cannot create the directory of {self.safe_url}: {exc.strerror}"
                    ) from None
        elif self.backend == "postgresql":
            connect_args["connect_timeout"] = 5
            pool_recycle = 1800
        try:
            self.engine: Engine = create_engine(
                url, connect_args=connect_args, pool_pre_ping=True, pool_recycle=pool_recycle
            )
        except (SQLAlchemyError, ImportError) as exc:
            raise StoreError(
                f"cannot open database {self.safe_url}: {redact(str(exc), url)}"
            ) from None
        if self.backend == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._job_cache = JobCache()

    # ---------------------------------------------------------------- faults

    def _file_identity(self) -> tuple[int, int] | None:
        if self.sqlite_path is None:
            return None
        try:
            st = os.stat(self.sqlite_path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def _check_file(self) -> None:
        """Raise when the SQLite file this store opened was deleted or replaced."""
        if self.sqlite_path is None:
            return
        now = self._file_identity()
        if self._identity is None:
            self._identity = now
            return
        if now == self._identity:
            return
        what = "deleted" if now is None else "replaced by another file"
        message = (
            f"the SQLite file {self.sqlite_path} was {what} while the planner ran: nothing is "
            "written to it any more; restore it and restart the planner (a restart without it "
            "starts an empty store)"
        )
        raise StoreError(message, public=f"store: {message}")

    def _failed(self, exc: SQLAlchemyError) -> StoreError:
        """The ``StoreError`` for ``exc``; a lost connection starts (or doubles) the backoff."""
        detail = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, self.url)
        # A connection dropped under us (failover, killed backend) is replaced at once by the
        # pool; a server that cannot be reached is not asked again before the backoff.
        dropped = isinstance(exc, DBAPIError) and exc.connection_invalidated
        unreachable = isinstance(exc, OperationalError) and not dropped
        if unreachable and self.backend != "sqlite":
            with self._lock:
                self._delay = min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, 2 * self._delay))
                self._down_until = time.monotonic() + self._delay
            log.error(
                "database %s unreachable (retry in %.0f s): %s", self.safe_url, self._delay, detail
            )
        if (dropped or unreachable) and self.backend != "sqlite":
            return StoreError(f"database {self.safe_url} unreachable: {detail}", public=UNAVAILABLE)
        log.error("database %s error: %s", self.safe_url, detail)
        return StoreError(
            f"database error: {detail}",
            public="store: database error (details in the planner's log)",
        )

    def _before(self) -> None:
        self._check_file()
        wait = self._down_until - time.monotonic()
        if wait > 0:
            raise StoreError(
                f"database {self.safe_url} unreachable; next try in {wait:.0f} s",
                public=UNAVAILABLE,
            )

    def _succeeded(self) -> None:
        if self._delay:
            with self._lock:
                if self._delay:
                    log.info("database %s reachable again", self.safe_url)
                self._delay = 0.0
                self._down_until = 0.0

    def check(self) -> None:
        """Raise ``StoreError`` unless the database answers and (SQLite) its file is the one
        opened (for ``/readyz``)."""
        with self.session() as s:
            s.execute(text("SELECT 1"))

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest Alembic revision; raises ``StoreError``.

        On PostgreSQL the migration holds a transaction-scoped advisory lock, so replicas
        starting together on an empty database migrate one after the other.
        """
        cfg = Config()
        cfg.set_main_option("script_location", str(_MIGRATIONS))
        try:
            with self.engine.begin() as connection:
                if connection.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
                cfg.attributes["connection"] = connection
                command.upgrade(cfg, "head")
        except SQLAlchemyError as exc:
            error = self._failed(exc)
            raise StoreError(
                f"cannot migrate database {self.safe_url}: {error}",
                public=error.public_message,
            ) from None
        self._identity = self._file_identity()

    def revision(self) -> str | None:
        """The Alembic revision the database is at (None before the first migration)."""
        try:
            with self.engine.connect() as connection:
                return MigrationContext.configure(connection).get_current_revision()
        except SQLAlchemyError as exc:
            raise self._failed(exc) from None

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: commits on success, rolls back and raises ``StoreError`` on failure."""
        self._before()
        session = self._sessions()
        try:
            yield session
            session.commit()
        except SQLAlchemyError as exc:
            with contextlib.suppress(SQLAlchemyError):  # a lost connection committed nothing
                session.rollback()
            raise self._failed(exc) from None
        except BaseException:
            session.rollback()
            raise
        else:
            self._succeeded()
        finally:
            session.close()

    @contextmanager
    def unit_of_work(self) -> Iterator[SqlUnitOfWork]:
        """A transaction with the repository methods of the loops (see ``SqlUnitOfWork``);
        the jobs it loaded are kept for the next one once it committed (``JobCache``)."""
        with self.session() as session:
            uow = SqlUnitOfWork(session, self._job_cache)
            yield uow
            uow.finish()
        uow.keep_jobs()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    # ---------------------------------------------------------------- read helpers for the API

    def list_jobs(
        self,
        *,
        active_only: bool = False,
        status: str | None = None,
        after: JobSortKey | None = None,
        limit: int | None = None,
    ) -> list[JobRow]:
        """Jobs ordered by scheduler, cluster and numeric job id where possible; with ``after``
        only those after that sort key, at most ``limit``. A page is a range of the listing's
        index (a page of 10,000 jobs reads only its rows)."""
        filters: list[ColumnElement[bool]] = []
        if active_only:
            filters.append(JOB.active.is_(True))
        if status:
            filters.append(JOB.status == status)
        with self.session() as s:
            if after is None and limit is None:
                rows = list(s.scalars(select(JobRow).where(*filters)))
                return sorted(rows, key=listing_key)
            listing = (JOB.scheduler, JOB.cluster, JOB.sort_number, JOB.job_id)
            if after is not None:
                scheduler, cluster, (number, job_id) = after
                filters.append(tuple_(*listing) > tuple_(scheduler, cluster, number, job_id))
            query = select(JobRow).where(*filters).order_by(*listing).limit(limit)
            return list(s.scalars(query))

    def jobs_for_metrics(self, *, max_pending: int | None = None) -> list[JobRow]:
        """Active jobs that are not pending, and pending ones with a prediction (at most
        ``max_pending``: those predicted to start soonest, ``soonest_first``), ordered as
        ``list_jobs``; only the columns ``/metrics`` reads are loaded (``METRIC_COLUMNS``: the
        others cannot be read from these rows)."""
        predicted = and_(
            JOB.prediction.is_not(None), cast(JOB.prediction, String) != "null"
        )  # JSON null (a prediction set to None) is not SQL NULL
        active = JOB.active.is_(True)
        only = load_only(*(getattr(JOB, c) for c in METRIC_COLUMNS))
        heads = load_only(JOB.scheduler, JOB.cluster, JOB.job_id, JOB.queue_forecast)
        with self.session() as s:
            running = select(JobRow).options(only).where(active, JOB.status != "pending")
            rows = list(s.scalars(running))
            pending = select(JobRow).where(active, JOB.status == "pending", predicted)
            if max_pending is None:
                rows += s.scalars(pending.options(only))
            else:
                waiting = soonest_first(s.scalars(pending.options(heads)).all())
                ids = [r.id for r in waiting[:max_pending]]
                if ids:
                    rows += s.scalars(select(JobRow).options(only).where(JOB.id.in_(ids)))
        return sorted(rows, key=listing_key)

    def job_clusters(self, scheduler: str) -> list[str]:
        """The clusters of ``scheduler`` that have stored jobs, sorted."""
        with self.session() as s:
            query = select(JOB.cluster).where(JOB.scheduler == scheduler).distinct()
            return sorted(s.scalars(query))

    def job_counts(self) -> list[tuple[str, str, str, int, int]]:
        """(scheduler, cluster, status, jobs, GPUs) of the active jobs, GPUs from each job's
        snapshot (``num_gpus``)."""
        gpus = func.coalesce(func.sum(JOB.state["num_gpus"].as_integer()), 0)
        keys = (JOB.scheduler, JOB.cluster, JOB.status)
        with self.session() as s:
            found = s.execute(
                select(*keys, func.count(JOB.id), gpus)
                .where(JOB.active.is_(True))
                .group_by(*keys)
                .order_by(*keys)
            ).all()
        return [(a, b, c, int(n), int(g)) for a, b, c, n, g in found]

    def find_jobs(
        self, job_id: str, *, scheduler: str | None = None, cluster: str | None = None
    ) -> list[JobRow]:
        """Every stored job with this id (several when clusters share ids)."""
        with self.session() as s:
            query = select(JobRow).where(JOB.job_id == job_id)
            if scheduler:
                query = query.where(JOB.scheduler == scheduler)
            if cluster:
                query = query.where(JOB.cluster == cluster)
            return list(s.scalars(query))

    def samples(self, job_pk: int, *, limit: int = 200) -> list[StepSampleRow]:
        """The newest ``limit`` step samples of a job, oldest first."""
        with self.session() as s:
            rows = s.scalars(
                select(StepSampleRow)
                .where(STEP_SAMPLE.job_pk == job_pk)
                .order_by(STEP_SAMPLE.iteration.desc())
                .limit(limit)
            )
            return list(reversed(list(rows)))

    def predictions(self, job_pk: int, *, kind: str, limit: int = 100) -> list[PredictionRow]:
        """The newest ``limit`` stored predictions of one kind for a job, oldest first."""
        with self.session() as s:
            rows = s.scalars(
                select(PredictionRow)
                .where(PREDICTION.job_pk == job_pk, PREDICTION.kind == kind)
                .order_by(PREDICTION.made_at_s.desc())
                .limit(limit)
            )
            return list(reversed(list(rows)))

    def calibrations(self, *, prefix: str = "") -> list[CalibrationRow]:
        """Every stored calibration (``online``, uploaded operator calibrations, what finished
        jobs taught), or those whose name starts with ``prefix``."""
        query = select(CalibrationRow).order_by(CALIBRATION.name)
        if prefix:
            query = query.where(CALIBRATION.name.startswith(prefix, autoescape=True))
        with self.session() as s:
            return list(s.scalars(query))

    def calibration(self, name: str) -> CalibrationRow | None:
        """One stored calibration by name."""
        with self.session() as s:
            return s.get(CalibrationRow, name)

    def put_calibration(self, name: str, state: dict[str, object], updated_s: float) -> None:
        """Create or replace a named calibration."""
        with self.unit_of_work() as uow:
            uow.put_calibration(name, state, updated_s)

    # process heartbeats (planner.service.processes)

    def put_heartbeat(self, name: str, body: str, updated_s: float) -> None:
        """Create or replace the heartbeat ``name`` (``body``: JSON text)."""
        with self.session() as s:
            s.merge(HeartbeatRow(name=name, body=body, updated_s=updated_s))

    def heartbeats(self, *, prefix: str = "") -> list[HeartbeatRow]:
        """Every heartbeat whose name starts with ``prefix``, newest first."""
        query = select(HeartbeatRow).order_by(HEARTBEAT.updated_s.desc())
        if prefix:
            query = query.where(HEARTBEAT.name.startswith(prefix, autoescape=True))
        with self.session() as s:
            return list(s.scalars(query))

    def observed_run_counts(self) -> list[ObservedRunCount]:
        """Per cluster with observed runs: usable and skipped runs, the newest row's id."""
        skipped = OBSERVED_RUN.skip_reason.is_not(None)
        query = select(
            OBSERVED_RUN.scheduler,
            OBSERVED_RUN.cluster,
            func.count().filter(~skipped),
            func.count().filter(skipped),
            func.max(OBSERVED_RUN.id),
        ).group_by(OBSERVED_RUN.scheduler, OBSERVED_RUN.cluster)
        query = query.order_by(OBSERVED_RUN.scheduler, OBSERVED_RUN.cluster)
        with self.session() as s:
            return [
                ObservedRunCount(str(a), str(b), int(c), int(d), int(e))
                for a, b, c, d, e in s.execute(query)
            ]

    def observed_runs(
        self, scheduler: str, cluster: str, *, limit: int, skipped: bool = False
    ) -> list[ObservedRunRow]:
        """The newest ``limit`` usable (or skipped) runs of one cluster, oldest first."""
        reason = OBSERVED_RUN.skip_reason
        query = (
            select(ObservedRunRow)
            .where(
                OBSERVED_RUN.scheduler == scheduler,
                OBSERVED_RUN.cluster == cluster,
                reason.is_not(None) if skipped else reason.is_(None),
            )
            .order_by(OBSERVED_RUN.id.desc())
            .limit(limit)
        )
        with self.session() as s:
            return list(reversed(s.scalars(query).all()))

    def prune_observed_runs(self, scheduler: str, cluster: str, *, keep: int) -> int:
        """Delete all but the newest ``keep`` runs of one cluster; how many went."""
        mine = (OBSERVED_RUN.scheduler == scheduler, OBSERVED_RUN.cluster == cluster)
        with self.session() as s:
            cut = s.scalar(
                select(OBSERVED_RUN.id)
                .where(*mine)
                .order_by(OBSERVED_RUN.id.desc())
                .offset(keep)
                .limit(1)
            )
            if cut is None:
                return 0
            gone = s.execute(delete(ObservedRunRow).where(*mine, OBSERVED_RUN.id <= cut))
            return int(getattr(gone, "rowcount", 0) or 0)

    def sources(self, *, nodes: bool = True) -> Sequence[SourceRow]:
        """Health rows of every source the service has polled. Without ``nodes`` their node
        lists are not loaded (2,000 nodes take 6 ms to decode, a page of jobs or a
        readiness probe reads none of them) and must not be read from the rows."""
        query = select(SourceRow).order_by(SOURCE.name)
        if not nodes:
            query = query.options(defer(SOURCE.nodes, raiseload=True))
        with self.session() as s:
            return list(s.scalars(query))

    # ---------------------------------------------------------------- audit, retention

    def add_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Append audit records (one transaction)."""
        if not entries:
            return
        with self.session() as s:
            s.add_all(maintenance.audit_rows(entries))

    def audit(self, *, limit: int = 100, action: str | None = None) -> list[AuditRow]:
        """The newest ``limit`` audit records (of one ``action`` when given), newest first."""
        with self.session() as s:
            query = select(AuditRow).order_by(AUDIT.id.desc()).limit(limit)
            if action:
                query = query.where(AUDIT.action == action)
            return list(s.scalars(query))

    def prune(self, policy: RetentionPolicy, *, now_s: float) -> dict[str, int]:
        """Apply ``policy`` (ETA history, step samples, audit); rows deleted per table."""
        with self.session() as s:
            return maintenance.prune(s, policy, now_s=now_s)

    # ------------------------------------------------------------ capacity reviews

    def add_review(self, review: ReviewRow, *, keep: int) -> int:
        """Store a review (its id is returned) and keep only the newest ``keep``."""
        with self.session() as s:
            s.add(review)
            s.flush()
            newest = select(REVIEW.id).order_by(REVIEW.id.desc()).limit(keep)
            s.execute(delete(ReviewRow).where(REVIEW.id.not_in(newest.scalar_subquery())))
            return int(review.id)

    def _reviews(self, columns: Sequence[str], *, ok_only: bool, limit: int) -> list[ReviewRow]:
        """Reviews newest first as detached rows holding only ``columns`` (others None)."""
        with self.session() as s:
            query = select(*(getattr(REVIEW, c) for c in columns))
            if ok_only:
                query = query.where(REVIEW.error.is_(None))
            found = s.execute(query.order_by(REVIEW.id.desc()).limit(limit)).all()
        return [ReviewRow(**dict(zip(columns, row, strict=True))) for row in found]

    def latest_review(
        self, *, with_result: bool = True, with_documents: bool = False
    ) -> ReviewRow | None:
        """The newest stored review that ran; ``result`` / ``html`` and ``markdown`` only
        when asked for (else None)."""
        columns = [*_REVIEW_SUMMARY]
        columns += ["result"] if with_result else []
        columns += ["html", "markdown"] if with_documents else []
        rows = self._reviews(columns, ok_only=True, limit=1)
        return rows[0] if rows else None

    def list_reviews(self, *, limit: int = 20) -> list[ReviewRow]:
        """The newest ``limit`` reviews, newest first, without result or documents."""
        return self._reviews(_REVIEW_SUMMARY, ok_only=False, limit=limit)
