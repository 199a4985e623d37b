"""One transaction of the ingest loop over the SQLAlchemy store: :class:`SqlUnitOfWork`
implements the ``UnitOfWork`` port (``planner.service.store.port``); :class:`planner.service.
store.sql.SqlStore` opens it (``unit_of_work``), commits it or rolls it back.

Load: a cluster's jobs are loaded once per unit of work (``jobs_of`` keeps the list,
adding new jobs and dropping deleted ones), named calibrations once (a missing one too), and
``touch_jobs`` marks many jobs seen in one statement per 500 jobs. Between units of work the
store keeps a cluster's job rows as the last one committed them (:class:`JobCache`): the next
one takes them back without reading and decoding 10,000 rows, after one query checks that the
table still holds what was committed (the count of the cluster's jobs, their newest
``last_seen_s``, and the newest poll of the cluster's sources, which every ingest cycle of any
replica moves); anything else reads them afresh. The ingest loop is the only writer of jobs
(the API reads them). What a cycle asks per job is answered without flushing what is pending
(a flush per question cost more than the question): the ended jobs of a name from the loaded
rows, a job's samples and predictions from the table plus what this unit of work added (a job
it created has no stored samples to ask for). Step samples are kept as values, not ORM rows, and
written in one statement per kind (new, replaced) when the unit of work ends or before it
deletes jobs. A job row it created is inserted once, with everything set on it by then: nothing
it keeps of the job needs the row's id before that (its samples and predictions take the id
when they are written; reads of the store do not flush it).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from sqlalchemy import Table, bindparam, delete, event, func, insert, select, update
from sqlalchemy.orm import Session, object_session
from sqlalchemy.orm.attributes import instance_state, set_committed_value

from planner.service.models import (
    CalibrationRow,
    JobRow,
    NodeSlownessRow,
    ObservedRunRow,
    PredictionRow,
    SampleTiming,
    SourceRow,
    job_sort_key,
)
from planner.service.store.tables import (
    JOB,
    JOBS_TABLE,
    NODE_SLOWNESS,
    OBSERVED_RUN,
    PREDICTION,
    PREDICTIONS_TABLE,
    SOURCE,
    STEP_SAMPLE,
    STEP_SAMPLES_TABLE,
)

#: How a unit of work files what it keeps of one job: its row (created in this unit of work,
#: maybe without an id yet) or its id (``SqlUnitOfWork._key``).
_JobKey = int | JobRow

#: What a cluster's jobs in the table look like: (count, newest ``last_seen_s``, the newest
#: poll of its sources: every ingest cycle of any replica moves it).
Mark = tuple[int, float | None, float | None]


class JobCache:
    """The job rows of each cluster as the last unit of work committed them (module
    docstring); thread-safe: a unit of work takes a cluster's rows (another one meanwhile
    reads its own) and gives them back once it committed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str], tuple[Mark, list[JobRow]]] = {}

    def take(self, key: tuple[str, str]) -> tuple[Mark, list[JobRow]] | None:
        """The kept rows of a cluster and their mark (removed from the cache), or None."""
        with self._lock:
            return self._rows.pop(key, None)

    def put(self, key: tuple[str, str], mark: Mark, rows: list[JobRow]) -> None:
        """Keep a cluster's committed rows and the mark of the table they were committed in."""
        with self._lock:
            self._rows[key] = (mark, rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sample:
    """A step sample this unit of work stores: the columns of ``StepSampleRow`` but its ``id``
    and its ``job_pk`` (same names and types, as the tests check; the job's id is taken when
    the sample is written: a job row this unit of work created has none until it is
    inserted); ``stored``: it replaces a row already in the table (written as an update of
    that job's iteration, else as a new row)."""

    iteration: int
    step_time_s: float | None
    num_iterations: int
    time_s: float
    loss: float | None
    logged_step_time_s: float | None
    stored: bool

    def columns(self, job_pk: int) -> dict[str, object]:
        """The row's values by column name (the ``stored`` flag left out), of job ``job_pk``."""
        return {"job_pk": job_pk, **{name: getattr(self, name) for name in _SAMPLE_VALUES}}


#: The columns of a step sample ``_Sample`` holds, in its order.
_SAMPLE_VALUES = tuple(f.name for f in fields(_Sample) if f.name != "stored")
#: The columns of a step sample this unit of work writes: its job's id, then ``_Sample``'s.
_SAMPLE_COLUMNS = ("job_pk", *_SAMPLE_VALUES)
_SAMPLES = STEP_SAMPLES_TABLE
#: A replaced sample: its job's row of that iteration takes every other column's new value.
_SAMPLE_UPDATE = (
    update(_SAMPLES)
    .where(
        _SAMPLES.c.job_pk == bindparam("where_job_pk"),
        _SAMPLES.c.iteration == bindparam("where_iteration"),
    )
    .values(
        {name: bindparam(name) for name in _SAMPLE_COLUMNS if name not in ("job_pk", "iteration")}
    )
)

#: The columns of a step sample the ETA reads (``SampleTiming``'s order).
_TIMING_COLUMNS = (
    _SAMPLES.c.iteration,
    _SAMPLES.c.step_time_s,
    _SAMPLES.c.num_iterations,
    _SAMPLES.c.time_s,
    _SAMPLES.c.logged_step_time_s,
)
#: A job's newest ``limit`` samples with a step time, newest first.
_NEWEST_TIMED = (
    select(*_TIMING_COLUMNS)
    .where(_SAMPLES.c.job_pk == bindparam("job_pk"), _SAMPLES.c.step_time_s.is_not(None))
    .order_by(_SAMPLES.c.iteration.desc())
    .limit(bindparam("limit"))
)
_RANKED_TIMED = (
    select(
        _SAMPLES.c.job_pk,
        *_TIMING_COLUMNS,
        func.row_number()
        .over(partition_by=_SAMPLES.c.job_pk, order_by=_SAMPLES.c.iteration.desc())
        .label("rank"),
    )
    .where(
        _SAMPLES.c.job_pk.in_(bindparam("job_pks", expanding=True)),
        _SAMPLES.c.step_time_s.is_not(None),
    )
    .subquery()
)
#: Each of many jobs' newest ``limit`` samples with a step time: ``job_pk`` and the timing
#: columns, newest first within a job.
_NEWEST_TIMED_OF_JOBS = (
    select(_RANKED_TIMED.c.job_pk, *(_RANKED_TIMED.c[c.name] for c in _TIMING_COLUMNS))
    .where(_RANKED_TIMED.c.rank <= bindparam("limit"))
    .order_by(_RANKED_TIMED.c.job_pk, _RANKED_TIMED.c.rank)
)
#: Each of many jobs' newest stored iteration: ``job_pk, iteration`` (none for a job without
#: samples).
_NEWEST_ITERATION_OF_JOBS = (
    select(_SAMPLES.c.job_pk, func.max(_SAMPLES.c.iteration))
    .where(_SAMPLES.c.job_pk.in_(bindparam("job_pks", expanding=True)))
    .group_by(_SAMPLES.c.job_pk)
)
#: How many more samples than asked for ``read_samples_ahead`` reads of a job that has
#: more: ``timed_samples`` answers from them while the unit of work wrote no more than this many
#: of the job's samples (each may replace a stored one).
TIMED_AHEAD_SPARE = 32

_UOW_KEY = "planner.unit_of_work"
"""Where a session's :class:`SqlUnitOfWork` is kept (``Session.info``): a job row's renaming
finds the index of the unit of work that holds it there."""


class _NameIndex:
    """One cluster's job rows of a unit of work by ``(name, user)``: built once from the rows
    loaded, kept up to date as rows are added (``add``) and renamed (the ``set`` events of
    ``JobRow.name`` and ``JobRow.user``: :func:`_renamed`)."""

    def __init__(self, rows: Sequence[JobRow]) -> None:
        self._by_name: dict[tuple[object, object], dict[int, JobRow]] = {}
        self._keys: dict[int, tuple[object, object]] = {}  # id(row) -> where it is filed
        for row in rows:
            self.add(row)

    def add(self, row: JobRow) -> None:
        """File ``row`` under its name and user now."""
        self._file(row, (row.name, row.user))

    def _file(self, row: JobRow, key: tuple[object, object]) -> None:
        self._by_name.setdefault(key, {})[id(row)] = row
        self._keys[id(row)] = key

    def rename(self, row: JobRow, *, name: object, user: object) -> None:
        """``row`` (when filed here) is now named ``name`` of ``user``."""
        before = self._keys.get(id(row))
        if before is None:
            return
        del self._by_name[before][id(row)]
        self._file(row, (name, user))

    def ended(self, name: str, user: str) -> list[JobRow]:
        """The inactive rows named ``name`` of ``user``, in the listing's order."""
        rows = [r for r in self._by_name.get((name, user), {}).values() if not r.active]
        return sorted(rows, key=lambda r: (r.sort_number or 0, r.job_id))


def _renamed(target: JobRow, *, name: object, user: object) -> None:
    """File a renamed row anew in the name index of the unit of work that holds it (if any:
    the event comes before the attribute changes, so the new name is passed)."""
    session = object_session(target)
    uow = session.info.get(_UOW_KEY) if session is not None else None
    if isinstance(uow, SqlUnitOfWork):
        index = uow._named.get((target.scheduler, target.cluster))
        if index is not None:
            index.rename(target, name=name, user=user)


@event.listens_for(JOB.name, "set")
def _name_set(target: JobRow, value: object, old: object, _initiator: object) -> None:
    if value != old:
        _renamed(target, name=value, user=target.user)


@event.listens_for(JOB.user, "set")
def _user_set(target: JobRow, value: object, old: object, _initiator: object) -> None:
    if value != old:
        _renamed(target, name=target.name, user=value)


#: The job columns an insert that leaves them out stores as NULL (no default of any kind).
_NULL_UNLESS_SET = tuple(
    column.key
    for column in JOBS_TABLE.c
    if column.nullable and column.default is None and column.server_default is None
)


def _as_read(row: JobRow) -> None:
    """Give a committed row that was inserted the value None of each column its insert left
    out, as a read of the row gives it: the row holds no value for such a column (it never
    does for a job that never ran: ``ended_s``, ``outcome``, ``queue_forecast``, ...), and
    each read of the attribute then asks the ORM's loaders and makes its default anew (a
    steady cycle of a 10,000-job cluster read 80,000 such values, several times what a read
    of a held value costs)."""
    state = instance_state(row)
    for key in _NULL_UNLESS_SET:
        if key not in state.dict and key not in state.expired_attributes:
            set_committed_value(row, key, None)


class SqlUnitOfWork:
    """The ``UnitOfWork`` port over one SQLAlchemy session (changes to rows it returned are
    written on commit); ``cache``: the store's kept job rows."""

    def __init__(self, session: Session, cache: JobCache | None = None) -> None:
        self._s = session
        self._cache = cache
        self._jobs: dict[tuple[str, str], list[JobRow]] = {}
        self._calibrations: dict[str, CalibrationRow | None] = {}
        self._prunes: dict[tuple[str, int], set[_JobKey]] = {}
        self._marks: dict[tuple[str, str], Mark] = {}
        # per job (``_key``): the last prediction added of each kind, and all of them
        self._predictions: dict[tuple[_JobKey, str], PredictionRow] = {}
        self._added: dict[tuple[_JobKey, str], list[PredictionRow]] = {}
        # the predictions of jobs without an id yet, in the order added, with their job: added
        # to the session once the job rows are written (``_write_pending``)
        self._held: list[tuple[JobRow, PredictionRow]] = []
        self._holding: set[int] = set()  # id() of the rows with held predictions
        # the predictions in the session not written yet, in the order added
        self._new_predictions: list[PredictionRow] = []
        # SQLite gives a new row the id after the largest (a rowid: the tables have no
        # AUTOINCREMENT); the unit of work gives its new job and prediction rows those ids
        # itself when it writes them (``_give_ids``), so that each table's rows are inserted in
        # one statement (SQLAlchemy inserts rows whose ids it must read back one statement per
        # row on SQLite: 18,600 statements in a first cycle of 10,000 jobs)
        self._own_ids = session.get_bind().dialect.name == "sqlite"
        # per job (``_key``), by iteration: the step samples this unit of work added or
        # replaced, so that reading a job's samples needs no flush of everything pending
        self._written: dict[_JobKey, dict[int, _Sample]] = {}
        # the samples not written yet, in the order stored, by job and iteration, with their
        # job (``_write_samples``)
        self._unwritten: dict[tuple[_JobKey, int], tuple[JobRow, _Sample]] = {}
        # the job rows this unit of work created, by ``id()`` (held: an id is never reused)
        self._created: dict[int, JobRow] = {}
        # per cluster whose jobs are loaded: its rows by name and user (``ended_jobs_named``)
        self._named: dict[tuple[str, str], _NameIndex] = {}
        # per (scheduler, cluster, job id): the observed run this unit of work stored
        self._runs: dict[tuple[str, str, str], ObservedRunRow] = {}
        # per job pk, what ``read_samples_ahead`` read: the newest stored samples with a step
        # time (newest first) and how many it asked for; the newest stored iteration (None:
        # the job has no stored sample)
        self._timed: dict[int, tuple[int, list[SampleTiming]]] = {}
        self._newest: dict[int, int | None] = {}
        session.info[_UOW_KEY] = self

    def keep_jobs(self) -> None:
        """Give the jobs this unit of work loaded to the cache (call after the commit); the
        rows it created first hold every column as a read of them would (:func:`_as_read`)."""
        if self._cache is not None:
            for row in self._created.values():
                _as_read(row)
            for key, rows in self._jobs.items():
                if key in self._marks:
                    self._cache.put(key, self._marks[key], rows)

    def _mark(self, scheduler: str, cluster: str) -> Mark:
        jobs = (JOB.scheduler == scheduler, JOB.cluster == cluster)
        sources = (SOURCE.scheduler == scheduler, SOURCE.cluster == cluster)
        query = select(
            select(func.count(JOB.id)).where(*jobs).scalar_subquery(),
            select(func.max(JOB.last_seen_s)).where(*jobs).scalar_subquery(),
            select(func.max(SOURCE.last_attempt_s)).where(*sources).scalar_subquery(),
        )
        # the table as committed: this cycle's own pending change (its source's poll time,
        # set before the jobs are loaded) must not make the kept rows look stale
        with self._s.no_autoflush:
            count, newest, polled = self._s.execute(query).one()
        return (int(count), newest, polled)

    def _load_jobs(self, scheduler: str, cluster: str) -> list[JobRow]:
        kept = self._cache.take((scheduler, cluster)) if self._cache is not None else None
        if kept is not None and kept[0] == self._mark(scheduler, cluster):
            for row in kept[1]:
                self._s.add(row)
            return kept[1]
        where = (JOB.scheduler == scheduler, JOB.cluster == cluster)
        return list(self._s.scalars(select(JobRow).where(*where)))

    def source(self, name: str, *, scheduler: str) -> SourceRow:
        """The health row of source ``name``, created when new."""
        row = self._s.get(SourceRow, name)
        if row is None:
            row = SourceRow(name=name, scheduler=scheduler, cluster="", consecutive_failures=0)
            self._s.add(row)
        return row

    def jobs_of(self, scheduler: str, cluster: str) -> list[JobRow]:
        """Every stored job of one scheduler and cluster (loaded once per unit of work)."""
        key = (scheduler, cluster)
        if key not in self._jobs:
            self._jobs[key] = self._load_jobs(scheduler, cluster)
        return list(self._jobs[key])

    def ended_jobs_named(self, scheduler: str, cluster: str, name: str, user: str) -> list[JobRow]:
        """The cluster's inactive jobs of this name and user (as they are now in this unit of
        work), in the listing's order. When the unit of work loaded the cluster's jobs
        (``jobs_of``), they are looked up among those rows by name and user (an index built
        once, kept up to date as rows are added, renamed or deleted: :class:`_NameIndex`),
        not queried: a query flushed every pending change first, and a first cycle asks once
        per job whose log it starts to read (2,200 flushes of a 10,000-job cluster)."""
        key = (scheduler, cluster)
        if key in self._jobs:
            index = self._named.get(key)
            if index is None:
                index = self._named[key] = _NameIndex(self._jobs[key])
            return index.ended(name, user)
        query = select(JobRow).where(
            JOB.active.is_(False),
            JOB.scheduler == scheduler,
            JOB.cluster == cluster,
            JOB.name == name,
            JOB.user == user,
        )
        return list(self._s.scalars(query))

    def touch_jobs(self, jobs: Sequence[JobRow], *, last_seen_s: float) -> None:
        """Set ``last_seen_s`` of stored ``jobs`` in bulk (no other attribute changes)."""
        ids = [j.id for j in jobs if j.id is not None]
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            self._s.execute(
                update(JobRow).where(JOB.id.in_(chunk)).values(last_seen_s=last_seen_s),
                execution_options={"synchronize_session": False},
            )
        for job in jobs:
            if job.id is not None:
                set_committed_value(job, "last_seen_s", last_seen_s)

    def write_jobs(self, changes: Sequence[tuple[JobRow, Mapping[str, object]]]) -> None:
        """Give each row the values of its mapping (attribute name -> value): a stored row's are
        written at once, in one statement per set of names for all the rows that change those
        (not as the flush writes a changed row: the flush of the 6,900 pending jobs' queue
        forecasts and ETAs cost more than the statement), and become the row's committed values;
        a row not stored yet takes them as ordinary changes (its insert writes them)."""
        groups: dict[tuple[str, ...], list[tuple[JobRow, Mapping[str, object]]]] = {}
        for row, values in changes:
            if not values:
                continue
            if row.id is None:
                for name, value in values.items():
                    setattr(row, name, value)
                continue
            groups.setdefault(tuple(sorted(values)), []).append((row, values))
        for names, group in groups.items():
            statement = (
                update(JOBS_TABLE)
                .where(JOBS_TABLE.c.id == bindparam("where_id"))
                .values({name: bindparam(name) for name in names})
            )
            with self._s.no_autoflush:  # nothing else is written before its turn
                self._s.execute(
                    statement, [{**values, "where_id": row.id} for row, values in group]
                )
            for row, values in group:
                for name, value in values.items():
                    set_committed_value(row, name, value)

    def new_job(self, *, scheduler: str, cluster: str, job_id: str, first_seen_s: float) -> JobRow:
        """A new job row, added to the session."""
        row = JobRow(
            scheduler=scheduler,
            cluster=cluster,
            job_id=job_id,
            sort_number=job_sort_key(job_id)[0],
            first_seen_s=first_seen_s,
            described_by="none",
            description_detail="",
            description_key="",
        )
        self._s.add(row)
        self._created[id(row)] = row
        if (scheduler, cluster) in self._jobs:
            self._jobs[scheduler, cluster].append(row)
            index = self._named.get((scheduler, cluster))
            if index is not None:
                index.add(row)
        return row

    def delete_ended_jobs(self, *, ended_before_s: float) -> None:
        """Remove inactive jobs that ended before ``ended_before_s`` (cascades to samples);
        their rows leave this unit of work."""

        def gone(row: JobRow) -> bool:
            return not row.active and row.ended_s is not None and row.ended_s < ended_before_s

        self._write_pending()  # a deleted job's samples go with it, as rows flushed before
        self._s.execute(
            delete(JobRow).where(
                JOB.active.is_(False),
                JOB.ended_s.is_not(None),
                JOB.ended_s < ended_before_s,
            ),
            execution_options={"synchronize_session": False},
        )
        for state in list(self._s.identity_map.all_states()):
            row = state.obj()
            if isinstance(row, JobRow) and gone(row):
                self._s.expunge(row)
        for key, rows in self._jobs.items():
            self._jobs[key] = [r for r in rows if not gone(r)]
        self._named.clear()  # built again from the rows left, when asked
        self._timed.clear()  # a deleted job's id may be given to a new one
        self._newest.clear()

    def _pk(self, job: JobRow) -> int:
        """The job row's id (a row that has none yet is written first)."""
        if job.id is None:
            self._s.flush()
        return job.id

    def _key(self, job: JobRow) -> _JobKey:
        """How this unit of work files what it keeps of a job (samples, predictions, prunes):
        a row it created by the row itself, so that no flush is needed to give it an id (a
        first cycle's first job that stored a sample inserted the 10,000 new rows at once,
        then updated each at the end with everything the cycle set on it); any other by its
        id (one row object per id while the session holds it, but held only weakly)."""
        return job if self._created.get(id(job)) is job else self._pk(job)

    def _key_pk(self, key: _JobKey) -> int:
        """The id of the job filed under ``key`` (a created row's once it is written)."""
        return key if isinstance(key, int) else self._pk(key)

    def _write_pending(self) -> None:
        """Write every pending change: the rows of the session, the predictions held until
        their jobs had ids among them, then the step samples (``_write_samples``). On SQLite
        the new job and prediction rows get their ids here (``_own_ids``) and everything is
        written in one flush; elsewhere the database gives them: the job rows are written
        first, then the held predictions."""
        if self._own_ids:
            created = self._s.new
            self._give_ids(
                JOBS_TABLE, [r for r in self._created.values() if r.id is None and r in created]
            )
        elif self._held:
            self._s.flush()
        for job, prediction in self._held:
            prediction.job_pk = self._pk(job)
            self._s.add(prediction)
            self._new_predictions.append(prediction)
        self._held = []
        self._holding.clear()
        if self._own_ids:
            self._give_ids(PREDICTIONS_TABLE, [p for p in self._new_predictions if p.id is None])
        self._new_predictions = []
        self._s.flush()
        self._write_samples()

    def _give_ids(self, table: Table, rows: Sequence[JobRow | PredictionRow]) -> None:
        """Give ``rows`` (new rows of ``table``, in the order added) the ids the database would
        give them as they are inserted in that order: those after the largest in the table."""
        if rows:
            with self._s.no_autoflush:
                top = self._s.execute(select(func.max(table.c.id))).scalar() or 0
            for n, row in enumerate(rows, start=1):
                row.id = top + n

    def _stored_before(self, job: JobRow) -> bool:
        """False when the job's row is new in this unit of work: the table cannot hold samples
        or predictions of it (a new id; those of a deleted job went with it), so none are asked
        for (a first cycle of 10,000 new jobs asked 5,000 times)."""
        return self._created.get(id(job)) is not job

    def sample_iterations(self, job: JobRow, *, since: int | None = None) -> set[int]:
        """Iterations the job already has a step sample for (from ``since`` on, when given);
        none stored are asked for when ``read_samples_ahead`` found the job has none that
        late."""
        found: set[int] = set()
        if self._stored_before(job) and not self._none_stored_since(self._pk(job), since):
            query = select(STEP_SAMPLE.iteration).where(STEP_SAMPLE.job_pk == self._pk(job))
            if since is not None:
                query = query.where(STEP_SAMPLE.iteration >= since)
            with self._s.no_autoflush:  # what this unit of work wrote is added from ``_written``
                found = set(self._s.scalars(query))
        written = self._written.get(self._key(job), {})
        return found | {i for i in written if since is None or i >= since}

    def add_sample(
        self,
        job: JobRow,
        *,
        iteration: int,
        step_time_s: float | None,
        num_iterations: int,
        time_s: float,
        loss: float | None,
        logged_step_time_s: float | None = None,
    ) -> None:
        """Store one step sample (``logged_step_time_s``: the compute time the log printed
        for its iterations, when it printed one)."""
        self._put_sample(
            job,
            _Sample(
                iteration=iteration,
                step_time_s=step_time_s,
                num_iterations=num_iterations,
                time_s=time_s,
                loss=loss,
                logged_step_time_s=logged_step_time_s,
                stored=False,
            ),
        )

    def replace_sample(
        self,
        job: JobRow,
        *,
        iteration: int,
        step_time_s: float | None,
        num_iterations: int,
        time_s: float,
        loss: float | None,
        logged_step_time_s: float | None = None,
    ) -> None:
        """Replace the sample of ``iteration`` with a newer observation (the port's rule)."""
        key = self._key(job)
        pending = self._unwritten.get((key, iteration))
        if pending is not None:
            stored = pending[1].stored  # a new row not written yet stays a new row
        elif iteration in self._written.get(key, {}):
            stored = True  # written by this unit of work already
        elif not self._stored_before(job):
            stored = False
        else:
            with self._s.no_autoflush:  # samples are written apart from the session's rows
                found = self._s.scalar(
                    select(STEP_SAMPLE.id).where(
                        STEP_SAMPLE.job_pk == self._pk(job), STEP_SAMPLE.iteration == iteration
                    )
                )
            stored = found is not None
        self._put_sample(
            job,
            _Sample(
                iteration=iteration,
                step_time_s=step_time_s,
                num_iterations=num_iterations,
                time_s=time_s,
                loss=loss,
                logged_step_time_s=logged_step_time_s,
                stored=stored,
            ),
        )

    def _put_sample(self, job: JobRow, sample: _Sample) -> None:
        key = self._key(job)
        self._written.setdefault(key, {})[sample.iteration] = sample
        self._unwritten[key, sample.iteration] = (job, sample)

    def _write_samples(self) -> None:
        """Write the samples stored since the last write: the new ones in one statement, the
        replacements in another (not as ORM rows: a first cycle stores 50,000 samples of
        thousands of jobs, and rows cost more to make, flush and collect than the values).
        Call after a flush: a job row created in this unit of work has its id then."""
        pending = [(self._pk(job), sample) for job, sample in self._unwritten.values()]
        self._unwritten = {}
        new = [sample.columns(pk) for pk, sample in pending if not sample.stored]
        if new:
            self._s.execute(insert(_SAMPLES), new)
        replaced = [
            {**sample.columns(pk), "where_job_pk": pk, "where_iteration": sample.iteration}
            for pk, sample in pending
            if sample.stored
        ]
        if replaced:
            self._s.execute(_SAMPLE_UPDATE, replaced)

    def timed_samples(self, job: JobRow, *, limit: int) -> list[SampleTiming]:
        """The newest ``limit`` samples with a step time, oldest first (the columns the ETA
        reads, as tuples: no row objects). The stored ones are read without flushing what is
        pending (a flush per job cost more than its query), or taken from what
        ``read_samples_ahead`` read when that is enough; the samples this unit of work
        added or replaced take their place by iteration."""
        written = self._written.get(self._key(job), {})
        samples: dict[int, SampleTiming] = {}
        if self._stored_before(job):
            pk = self._pk(job)
            ahead = self._timed.get(pk)
            # enough: every stored one, or as many as the query below asks for (each written
            # one may replace a stored one)
            if ahead is not None and (len(ahead[1]) < ahead[0] or ahead[0] >= limit + len(written)):
                found: Sequence[SampleTiming] = ahead[1]
            else:
                with self._s.no_autoflush:
                    found = [
                        SampleTiming(*row)
                        for row in self._s.execute(
                            _NEWEST_TIMED, {"job_pk": pk, "limit": limit + len(written)}
                        )
                    ]
            samples = {sample.iteration: sample for sample in found}
        for iteration, row in written.items():
            samples[iteration] = SampleTiming(
                iteration,
                row.step_time_s,
                row.num_iterations,
                row.time_s,
                row.logged_step_time_s,
            )
        timed = sorted(
            (sample for sample in samples.values() if sample.step_time_s is not None),
            key=lambda sample: sample.iteration,
        )
        return timed[-limit:] if limit > 0 else []

    def _none_stored_since(self, pk: int, since: int | None) -> bool:
        """Whether ``read_samples_ahead`` found that the job has no stored sample of
        ``since`` or later (False: not known)."""
        if since is None or pk not in self._newest:
            return False
        newest = self._newest[pk]
        return newest is None or newest < since

    def read_samples_ahead(self, jobs: Sequence[JobRow], *, limit: int) -> None:
        """Read what this unit of work will ask of the stored samples of ``jobs`` later, in
        two queries per 500 jobs (a cycle's few hundred jobs that printed progress were two
        queries each): the newest ``limit + TIMED_AHEAD_SPARE`` with a step time of each job,
        which ``timed_samples(job, limit=limit)`` answers from, and its newest iteration,
        which tells ``sample_iterations`` that a job has none stored past it. Jobs created in
        this unit of work, or read already, are left out; read without flushing what is
        pending, as those methods read."""
        pks = sorted(
            {
                job.id
                for job in jobs
                if job.id is not None and job.id not in self._timed and self._stored_before(job)
            }
        )
        asked = limit + TIMED_AHEAD_SPARE
        for i in range(0, len(pks), 500):
            chunk = pks[i : i + 500]
            found: dict[int, list[SampleTiming]] = {pk: [] for pk in chunk}
            with self._s.no_autoflush:
                rows = self._s.execute(_NEWEST_TIMED_OF_JOBS, {"job_pks": chunk, "limit": asked})
                for row in rows:
                    found[row[0]].append(SampleTiming(*row[1:]))
                newest = dict(self._s.execute(_NEWEST_ITERATION_OF_JOBS, {"job_pks": chunk}).all())
            for pk, samples in found.items():
                self._timed[pk] = (asked, samples)
                self._newest[pk] = newest.get(pk)

    def add_prediction(
        self, job: JobRow, *, kind: str, made_at_s: float, payload: dict[str, object]
    ) -> None:
        """Store a prediction of ``kind`` in the job's history; one made at the same
        ``made_at_s`` in this unit of work replaces that one (the port's rule). The prediction
        of a job row without an id yet is held until the rows are written (so are the later
        ones of that job while it holds some: they are stored in the order added)."""
        key = self._key(job)
        earlier = self._predictions.get((key, kind))
        if earlier is not None and earlier.made_at_s == made_at_s:
            earlier.payload = payload
            return
        row = PredictionRow(made_at_s=made_at_s, kind=kind, payload=payload)
        if job.id is None or id(job) in self._holding:
            self._held.append((job, row))
            self._holding.add(id(job))
        else:
            row.job_pk = job.id
            self._s.add(row)
            self._new_predictions.append(row)
        self._predictions[key, kind] = row
        self._added.setdefault((key, kind), []).append(row)

    def prune_predictions(self, job: JobRow, *, kind: str, keep: int) -> None:
        """Keep only the newest ``keep`` predictions of ``kind`` (for every job asked, in one
        statement per 500 jobs when the unit of work ends: ``finish``)."""
        self._prunes.setdefault((kind, keep), set()).add(self._key(job))

    def finish(self) -> None:
        """What this unit of work does at its end, before it commits: the predictions' pruning
        of ``prune_predictions`` (the newest ``keep`` of each job stay), once every pending
        change is written."""
        self._write_pending()
        for (kind, keep), keys in self._prunes.items():
            ordered = sorted({self._key_pk(key) for key in keys})
            for i in range(0, len(ordered), 500):
                newest = func.row_number().over(
                    partition_by=PREDICTION.job_pk, order_by=PREDICTION.id.desc()
                )
                ranked = (
                    select(PREDICTION.id, newest.label("rank"))
                    .where(PREDICTION.kind == kind, PREDICTION.job_pk.in_(ordered[i : i + 500]))
                    .subquery()
                )
                self._s.execute(
                    delete(PredictionRow).where(
                        PREDICTION.id.in_(select(ranked.c.id).where(ranked.c.rank > keep))
                    ),
                    execution_options={"synchronize_session": False},
                )
        self._prunes.clear()
        self._write_pending()
        self._marks = {key: self._mark(*key) for key in self._jobs}

    def calibration(self, name: str) -> CalibrationRow | None:
        """One stored calibration by name (read once per unit of work)."""
        if name not in self._calibrations:
            # what this unit of work puts is kept here: the read needs no flush (an autoflush
            # here inserted a first cycle's new job rows before the cycle had set them up)
            with self._s.no_autoflush:
                self._calibrations[name] = self._s.get(CalibrationRow, name)
        return self._calibrations[name]

    def put_calibration(self, name: str, state: dict[str, object], updated_s: float) -> None:
        """Create or replace a named calibration."""
        row = self.calibration(name)
        if row is None:
            row = CalibrationRow(name=name, state=state, updated_s=updated_s)
            self._s.add(row)
            self._calibrations[name] = row
        else:
            row.state = state
            row.updated_s = updated_s

    # ETA
    def job_predictions(self, job: JobRow, *, kind: str, limit: int) -> list[PredictionRow]:
        """The newest ``limit`` predictions of ``kind`` of the job, oldest first (by the time
        they were made, then as stored). The stored ones are read without flushing what is
        pending (a flush per ended job cost more than its query); those this unit of work
        added and did not write yet (``add_prediction`` keeps them) are taken as stored after
        every stored one, in the order added (as the flush gives them their ids). A job row
        this unit of work created has no stored ones to ask for (a new id): its predictions are
        those this unit of work added, written or not."""
        added = self._added.get((self._key(job), kind), [])
        rows: list[PredictionRow] = []
        pending = list(added)
        if self._stored_before(job):
            pending = [r for r in added if r.id is None]
            with self._s.no_autoflush:
                rows = list(
                    self._s.scalars(
                        select(PredictionRow)
                        .where(PREDICTION.job_pk == self._pk(job), PREDICTION.kind == kind)
                        .order_by(PREDICTION.made_at_s.desc(), PREDICTION.id.desc())
                        .limit(limit)
                    )
                )
        if pending:
            # as the flush would store them: after every stored row, in the order added
            order = {id(r): (1, i) for i, r in enumerate(pending)}
            rows.extend(pending)
            rows.sort(key=lambda r: (r.made_at_s, order.get(id(r), (0, r.id))), reverse=True)
            del rows[max(0, limit) :]
        return list(reversed(rows))

    # Node slowness history (straggler impact for queued jobs).

    def slow_episodes(
        self, scheduler: str, cluster: str, *, since_s: float
    ) -> list[NodeSlownessRow]:
        """Slow-node episodes of one cluster last seen at or after ``since_s``, oldest first."""
        query = (
            select(NodeSlownessRow)
            .where(
                NODE_SLOWNESS.scheduler == scheduler,
                NODE_SLOWNESS.cluster == cluster,
                NODE_SLOWNESS.last_seen_s >= since_s,
            )
            .order_by(NODE_SLOWNESS.started_s, NODE_SLOWNESS.id)
        )
        return list(self._s.scalars(query))

    def add_slow_episode(
        self,
        *,
        scheduler: str,
        cluster: str,
        node: str,
        job_id: str,
        now_s: float,
        ranks: int,
        slowdown: float,
    ) -> NodeSlownessRow:
        """Start an episode of ``node`` being slow for ``job_id`` at ``now_s``."""
        row = NodeSlownessRow(
            scheduler=scheduler,
            cluster=cluster,
            node=node,
            job_id=job_id,
            started_s=now_s,
            last_seen_s=now_s,
            ranks=ranks,
            slowdown=slowdown,
        )
        self._s.add(row)
        return row

    def forget_nodes(self, scheduler: str, cluster: str, nodes: Sequence[str]) -> None:
        """Remove every episode of these nodes (drained: they leave the history)."""
        if nodes:
            self._s.execute(
                delete(NodeSlownessRow).where(
                    NODE_SLOWNESS.scheduler == scheduler,
                    NODE_SLOWNESS.cluster == cluster,
                    NODE_SLOWNESS.node.in_(list(nodes)),
                )
            )

    def put_observed_run(self, run: ObservedRunRow) -> None:
        """Store ``run``, replacing the job's earlier one (the port's rule). The earlier one is
        the run this unit of work stored for the job, else the stored one, read without
        flushing what is pending (a first cycle stores the runs of hundreds of ended jobs
        between the updates of 10,000 rows: a flush per run wrote them in hundreds of small
        batches)."""
        key = (run.scheduler, run.cluster, run.job_id)
        found = self._runs.get(key)
        if found is None:
            with self._s.no_autoflush:
                found = self._s.scalars(
                    select(ObservedRunRow).where(
                        OBSERVED_RUN.scheduler == run.scheduler,
                        OBSERVED_RUN.cluster == run.cluster,
                        OBSERVED_RUN.job_id == run.job_id,
                    )
                ).first()
        if found is not None and found.id is None:
            self._s.expunge(found)  # never written: it just is not
        elif found is not None:  # a new id: the learner sees a changed run as a new one
            self._s.delete(found)
            self._s.flush()
        self._s.add(run)
        self._runs[key] = run
