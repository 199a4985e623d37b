"""Incremental ingest: what a cycle skips for a job that did not change.

A cycle over 10,000 jobs cannot rebuild, re-estimate and rewrite every job every 15 s. A job is
*unchanged* when the scheduler reports the same ``JobState`` as at this process's previous
cycle and its stored row is still the one this process wrote then (its ``last_seen_s``: another
replica that held the leadership meanwhile makes every job changed once). For an unchanged
job the cycle

- keeps its stored snapshot (``state``), name, user and status as they are (not rebuilt, not
  rewritten) and does not describe it again (its description key cannot have changed); its row
  is not rewritten to say it was seen: an active job is in every good poll of its source (one
  it is not in ends it), so ``/v1/jobs`` gives it its source's last good poll as
  ``last_seen_s``; an ended one (in the accounting's window) is marked seen with the others in
  one statement per 500 (``UnitOfWork.touch_jobs``);
- still reads its log and its telemetry (a running job): new progress re-estimates its ETA;
- without new progress, and with the prediction its ETA was made from, estimates nothing
  again: a pending job's ETA stays (``estimate_pending`` does not depend on the time), a running
  job's ETA is *advanced* (:func:`advance_running_eta`) and written only when that changes it.
  What the cluster's finished jobs taught the ETA (the ``eta`` calibration row, whose
  ``updated_s`` tells a change) reaches an unchanged job's ETA within
  :data:`KNOWLEDGE_REFRESH_S` of the cycle that first saw the change (each job at its own
  offset in that window, :func:`knowledge_delay_s`, so a change does not re-estimate every
  running job in one cycle); new progress applies it at once.

A running job's ETA advanced to ``now`` is exactly the estimate a full pass would make: the fit
of its pace depends only on its observations, history, prediction and knowledge, and its
completion quantiles are ``max(now, last_progress + R)``, which equal ``max(now, previous
completion)`` whether or not the previous one was clamped to its own ``now``. An unclamped
estimate therefore stays as stored: its ``completion_time_s`` holds, and its ``remaining_s`` is
as of its ``made_at_s`` (``eta_remaining_now`` gives the remaining time at any moment, as
``/metrics`` exports it); once the job is overdue (now past a completion quantile) the advanced
estimate is written every cycle, as is one ``HISTORY_MAX_GAP_S`` after the last kept in its
history (the history keeps one such estimate per gap, as before).

Memos are staged during the unit of work and committed only after it commits (``commit``), so
a failed cycle leaves the memos of the last good one.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.service.models import JobRow
from planner.specs.job import JobState

_QUANTILES = ("p10", "p50", "p90")
#: An unchanged job's ETA takes new ETA knowledge within this many seconds (module docstring).
KNOWLEDGE_REFRESH_S = 300.0


def knowledge_delay_s(job_id: str) -> float:
    """How long after it first saw new ETA knowledge an unchanged job's ETA is estimated again
    with it: the job's own fixed offset in ``[0, KNOWLEDGE_REFRESH_S)``."""
    return KNOWLEDGE_REFRESH_S * (zlib.crc32(job_id.encode()) % 1000) / 1000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EtaBasis:
    """What a job's ETA was made from: its prediction, the ``updated_s`` of the cluster's ETA
    knowledge, and (``stale_since_s``) when a cycle first saw newer knowledge (None: it has
    the newest)."""

    prediction: Mapping[str, Any] | None
    knowledge_s: float | None
    stale_since_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobMemo:
    """What this process's last cycle left a job at: the snapshot it stored, the
    ``last_seen_s`` it wrote, and what its ETA was made from."""

    job: JobState
    seen_s: float
    basis: EtaBasis


@dataclass(slots=True)
class IngestMemo:
    """Per process: the memos of the jobs of every source's last good cycle (module
    docstring)."""

    jobs: dict[tuple[str, str, str], JobMemo] = field(default_factory=dict)
    staged: dict[tuple[str, str, str], JobMemo] = field(default_factory=dict)
    sources: set[tuple[str, str]] = field(default_factory=set)

    def get(self, row: JobRow) -> JobMemo | None:
        """The committed memo of the stored job (None: none, or not written by this process
        as it is stored now)."""
        memo = self.jobs.get((row.scheduler, row.cluster, row.job_id))
        if memo is None or row.id is None or memo.seen_s != row.last_seen_s:
            return None
        return memo

    def stage(self, row: JobRow, job: JobState, basis: EtaBasis) -> None:
        """Remember what this cycle leaves ``row`` at (committed with the unit of work): the
        job's memo itself when it holds the same (most jobs of a cycle did not change)."""
        key = (row.scheduler, row.cluster, row.job_id)
        self.sources.add(key[:2])
        seen_s = row.last_seen_s
        memo = self.jobs.get(key)
        if memo is None or memo.job is not job or memo.basis is not basis or memo.seen_s != seen_s:
            memo = JobMemo(job=job, seen_s=seen_s, basis=basis)
        self.staged[key] = memo

    def commit(self) -> None:
        """The staged memos become the memos of their sources (jobs not staged are forgotten)."""
        kept = {k: v for k, v in self.jobs.items() if (k[0], k[1]) not in self.sources}
        kept.update(self.staged)
        self.jobs = kept
        self.discard()

    def discard(self) -> None:
        """Forget what was staged (the unit of work failed)."""
        self.staged = {}
        self.sources = set()


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _completion(eta: Mapping[str, object]) -> list[float] | None:
    completion = eta.get("completion_time_s")
    if not isinstance(completion, Mapping):
        return None
    values = [_num(completion.get(q)) for q in _QUANTILES]
    return None if any(v is None for v in values) else [float(v or 0.0) for v in values]


def advance_running_eta(
    eta: dict[str, object], now_s: float, *, always: bool = False
) -> dict[str, object] | None:
    """A running job's stored ETA advanced to ``now_s`` (module docstring): a new dict with
    ``completion_time_s`` = max(now, previous) per quantile, ``remaining_s`` from now and
    ``made_at_s`` = now (method ``done``: only ``made_at_s``); ``eta`` itself when that would
    move no completion quantile, unless ``always``; None when it cannot be advanced (no
    completion quantiles: estimate it afresh)."""
    if eta.get("method") == "done":
        return {**eta, "made_at_s": now_s} if always else eta
    ends = _completion(eta)
    if ends is None:
        return None
    moved = [max(now_s, end) for end in ends]
    if moved == ends and not always:
        return eta
    return {
        **eta,
        "made_at_s": now_s,
        "completion_time_s": dict(zip(_QUANTILES, moved, strict=True)),
        "remaining_s": {q: end - now_s for q, end in zip(_QUANTILES, moved, strict=True)},
    }


def eta_remaining_now(eta: Mapping[str, object] | None, now_s: float) -> dict[str, float] | None:
    """A running job's remaining time (s, p10/p50/p90) at ``now_s`` from its stored ETA:
    completion minus now, at least 0 (the stored ``remaining_s`` when it has no completion)."""
    if not eta:
        return None
    ends = _completion(eta)
    if ends is None or eta.get("finished"):
        remaining = eta.get("remaining_s")
        if not isinstance(remaining, Mapping):
            return None
        values = {q: _num(remaining.get(q)) for q in _QUANTILES}
        return {q: v for q, v in values.items() if v is not None}
    if eta.get("method") == "done":
        return dict.fromkeys(_QUANTILES, 0.0)
    return {q: max(0.0, end - now_s) for q, end in zip(_QUANTILES, ends, strict=True)}
