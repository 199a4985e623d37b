"""Slurm hints from the service (opt-in): the planner's predictions written back into Slurm.

* ``comment``: a namespaced ``planner:hint=rt:...;eta:...;p90:...`` token in each active job's
  Comment (users' text and other tokens untouched; never AdminComment), rewritten only when it
  changes;
* ``enforce``: also lowers TimeLimit to the predicted runtime plus a margin (the policy of
  ``adapters.slurm.hints.TimeLimitPolicy``: p90 x 1.2 + 10 min, never below elapsed + 10 min,
  never raised), so backfill plans with better estimates;
* ``hints_file``: a local file for the sample ``deploy/slurm/job_submit.lua``, keyed by the
  scenario path and by user + job name of jobs the planner has described, so resubmissions get a
  hint at submit time without any network call from slurmctld.

Only the leader replica writes (the caller checks).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from adapters.slurm import (
    SlurmHint,
    SlurmHintWriter,
    TimeLimitPolicy,
    job_key,
    scenario_key,
    write_hints_file,
)
from planner.errors import PlannerError
from planner.service.models import JobRow
from planner.service.store import Store

log = logging.getLogger(__name__)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


#: Hints are rounded up to this many seconds.
QUANTUM_S = 300.0


def _ceil_to(value: float, quantum: float) -> float:
    return float(math.ceil(value / quantum) * quantum)


def hint_for(row: JobRow) -> SlurmHint | None:
    """The hint of a stored job: runtime from start to end (p50 and p90) and the predicted end,
    rounded up to ``QUANTUM_S``; None without an ETA."""
    eta = row.eta or {}
    state = row.state or {}
    start = _num(state.get("start_time_s"))
    done = eta.get("completion_time_s") or {}
    remaining = eta.get("remaining_s") or {}
    p50, p90, end = None, None, None
    if row.status == "running" and start is not None and _num(done.get("p50")):
        end = float(done["p50"])
        p50 = end - start
        p90 = (_num(done.get("p90")) or end) - start
    elif row.status == "pending" and _num(remaining.get("p50")):
        p50 = float(remaining["p50"])
        p90 = _num(remaining.get("p90"))
    if p50 is None or p50 <= 0:
        return None
    # Quantized so that a hint (and the job's comment) changes only when the prediction moves
    # by minutes, not every ingest cycle.
    p50 = _ceil_to(p50, QUANTUM_S)
    p90 = None if p90 is None else _ceil_to(p90, QUANTUM_S)
    end = None if end is None else _ceil_to(end, QUANTUM_S)
    gpus = state.get("num_gpus")
    try:
        return SlurmHint(
            predicted_runtime_s=p50,
            runtime_p90_s=p90 if p90 and p90 >= p50 else None,
            eta_s=end,
            recommended_gpus=gpus if isinstance(gpus, int) and gpus > 0 else None,
        )
    except PlannerError as exc:
        log.warning("job %s: no Slurm hint: %s", row.job_id, exc)
        return None


class SlurmHintsRuntime:
    """Writes hints after each ingest cycle (see the module docstring)."""

    def __init__(self, writer: SlurmHintWriter | None, *, hints_file: str | None = None) -> None:
        self.writer = writer
        self.hints_file = hints_file

    def after_cycle(self, store: Store) -> None:
        """Write the hints of active Slurm jobs and refresh the hints file; logs failures."""
        active: dict[str, SlurmHint] = {}
        by_key: dict[str, SlurmHint] = {}
        for row in store.list_jobs():
            if row.scheduler != "slurm":
                continue
            hint = hint_for(row)
            if hint is None:
                continue
            if row.active:
                active[row.job_id] = hint
            if row.described_by == "scenario_file" and row.description_detail.startswith("/"):
                by_key[scenario_key(row.description_detail)] = hint
            if row.user and row.name:
                by_key[job_key(row.user, row.name)] = hint
        if self.writer is not None and active:
            try:
                results = self.writer.write_many(active)
            except PlannerError as exc:
                log.warning("Slurm hints not written: %s", exc)
            else:
                for job_id, result in results.items():
                    if result.error:
                        log.warning("Slurm hint for job %s: %s", job_id, result.error)
        if self.hints_file and by_key:
            try:
                write_hints_file(self.hints_file, by_key)
            except (OSError, PlannerError) as exc:
                log.warning("hints file %s not written: %s", self.hints_file, exc)


def build_slurm_hints(
    mode: str, *, hints_file: str | None, timeout_s: float, bin_dir: str | None
) -> SlurmHintsRuntime | None:
    """``mode``: ``off`` (None unless a hints file is asked for), ``comment`` or ``enforce``."""
    writer = None
    if mode in ("comment", "enforce"):
        writer = SlurmHintWriter(
            enforce_time_limit=mode == "enforce",
            policy=TimeLimitPolicy(),
            timeout_s=timeout_s,
            bin_dir=bin_dir,
        )
    if writer is None and not hints_file:
        return None
    return SlurmHintsRuntime(writer, hints_file=hints_file)
