"""Jobs of one snapshot into the store: new, changed, ended and pruned jobs; per job its
description, progress, ETA, stragglers and GPU telemetry."""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from planner.calibration import key_from_scenario
from planner.errors import PlannerError
from planner.launch.shell_state import SCRIPT_SUFFIXES
from planner.service.describe import (
    describe_job,
    description_key,
    scenario_path_from_comment,
    training_schedule,
)
from planner.service.learning import calibrate_prediction, record_finished_run
from planner.service.loops.calibration import online_calibration
from planner.service.loops.context import IngestDeps
from planner.service.loops.eta import (
    ETA_SAMPLE_WINDOW,
    final_eta,
    knowledge_version,
    refresh_eta,
    update_eta,
)
from planner.service.loops.gpus import read_gpus
from planner.service.loops.incremental import EtaBasis, JobMemo, knowledge_delay_s
from planner.service.loops.outcomes import finish_job
from planner.service.loops.progress import (
    read_telemetry,
    reported_progress,
    resumed_cursor,
    stored_cursor,
    tail_log,
)
from planner.service.loops.stragglers import analyse_trace, update_stragglers
from planner.service.models import JobRow
from planner.service.store import UnitOfWork
from planner.service.stored_job import stored_job_state
from planner.service.stored_json import text
from planner.specs.job import (
    ClusterSnapshot,
    JobState,
    JobStatus,
    RankStepRecord,
    TailCursor,
)

log = logging.getLogger(__name__)

#: Snapshot fields an ended job keeps from when it ran (it keeps what it was).
_KEPT_WHEN_ENDED = ("stdout_path", "work_dir", "command", "comment", "node_list", "gpu_type")

#: Reads a file a job names: ``(path, max_bytes, *, job) -> text`` (a source's
#: ``read_text_file``, which applies the job-file rules of ``adapters.files``).
ReadText = Callable[..., str]

#: Reads many files jobs name at once, for their own reads later in the cycle: ``([(path,
#: job), ...], max_bytes) -> files asked for`` (``SlurmSource.read_text_files``).
ReadTexts = Callable[[Sequence[tuple[str, JobState]], int], int]


def merge_jobs(
    deps: IngestDeps,
    uow: UnitOfWork,
    read_text: ReadText,
    snapshot: ClusterSnapshot,
    *,
    now_s: float,
    read_texts: ReadTexts | None = None,
) -> None:
    """Store every job of ``snapshot``; jobs the scheduler stopped reporting have ended (as
    their last stored snapshot, status ``unknown`` without an end time: finished like the
    others, their logs read to the end); jobs
    that ended more than the retention ago are pruned. ``read_text(path, max_bytes, job=job)``
    reads a file a job names (the source's ``read_text_file``); ``read_texts``, when the
    source has it, reads at once the first file each launch described this cycle reads
    (:func:`described_reads`). Jobs that did not change since this process's last cycle are
    skipped where nothing can have changed (``planner.service.loops.incremental``)."""
    retention_s = deps.settings.ended_job_retention_s
    existing = {r.job_id: r for r in uow.jobs_of(snapshot.scheduler, snapshot.cluster)}
    seen: set[str] = set()
    touched: list[JobRow] = []
    staged: list[tuple[JobRow, JobState, EtaBasis]] = []
    quiet = quiet_logs(deps, existing, snapshot)
    # Rows first, then their updates; the new rows are inserted once, as the cycle left them
    # (the unit of work gives them their ids when it writes them: ``UnitOfWork``).
    merged: list[tuple[JobRow, JobState, bool]] = []
    for job in snapshot.jobs:
        seen.add(job.job_id)
        row = existing.get(job.job_id)
        new = row is None
        if row is None:
            # An ended job we never saw running: keep it only within the retention.
            if (
                not job.status.is_active
                and job.end_time_s is not None
                and now_s - job.end_time_s > retention_s
            ):
                continue
            row = uow.new_job(
                scheduler=job.scheduler, cluster=job.cluster, job_id=job.job_id, first_seen_s=now_s
            )
            # storable as it is (its snapshot is stored by ``update_job``)
            row.name, row.user, row.status = job.name, job.user, job.status.value
            row.active, row.state, row.last_seen_s = job.status.is_active, {}, now_s
            log.info(
                "new job %s/%s/%s (%s, %d GPUs, %s)",
                job.scheduler,
                job.cluster,
                job.job_id,
                job.name,
                job.num_gpus,
                job.status,
            )
        elif not row.active and job.status.is_active and row.ended_s is not None:
            row.ended_s = None  # a requeued job comes back under its old id
        merged.append((row, job, new))
    gone: list[JobRow] = []
    for job_id, row in existing.items():
        if row.active and job_id not in seen:
            # Gone from the scheduler's active list and not in its accounting window (a
            # Kubernetes job deleted when it finished, Slurm without accounting past
            # MinJobAge): ended as its last snapshot, so that its log is read to its end and
            # it is finished and learnt from like a job the scheduler reported ended (a queued
            # one has neither log nor run: ended as it is)
            last = stored_job_state(row)
            if last is None or last.status == JobStatus.PENDING:
                gone.append(row)
            else:
                merged.append(
                    (row, replace(last, status=JobStatus.UNKNOWN, end_time_s=None), False)
                )
                log.info(
                    "job %s/%s/%s no longer reported: ended", row.scheduler, row.cluster, job_id
                )
    memos = [memo_of(deps, row, job) for row, job, _ in merged]
    if read_texts is not None:
        reads = described_reads(deps, merged, memos)
        if reads:
            read_texts(reads, deps.settings.max_scenario_file_bytes)
    read_ahead = getattr(deps.reader, "read_ahead", None)  # a reader may read many at once
    if read_ahead is not None:
        read_ahead(log_reads(merged, memos, quiet))
    uow.read_samples_ahead(sample_reads(merged, memos, quiet), limit=ETA_SAMPLE_WINDOW)
    for (row, job, new), memo in zip(merged, memos, strict=True):
        basis = update_job(
            deps,
            uow,
            read_text,
            row,
            job,
            now_s=now_s,
            touched=touched,
            quiet_logs=quiet,
            new=new,
            memo=memo,
        )
        staged.append((row, job, basis))

    for row in gone:  # queued, or a snapshot stored by another version
        row.active = False
        row.status = JobStatus.UNKNOWN.value
        row.ended_s = now_s
        log.info("job %s/%s/%s no longer reported: ended", row.scheduler, row.cluster, row.job_id)
    uow.touch_jobs(touched, last_seen_s=now_s)
    uow.delete_ended_jobs(ended_before_s=now_s - retention_s)
    for row, job, basis in staged:
        deps.memo.stage(row, job, basis)


def memo_of(deps: IngestDeps, row: JobRow, job: JobState) -> tuple[JobMemo | None, bool]:
    """The job's memo (``IngestMemo.get``) and whether ``job`` is the snapshot it stored: the
    job did not change since this process's last cycle (mostly the very object: a source keeps
    an unchanged job's, ``adapters.slurm``; compared field by field otherwise)."""
    memo = deps.memo.get(row)
    return memo, memo is not None and (memo.job is job or memo.job == job)


def described_reads(
    deps: IngestDeps,
    merged: Sequence[tuple[JobRow, JobState, bool]],
    memos: Sequence[tuple[JobMemo | None, bool]],
) -> list[tuple[str, JobState]]:
    """The first file that describing each launch of ``merged`` reads, for the jobs this cycle
    describes (changed since the last cycle, with a new description key: ``update_job``), one
    job per launch (the others reuse its description, ``IngestDeps.descriptions``): the
    scenario file its comment names, else the script a command-only launch runs (a batch job
    whose script is not fetched yet: the launch reader looks for the file, ``planner.launch``'s
    ``is_script``). ``(path, job)`` pairs, read as ``job``'s own reads would be: a first cycle
    of 10,000 jobs reads 8,000 such files, each else a hand-off to a reader thread."""
    reads: list[tuple[str, JobState]] = []
    launches: set[tuple[str, ...]] = set()
    for (row, job, _), (_, unchanged) in zip(merged, memos, strict=True):
        if unchanged:
            continue  # not described again
        key = description_key(job)
        if key == row.description_key or not (job.status.is_active or not row.description_key):
            continue
        launch = (key, job.scheduler, job.cluster, job.user, str(job.num_nodes))
        if launch in launches:
            continue
        launches.add(launch)
        path = scenario_path_from_comment(job)
        if path is None and not job.batch_script and job.command:
            word = job.command.strip()
            script = posixpath.isabs(word) and len(word.split()) == 1  # one word: no spaces
            path = word if script and word.endswith(SCRIPT_SUFFIXES) else None
        if path is not None:
            reads.append((path, job))
    return reads


def log_reads(
    merged: Sequence[tuple[JobRow, JobState, bool]],
    memos: Sequence[tuple[JobMemo | None, bool]],
    quiet: frozenset[str],
) -> list[tuple[TailCursor, JobState]]:
    """The logs ``update_job`` reads this cycle (``tail_log``: a started job's log that is not
    known to be quiet, the log of a job that ended this cycle, an ended job's log not yet read
    to its end), each as ``(cursor, job)`` as it will read it: the job whose working
    directory it is read under, the cursor its row stores for that path."""
    reads: list[tuple[TailCursor, JobState]] = []
    for (row, job, new), (_, unchanged) in zip(merged, memos, strict=True):
        was_active = True if new or row.id is None else row.active
        active = row.active if unchanged else job.status.is_active
        state = row.state or {}
        path = job.stdout_path or text(state.get("stdout_path"))
        if not path or job.status == JobStatus.PENDING:
            continue
        if active or was_active:
            if path in quiet and active:  # an ended job's is read as complete, quiet or not
                continue
        elif path in quiet or not log_unfinished(row, path):
            continue
        doc = {k: v for k, v in (row.log_cursor or {}).items() if k != "error"}
        # the cursor ``tail_log`` reads from, the job it reads as
        reads.append((resumed_cursor(doc, path), log_owner(row, job)))
    return reads


def log_owner(row: JobRow, job: JobState) -> JobState:
    """The job whose file the log is read as: ``job``, with the working directory it ran in
    when its snapshot lacks one (an ended job's accounting record may: its log is still read
    under that directory)."""
    return job if job.work_dir else replace(job, work_dir=text((row.state or {}).get("work_dir")))


def log_unfinished(row: JobRow, path: str) -> bool:
    """Whether the log at ``path`` of the ended job ``row`` was not read to its end when the
    job ended (its stored cursor, without an error, stops before the size it saw: a backlog
    longer than one read, ``Settings.max_log_bytes_per_cycle``): it is read on as complete,
    one read a cycle while its scheduler still reports the job, until a read reaches its end
    and gives what the log held (``ProgressReader.read``'s ``final``)."""
    doc = row.log_cursor or {}
    if "error" in doc or doc.get("path") != path:
        return False
    offset, size = doc.get("offset_bytes"), doc.get("size_bytes")
    return isinstance(offset, int) and isinstance(size, int) and offset < size


def sample_reads(
    merged: Sequence[tuple[JobRow, JobState, bool]],
    memos: Sequence[tuple[JobMemo | None, bool]],
    quiet: frozenset[str],
) -> list[JobRow]:
    """The stored jobs whose step samples ``update_job`` is likely to read this cycle (what
    new ones join, ``progress.store_records``; what an ETA is fitted to, ``planner.service.
    loops.eta``): jobs active until now that started or made progress before (a pending job
    without progress reads none), changed since the last cycle or with a log to read (an
    unchanged job without new progress keeps its ETA, mostly)."""
    rows: list[JobRow] = []
    for (row, job, new), (_, unchanged) in zip(merged, memos, strict=True):
        if new or row.id is None or not (row.active or job.status.is_active):
            continue
        if job.status == JobStatus.PENDING and not row.progress_history:
            continue
        path = job.stdout_path or text((row.state or {}).get("stdout_path"))
        if unchanged and (not path or path in quiet):
            continue
        rows.append(row)
    return rows


def quiet_logs(
    deps: IngestDeps, rows: dict[str, JobRow], snapshot: ClusterSnapshot
) -> frozenset[str]:
    """The logs of ``snapshot``'s started jobs that did not change since their stored cursor
    (``ProgressReader.unchanged``: one look at all of them, nothing read), so that
    :func:`tail_log` reads none of them: a cluster's thousands of running jobs mostly printed
    nothing since the last cycle, and each read is a hand-off to a reader thread (the job-file
    rule's bound on a hung file system). A cursor that kept an error is left out (its log is
    read again, and the error cleared once it reads)."""
    cursors: list[TailCursor] = []
    for job in snapshot.jobs:
        row = rows.get(job.job_id)
        if row is None or job.status == JobStatus.PENDING or not row.log_cursor:
            continue
        doc = row.log_cursor
        path = job.stdout_path or text((row.state or {}).get("stdout_path"))
        if "error" in doc or not path or doc.get("path") != path:
            continue
        try:
            cursors.append(stored_cursor(doc))
        except TypeError:  # a cursor stored by another version: read it as usual
            continue
    return frozenset(deps.reader.unchanged(cursors))


def estimate_again(
    deps: IngestDeps,
    uow: UnitOfWork,
    rows: list[JobRow],
    snapshot: ClusterSnapshot,
    *,
    now_s: float,
) -> None:
    """The ETAs of pending jobs whose prediction changed after :func:`merge_jobs` estimated
    them (the node history's expected straggler term: ``planner.service.loops.node_history``),
    made again in the same cycle, and their memos with them: the ETA a cycle stores is made
    from the prediction it stores (otherwise the next cycle estimates every such job again:
    2,300 of a 10,000-job cluster's pending jobs after its first cycle)."""
    jobs = {job.job_id: job for job in snapshot.jobs}
    knowledge = knowledge_version(uow)
    for row in rows:
        job = jobs.get(row.job_id)
        if job is None or not row.active:
            continue
        staged = deps.memo.staged.get((row.scheduler, row.cluster, row.job_id))
        if staged is not None and same_eta_inputs(staged.basis.prediction, row.prediction):
            # only what the term says about itself changed (the cluster's node count after a
            # drain, the episodes behind a neutral term): the ETA made from the prediction
            # before is the one this prediction gives; it stays, made from this prediction
            deps.memo.stage(row, job, replace(staged.basis, prediction=row.prediction))
            continue
        update_eta(uow, row, job, now_s=now_s, default_log_sd=deps.settings.model_prior_log_sd)
        deps.memo.stage(row, job, EtaBasis(prediction=row.prediction, knowledge_s=knowledge))


#: The prediction's entries an ETA does not read beyond the straggler factor
#: (``planner.service.loops.eta.straggler_factor``): the term itself and the step time with it.
_TERM_ENTRIES = ("expected_straggler", "iteration_time_with_stragglers_s")


def same_eta_inputs(
    before: Mapping[str, object] | None, after: Mapping[str, object] | None
) -> bool:
    """Whether a pending job's ETA made from the prediction ``before`` is the one ``after``
    gives: equal but for the expected straggler term's entries, and an equal factor."""
    if before is None or after is None:
        return before is after
    if _term_factor(before) != _term_factor(after):
        return False
    keys = (set(before) | set(after)).difference(_TERM_ENTRIES)
    return all(before.get(key) == after.get(key) for key in keys)


def _term_factor(prediction: Mapping[str, object]) -> object:
    term = prediction.get("expected_straggler")
    return term.get("factor") if isinstance(term, Mapping) else None


def update_job(
    deps: IngestDeps,
    uow: UnitOfWork,
    read_text: ReadText,
    row: JobRow,
    job: JobState,
    *,
    now_s: float,
    touched: list[JobRow] | None = None,
    quiet_logs: frozenset[str] = frozenset(),
    new: bool = False,
    memo: tuple[JobMemo | None, bool] | None = None,
) -> EtaBasis:
    """Bring one stored job up to date with its snapshot ``job``. With ``touched``, a job
    unchanged since this process's last cycle (``planner.service.loops.incremental``) keeps
    its stored snapshot, and an ended one is appended there for its ``last_seen_s`` (an active
    one is seen at every poll of its source: its row is not rewritten for that).
    ``quiet_logs``: logs known not to have changed since their cursor (:func:`quiet_logs`:
    not read). ``new``: the row was created this cycle (counted as active until now, as a row
    without an id is, so that a job first seen ended has its log read and is finished).
    ``memo``: what :func:`memo_of` gave for the job, when the caller looked it up already.
    Returns what its ETA is made from."""
    kept_memo, unchanged = (None, False) if touched is None else memo or memo_of(deps, row, job)
    was_active = True if new or row.id is None else row.active
    if unchanged and touched is not None:
        if not row.active:  # an active job was seen at its source's last poll (API: job_view)
            touched.append(row)
    else:
        _store_snapshot(deps, uow, read_text, row, job, now_s=now_s)

    rank_records: list[RankStepRecord] = []
    before = (row.progress_mark, row.progress_history, row.iteration, row.train_iters)
    # the service estimated the job before it ended; a job first seen ended (the scheduler's
    # accounting window when the service starts) is learnt from, not fed to the online
    # calibration (``final_eta``'s ``seen_running``)
    seen_running = row.eta is not None and row.eta.get("seen_running") is not False
    stdout_path = job.stdout_path or text(row.state.get("stdout_path"))
    reads_on = bool(
        stdout_path
        and not (row.active or was_active)
        and job.status != JobStatus.PENDING
        and stdout_path not in quiet_logs
        and log_unfinished(row, stdout_path)
    )
    if (row.active or was_active) and job.status != JobStatus.PENDING:
        if stdout_path:
            # a job that ended has its log read as complete, also a quiet one: what its parser
            # held for lines to come is given now
            final = not row.active
            if final or stdout_path not in quiet_logs:
                owner = log_owner(row, job)
                rank_records += tail_log(
                    deps, uow, row, owner, stdout_path, now_s=now_s, final=final
                )
            witness_log(deps, uow, read_text, row, job, path=stdout_path, now_s=now_s)
        rank_records += read_telemetry(deps, uow, row, job, now_s=now_s)
        reported_progress(uow, row, job, now_s=now_s)
    elif reads_on and stdout_path:  # read on to its end (log_unfinished)
        owner = log_owner(row, job)
        rank_records += tail_log(deps, uow, row, owner, stdout_path, now_s=now_s, final=True)
    after = (row.progress_mark, row.progress_history, row.iteration, row.train_iters)
    progressed = any(a is not b and a != b for a, b in zip(before, after, strict=True))

    knowledge_s = knowledge_version(uow)
    if row.active:
        kept = (
            _kept_basis(kept_memo, row, now_s, knowledge_s)
            if unchanged and not progressed
            else None
        )
        if kept is not None and refresh_eta(uow, row, job, now_s=now_s):
            basis = kept  # the memo's: its memo stays as it is (``IngestMemo.stage``)
        else:
            update_eta(uow, row, job, now_s=now_s, default_log_sd=deps.settings.model_prior_log_sd)
            basis = EtaBasis(prediction=row.prediction, knowledge_s=knowledge_s)
    else:
        basis = EtaBasis(prediction=row.prediction, knowledge_s=knowledge_s)
        if (was_active or reads_on) and progressed:  # the ETA its log measures
            final_eta(
                uow,
                row,
                job,
                now_s=now_s,
                default_log_sd=deps.settings.model_prior_log_sd,
                seen_running=seen_running,
            )
        elif was_active and row.eta is not None:
            row.eta = {**row.eta, "finished": True}  # final state: nothing remains
    if was_active and not row.active:
        finish_job(uow, row, job, now_s=now_s)
        record_finished_run(uow, row, config=deps.learning.config, now_s=now_s)
    elif reads_on and progressed:  # the run as more of its log measures it
        record_finished_run(uow, row, config=deps.learning.config, now_s=now_s)
    if rank_records or (row.active and (row.stragglers or {}).get("state")):
        update_stragglers(row, rank_records, now_s)
    analyse_trace(
        deps.traces, row, job, now_s=now_s, interval_s=deps.settings.trace_analysis_interval_s
    )
    read_gpus(deps.gpus, row, job, now_s=now_s)
    return basis


def _kept_basis(
    memo: JobMemo | None, row: JobRow, now_s: float, knowledge_s: float | None
) -> EtaBasis | None:
    """What an unchanged job's ETA stays made from, when it need not be estimated again
    (``planner.service.loops.incremental``; ``knowledge_s``: the version of the ETA knowledge
    now); None: estimate it."""
    kept = None if memo is None else memo.basis
    # mostly the very dict the kept row holds: compared key by key only when it is not
    if kept is None or (
        kept.prediction is not row.prediction and kept.prediction != row.prediction
    ):
        return None
    if kept.knowledge_s == knowledge_s or (
        row.status == JobStatus.PENDING.value and not row.progress_history
    ):  # a pending job's runtime does not depend on the knowledge (``eta.refresh_eta``)
        return kept
    stale_since = now_s if kept.stale_since_s is None else kept.stale_since_s
    if now_s - stale_since >= knowledge_delay_s(row.job_id):
        return None
    return replace(kept, stale_since_s=stale_since)


def _store_snapshot(
    deps: IngestDeps,
    uow: UnitOfWork,
    read_text: ReadText,
    row: JobRow,
    job: JobState,
    *,
    now_s: float,
) -> None:
    """Store the job's snapshot (name, user, status, ``state``, ``last_seen_s``, end) and
    describe it again when what its description depends on changed."""
    row.name = job.name
    row.user = job.user
    row.status = job.status.value
    row.active = job.status.is_active
    previous = row.state or {}
    row.state = job_state_dict(job)
    if not row.active:  # an ended job keeps what the accounting of finished jobs leaves out
        for key in _KEPT_WHEN_ENDED:
            if not row.state.get(key) and previous.get(key):
                row.state[key] = previous[key]
    row.last_seen_s = now_s
    if not row.active and row.ended_s is None:
        row.ended_s = job.end_time_s or now_s

    key = description_key(job)
    if key != row.description_key and (row.active or not row.description_key):
        # an ended job keeps what it was: the scheduler's accounting of a finished job (sacct)
        # lacks its command and script, which would describe it as nothing
        describe(deps, uow, read_text, row, job, key=key, now_s=now_s)


LOG_HEAD_BYTES = 256 * 1024
"""How much of a job's log is read as the witness of its configuration (frameworks print it
at start: ``planner.launch.witness`` reads no more than this either)."""


def witness_log(
    deps: IngestDeps,
    uow: UnitOfWork,
    read_text: ReadText,
    row: JobRow,
    job: JobState,
    *,
    path: str,
    now_s: float,
) -> None:
    """Describe a job described from its launch once more when its log has begun: what the
    framework printed of its resolved configuration fills what the launch left open and is
    checked against it. Once per job (``description_facts.log_read``); the log is read under
    the job-file rules, its head only."""
    facts = row.description_facts
    if facts is None or facts.get("log_read") or not (row.log_cursor or {}).get("offset_bytes"):
        return
    try:
        head = read_text(path, LOG_HEAD_BYTES, job=job, head=True)
    except PlannerError as exc:
        row.description_facts = {**facts, "log_read": True}
        log.info("job %s: its log is not read as a witness: %s", row.job_id, exc)
        return
    describe(deps, uow, read_text, row, job, key=row.description_key, now_s=now_s, log_text=head)


def describe(
    deps: IngestDeps,
    uow: UnitOfWork,
    read_text: ReadText,
    row: JobRow,
    job: JobState,
    *,
    key: str,
    now_s: float,
    log_text: str | None = None,
) -> None:
    """Work out what the job trains and predict it (``planner.service.describe``); a new
    prediction starts from what the cluster's jobs taught the online calibration. ``log_text``:
    the head of the job's log, read as a witness of its configuration."""
    max_bytes = deps.settings.max_scenario_file_bytes
    # the log's head is the job's own; without it, a launch many jobs share is described once
    shared = (key, job.scheduler, job.cluster, job.user, str(job.num_nodes))
    kept = deps.descriptions.get(shared) if log_text is None else None
    if kept is None:
        description = describe_job(
            job, lambda path: read_text(path, max_bytes, job=job), log_text=log_text
        )
        schedule = training_schedule(job)
        if log_text is None:
            deps.descriptions.put(shared, description, schedule)
    else:
        description, schedule = kept
    row.description_key = key
    row.described_by = description.described_by
    row.description_detail = description.error or description.detail
    row.scenario = description.document
    row.description_facts = description.facts
    row.prediction = description.prediction
    ckey = (
        key_from_scenario(job.scheduler, job.cluster, description.document)
        if description.document is not None and description.prediction is not None
        else None
    )
    if ckey is not None and description.prediction is not None:
        try:
            row.prediction = online_calibration(deps, uow).apply(description.prediction, ckey)
        except PlannerError as exc:
            log.warning("job %s: prediction not calibrated: %s", job.job_id, exc)
        row.prediction = calibrate_prediction(
            deps.learning,
            uow,
            scheduler=job.scheduler,
            cluster=job.cluster,
            document=description.document or {},
            online=row.prediction or description.prediction,
        )
    if description.train_iters is not None:
        row.train_iters = description.train_iters
    row.schedule = schedule
    if description.error:
        log.warning("job %s: cannot use its description: %s", job.job_id, description.error)
    if description.prediction is not None:
        uow.add_prediction(row, kind="model", made_at_s=now_s, payload=description.prediction)


#: The fields of a job's stored snapshot: all but the batch script (it can be large and the
#: description keeps what matters) and the Kubernetes object (kept in the description, when it
#: told anything).
_STATE_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(JobState)
    if f.name not in {"batch_script", "launch_manifest"}
)


def job_state_dict(job: JobState) -> dict[str, object]:
    """The stored snapshot of a job (JSON-safe): its fields but the batch script and the
    Kubernetes object, the status as its value and the node list as a list. Every field of a
    ``JobState`` is immutable (text, numbers, a tuple of text): taken as it is, without
    ``dataclasses.asdict``'s deep copy (a twentieth of the time, for each of a cluster's jobs)."""
    state = {name: getattr(job, name) for name in _STATE_FIELDS}
    state["status"] = job.status.value
    state["node_list"] = list(job.node_list)
    return state
