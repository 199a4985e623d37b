"""One ingest cycle: poll every source, store its jobs and nodes, recalibrate.

Each source is polled on its own: a source that fails (timeout, daemon down, garbage output) is
recorded as failing and the jobs it reported before are left as they were, so the API keeps
serving the last good state and says how old it is; the next successful poll brings everything
up to date. One source's poll is one unit of work (readers see whole cycles).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from planner.errors import SourceError, StoreError
from planner.ports import GpuTelemetry, JobTelemetry, ProgressReader, SchedulerSource, TraceSource
from planner.service.job_fields import bound_snapshot
from planner.service.loops.calibration import recalibrate
from planner.service.loops.collector import CycleCollector
from planner.service.loops.context import IngestDeps, IngestSettings, source_name
from planner.service.loops.jobs import estimate_again, merge_jobs
from planner.service.loops.node_history import update_node_history
from planner.service.loops.queue_forecast import forecast_queue
from planner.service.store import Store
from planner.specs.job import ClusterSnapshot, NodeState

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CycleReport:
    """What one cycle did: per source ``ok`` or the error line."""

    started_s: float
    results: dict[str, str] = field(default_factory=dict)

    @property
    def all_ok(self) -> bool:
        """True when every source answered (or there was none)."""
        return all(v == "ok" for v in self.results.values())


def ingest_source(deps: IngestDeps, source: SchedulerSource, clock: Callable[[], float]) -> None:
    """Poll ``source`` once and store what it reported (the time is read after the poll).
    Raises ``SourceError`` when the source fails, ``StoreError`` when the store does."""
    started = time.perf_counter()
    snapshot = bound_snapshot(  # users type these fields: bounded before anything reads them
        source.snapshot(),
        text_chars=deps.settings.job_text_chars,
        script_chars=deps.settings.max_scenario_file_bytes,
    )
    polled = time.perf_counter()
    now_s = clock()
    deps.descriptions.entries.clear()  # launches are described afresh in each cycle
    try:
        _ingest(deps, source, snapshot, now_s)
    except BaseException:
        deps.memo.discard()  # nothing of this cycle was stored
        raise
    finally:
        deps.descriptions.entries.clear()
    deps.memo.commit()
    done = time.perf_counter()
    deps.cycle_seconds[snapshot.scheduler, snapshot.cluster] = (polled - started, done - started)
    log.info(
        "ingest %s/%s: %d jobs, %d nodes in %.2f s (poll %.2f s)",
        snapshot.scheduler,
        snapshot.cluster,
        len(snapshot.jobs),
        len(snapshot.nodes),
        done - started,
        polled - started,
    )


def _ingest(
    deps: IngestDeps, source: SchedulerSource, snapshot: ClusterSnapshot, now_s: float
) -> None:
    with deps.store.unit_of_work() as uow:
        row = uow.source(source_name(source), scheduler=source.scheduler)
        row.cluster = snapshot.cluster
        row.last_attempt_s = now_s
        row.last_success_s = now_s
        row.last_error = None
        row.consecutive_failures = 0
        row.nodes = node_documents(deps, snapshot.nodes)
        row.warnings = list(snapshot.warnings)
        for warning in snapshot.warnings:
            log.info("source %s: %s", source_name(source), warning)
        merge_jobs(
            deps,
            uow,
            source.read_text_file,
            snapshot,
            now_s=now_s,
            read_texts=getattr(source, "read_text_files", None),  # a source may read many at once
        )
        termed = update_node_history(
            uow,
            scheduler=snapshot.scheduler,
            cluster=snapshot.cluster,
            nodes=snapshot.nodes,
            now_s=now_s,
        )
        estimate_again(deps, uow, termed, snapshot, now_s=now_s)
        recalibrate(deps, uow, scheduler=snapshot.scheduler, cluster=snapshot.cluster, now_s=now_s)
        forecast_queue(deps, uow, snapshot, now_s=now_s)


def node_documents(deps: IngestDeps, nodes: Sequence[NodeState]) -> list[dict[str, object]]:
    """The nodes as the source's row stores them (JSON: a tuple as a list); a node reported
    as it was at the last cycle reuses its document (``IngestDeps.node_documents``: most of a
    cluster's 2,000 nodes do not change between two polls). Each call gives new dicts."""
    kept = deps.node_documents
    made: dict[NodeState, dict[str, object]] = {}
    out = []
    for node in nodes:
        doc = made.get(node) or kept.get(node)
        if doc is None:
            doc = dataclasses.asdict(node)
            doc["partitions"] = list(node.partitions)
        made[node] = doc
        out.append({**doc, "partitions": list(node.partitions)})  # equal to the kept one
    deps.node_documents = made
    return out


def record_failure(deps: IngestDeps, source: SchedulerSource, error: str, *, now_s: float) -> None:
    """Count a failed poll of ``source`` in its health row (logs a store failure)."""
    try:
        with deps.store.unit_of_work() as uow:
            row = uow.source(source_name(source), scheduler=source.scheduler)
            row.last_attempt_s = now_s
            row.last_error = error
            row.consecutive_failures = (row.consecutive_failures or 0) + 1
    except StoreError as exc:
        log.error("cannot record the failure of %s: %s", source_name(source), exc)


def run_cycle(deps: IngestDeps, clock: Callable[[], float]) -> CycleReport:
    """Poll each source once; never raises for a source or store failure (logs it)."""
    report = CycleReport(started_s=clock())
    for source in deps.sources:
        name = source_name(source)
        try:
            ingest_source(deps, source, clock)
        except SourceError as exc:
            report.results[name] = str(exc)
            log.warning(
                "source %s failed, serving last good state: %s",
                name,
                " | ".join(line for line in str(exc).splitlines() if line.strip()),
            )
            record_failure(deps, source, str(exc), now_s=clock())
        except StoreError as exc:
            report.results[name] = str(exc)
            log.error("store failed while ingesting %s: %s", name, exc)
        else:
            report.results[name] = "ok"
    return report


class IngestLoop:
    """The ingest loop of one process: its dependencies, its clock, a lock that serialises
    cycles (the scheduler's thread and a test may both call) and the count of good cycles;
    ``collect``: garbage collection between cycles (``planner.service.loops.collector``; None:
    Python's own, as a process that runs other work beside the loop needs)."""

    def __init__(
        self,
        store: Store,
        sources: Sequence[SchedulerSource],
        reader: ProgressReader,
        *,
        clock: Callable[[], float],
        settings: IngestSettings | None = None,
        traces: TraceSource | None = None,
        telemetry: JobTelemetry | None = None,
        gpus: GpuTelemetry | None = None,
        collect: CycleCollector | None = None,
    ) -> None:
        self.deps = IngestDeps(
            store=store,
            sources=list(sources),
            reader=reader,
            settings=settings or IngestSettings(),
            traces=traces,
            telemetry=telemetry,
            gpus=gpus,
        )
        self.clock = clock
        self.cycles_ok = 0
        self.collect = collect
        self._lock = threading.Lock()

    @property
    def sources(self) -> list[SchedulerSource]:
        """The sources polled."""
        return self.deps.sources

    def run_cycle(self) -> CycleReport:
        """One cycle (:func:`run_cycle`); counts it when every source answered."""
        with self._lock:
            if self.collect is not None:
                self.collect.before_cycle()
            try:
                report = run_cycle(self.deps, self.clock)
            finally:
                if self.collect is not None:
                    self.collect.after_cycle()
            if report.all_ok:
                self.cycles_ok += 1
            return report

    def close(self) -> None:
        """Stop the queue forecast's worker process (``forecast_worker``); unfreeze what
        ``collect`` froze."""
        self.deps.forecaster.close()
        if self.collect is not None:
            self.collect.close()
