"""Live straggler tracking of a running job from its per-rank timings (pure, no I/O).

Input: ``RankStepRecord`` values, one per rank and logging interval (``compute_time_s``: the
rank's forward+backward time per iteration without gradient-synchronisation waits;
``step_time_s``: its wall time per iteration). An interval is used once every rank of the job
has reported it.

* **Detection**: :class:`planner.stragglers.online.StragglerDetector` on the per-rank compute
  times (peers and own history, CUSUM with a 10 % minimum effect).
* **What-if slowdown** (the straggler-free run of Lin et al., OSDI '25, for a synchronous
  data-parallel step): every rank waits for the slowest one at the gradient reduction, so an
  interval's step time would shrink by ``max(compute) - reference`` if the slowest rank computed
  like a typical one; ``reference`` is the median compute of the ranks not flagged (all ranks
  when none is flagged). When ranks are flagged, the straggler-free step is
  ``reference * (1 + overhead)``, with ``overhead`` the median of ``(step - max(compute)) /
  median(compute)`` over the recent intervals in which no rank was flagged: besides
  communication it holds the wait for whichever rank happened to be slowest in each iteration,
  which interval means hide (the mean of a maximum exceeds the maximum of the means) and which a
  straggler-free run still pays. It is kept as a fraction of the typical rank's compute so that
  a load that slows every rank alike between those intervals and the window (a shared host, a
  cluster-wide clock drop) scales it with the window instead of leaving a stale absolute wait.
  The window's own gap after its slowest rank (the communication it pays now) bounds it from
  below: ``reference + max(step - max(compute), reference * overhead)``, as the job's own
  timings show when its communication slows more than its compute (a contended network).
  ``S = mean(actual step) / mean(ideal step)`` over the last ``window`` complete intervals.
* **Impact**: with ``remaining_s`` left at the current pace, ``remaining_s / S`` without the
  straggler; hours lost ``remaining_s (1 - 1/S) / 3600``; the advice names the rank and node.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

import numpy as np

from planner.errors import SpecError
from planner.specs.job import RankStepRecord
from planner.specs.trace import FloatArray
from planner.stragglers.advice import diagnose
from planner.stragglers.nodes import (
    SIGNIFICANCE,
    SlowNode,
    host_wide_nodes,
    median_of_others,
    node_layout,
    node_medians,
    shift_and_error,
)
from planner.stragglers.online import DetectorJson, RankFlag, StragglerDetector
from planner.stragglers.stored import (
    int_key,
    integer,
    mapping,
    number,
    number_list,
    objects,
    section,
)

#: Complete intervals the slowdown is averaged over.
WINDOW = 20
#: Complete intervals kept as evidence for a detector flag: its shift against the other ranks
#: is judged over the intervals since its change point (at least the last ``WINDOW``, at most
#: these), so a straggler the CUSUM found long ago is not dropped because the last ``WINDOW``
#: intervals alone, under heavy noise, cannot tell its shift from chance. Three windows: the
#: failing CI run's straggler stood out after ~40 intervals; each interval kept is one more
#: row of per-rank times in the stored state (an 8,192-rank job: 3.5 -> 6.8 MB from 20 to 60,
#: ``benchmarks/RESULTS.md``).
EVIDENCE_WINDOW = 60
#: Incomplete intervals kept while waiting for the other ranks' lines.
MAX_PENDING = 64
#: Healthy intervals whose overhead (step minus slowest compute, as a fraction of the median
#: rank's compute) is remembered.
HEALTHY_WINDOW = 50
#: The window test (see ``LiveStragglers.flags``): a full window, and a shift this many standard
#: errors out of its noise.
WINDOW_TEST_INTERVALS = WINDOW
WINDOW_SIGNIFICANCE = 6.0


@dataclass(frozen=True, slots=True, kw_only=True)
class IntervalStats:
    """One complete logging interval: its iteration, the step time (slowest rank's wall time per
    iteration, s), and the compute time of the slowest rank and of the reference, s."""

    iteration: int
    step_time_s: float
    max_compute_s: float
    slowest_rank: int
    compute_s: tuple[float, ...]


class StragglerFlag(TypedDict):
    """A flagged rank of a live report (JSON-ready): its ``node`` (None: unknown), the
    ``kind`` of flag (``planner.stragglers.online.RankFlag``), its ``slowdown`` (ratio) and
    the iteration it started (``since_iteration``)."""

    rank: int
    node: str | None
    kind: str
    slowdown: float
    since_iteration: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveStragglerReport:
    """The live what-if result of a job (see the module docstring); times in seconds."""

    slowdown: float
    actual_step_time_s: float
    ideal_step_time_s: float
    num_intervals: int
    stragglers: tuple[StragglerFlag, ...]
    diagnosis: str
    remaining_s: float | None = None
    remaining_ideal_s: float | None = None
    hours_lost: float | None = None
    action: str = "none"
    advice: str = ""
    slow_nodes: tuple[SlowNode, ...] = ()

    def to_dict(self) -> LiveStragglerReportJson:
        """JSON-ready dict (the ``/v1/jobs/{job_id}/stragglers`` body, less the job fields)."""
        return {
            "slow_nodes": list(self.slow_nodes),
            "slowdown": self.slowdown,
            "actual_step_time_s": self.actual_step_time_s,
            "ideal_step_time_s": self.ideal_step_time_s,
            "num_intervals": self.num_intervals,
            "stragglers": list(self.stragglers),
            "diagnosis": self.diagnosis,
            "remaining_s": self.remaining_s,
            "remaining_ideal_s": self.remaining_ideal_s,
            "hours_lost": self.hours_lost,
            "action": self.action,
            "advice": self.advice,
        }


class LiveStragglerReportJson(TypedDict):
    """A ``LiveStragglerReport`` as JSON (``to_dict``): seconds, ratios and hours as there."""

    slow_nodes: list[SlowNode]
    slowdown: float
    actual_step_time_s: float
    ideal_step_time_s: float
    num_intervals: int
    stragglers: list[StragglerFlag]
    diagnosis: str
    remaining_s: float | None
    remaining_ideal_s: float | None
    hours_lost: float | None
    action: str
    advice: str


class IntervalStatsJson(TypedDict):
    """One ``IntervalStats`` as stored."""

    iteration: int
    step_time_s: float
    max_compute_s: float
    slowest_rank: int
    compute_s: list[float]


class LiveStragglersJson(TypedDict):
    """A ``LiveStragglers`` tracker as stored (``to_json``): ranks and iterations as object
    keys are their numbers as text; ``pending`` maps iteration -> rank -> ``[compute_time_s,
    step_time_s or null]``."""

    world_size: int
    detector: DetectorJson
    pending: dict[str, dict[str, list[float | None]]]
    history: list[IntervalStatsJson]
    nodes: dict[str, str]
    last_iteration: int
    healthy_overhead_ratio: list[float]
    node_detector: DetectorJson | None
    window_flags: dict[str, int]


@dataclass(slots=True)
class _Memo:
    """What a tracker computed for its current state (``key``: the state it was computed for;
    None: never): the host-wide node slowdowns, the ranks' relative compute and its error,
    and the flags' evidence by change point."""

    host_wide_key: tuple[int, int, tuple[tuple[int, str], ...]] | None = None
    host_wide: dict[str, float] = field(default_factory=dict)
    relative_key: tuple[int, int] | None = None
    relative: dict[int, float] = field(default_factory=dict)
    relative_error: dict[int, float] = field(default_factory=dict)
    evidence_key: tuple[int, int] | None = None
    evidence: dict[int, tuple[dict[int, float], dict[int, float]]] = field(default_factory=dict)


@dataclass(slots=True)
class LiveStragglers:
    """Mutable tracker of one job; round-trips through :meth:`to_json` / :meth:`from_json`.

    ``world_size`` ranks; feed records with :meth:`add`, read :meth:`report`. Raises
    ``SpecError`` for a record of another world size or an out-of-range rank.
    """

    world_size: int
    detector: StragglerDetector
    pending: dict[int, dict[int, tuple[float, float | None]]] = field(default_factory=dict)
    history: list[IntervalStats] = field(default_factory=list)
    healthy_overhead_ratio: list[float] = field(default_factory=list)
    nodes: dict[int, str] = field(default_factory=dict)
    last_iteration: int = -1
    node_detector: StragglerDetector | None = None
    window_flags: dict[int, int] = field(default_factory=dict)
    _memo: _Memo = field(default_factory=_Memo, compare=False, repr=False)

    @classmethod
    def new(cls, world_size: int) -> LiveStragglers:
        """An empty tracker for ``world_size`` ranks."""
        if world_size < 1:
            raise SpecError("world_size", f"must be >= 1, got {world_size}")
        ranks = tuple(f"rank{r}" for r in range(world_size))
        return cls(world_size=world_size, detector=StragglerDetector(ranks))

    def add(self, records: Sequence[RankStepRecord]) -> None:
        """Take new per-rank records; complete intervals are fed to the detector in order."""
        for rec in records:
            if rec.world_size != self.world_size or not 0 <= rec.rank < self.world_size:
                raise SpecError(
                    "rank_step",
                    f"rank {rec.rank} of world size {rec.world_size} does not fit a job of "
                    f"{self.world_size} ranks",
                )
            if rec.iteration <= self.last_iteration:
                continue  # an interval already used (or given up)
            self.pending.setdefault(rec.iteration, {})[rec.rank] = (
                rec.compute_time_s,
                rec.step_time_s,
            )
            if rec.node:
                self.nodes[rec.rank] = rec.node
        for iteration in sorted(self.pending):
            reports = self.pending[iteration]
            if len(reports) < self.world_size:
                continue
            # Intervals before a complete one will not complete any more: drop them.
            for older in [i for i in self.pending if i <= iteration]:
                if older != iteration:
                    del self.pending[older]
            del self.pending[iteration]
            self._complete(iteration, reports)
        while len(self.pending) > MAX_PENDING:
            del self.pending[min(self.pending)]

    def _complete(self, iteration: int, reports: dict[int, tuple[float, float | None]]) -> None:
        compute = np.array([reports[r][0] for r in range(self.world_size)], dtype=np.float64)
        steps = [reports[r][1] for r in range(self.world_size)]
        known_steps = [s for s in steps if s is not None]
        step = max(known_steps) if known_steps else float(compute.max())
        self.detector.update(compute, step=iteration)
        self._update_nodes(compute, iteration)
        self.history.append(
            IntervalStats(
                iteration=iteration,
                step_time_s=step,
                max_compute_s=float(compute.max()),
                slowest_rank=int(compute.argmax()),
                compute_s=tuple(float(c) for c in compute),
            )
        )
        del self.history[:-EVIDENCE_WINDOW]
        self.last_iteration = iteration
        self._update_window_flags()
        if not self.flags() and not self.slow_nodes():
            typical = float(np.median(compute))
            if typical > 0.0:
                self.healthy_overhead_ratio.append(max(0.0, step - float(compute.max())) / typical)
                del self.healthy_overhead_ratio[:-HEALTHY_WINDOW]

    def _update_nodes(self, compute: FloatArray, iteration: int) -> None:
        """Feed the node detector the interval's per-node median compute (once every rank's
        node is known and the job spans several nodes of several ranks)."""
        names = node_layout(self.nodes, self.world_size)
        if names is None:
            self.node_detector = None
            return
        order = tuple(sorted(set(names)))
        if self.node_detector is None or self.node_detector.ranks != order:
            self.node_detector = StragglerDetector(order)
        self.node_detector.update(node_medians(compute, names, order), step=iteration)

    def _update_window_flags(self) -> None:
        """A rank enters the window flags when its shift over a full window is at least the
        floor and ``WINDOW_SIGNIFICANCE`` standard errors; it stays while the shift is at
        least the floor and ``SIGNIFICANCE`` standard errors (hysteresis: one noisy window
        neither raises nor clears an alert)."""
        relative = self.relative_compute()
        error = self.relative_error()
        floor = 0.9 * math.log1p(self.detector.min_effect_ratio)
        for rank, shift in relative.items():
            noise = error.get(rank, math.inf)
            if rank in self.window_flags:
                if shift < max(floor, SIGNIFICANCE * noise):
                    del self.window_flags[rank]
            elif len(self.window) >= WINDOW_TEST_INTERVALS and shift >= max(
                floor, WINDOW_SIGNIFICANCE * noise
            ):
                self.window_flags[rank] = self.window[0].iteration

    def _host_wide(self) -> dict[str, float]:
        key = (self.last_iteration, len(self.history), tuple(sorted(self.nodes.items())))
        memo = self._memo
        if memo.host_wide_key != key:
            names = node_layout(self.nodes, self.world_size)
            value = (
                {}
                if names is None or not self.history
                else host_wide_nodes(
                    [h.compute_s for h in self.window], names, self.detector.min_effect_ratio
                )
            )
            memo.host_wide_key, memo.host_wide = key, value
        return memo.host_wide

    def flags(self) -> list[RankFlag]:
        """The detector's current flags that are stragglers, one per rank.

        A peer flag wins over an own-history one (the detector lists peer flags first). A flag
        counts only while the rank is also slower than the median of the other ranks by at
        least 90 % of the detector's minimum effect over the recent intervals: a rank whose
        own time drifted, but not away from its peers', holds nobody up.
        The shift must also stand ``SIGNIFICANCE`` standard errors out of its own noise (under
        heavy CPU contention one rank's median over 20 intervals wanders by 0.1 in log space by
        chance), both judged over the intervals since the flag's change point (at least the
        last ``WINDOW``, at most ``EVIDENCE_WINDOW``): under that noise a straggler's last 20
        intervals alone may not stand out, the 40 since the CUSUM found it do. A rank of a
        node whose ranks are all slower than the other nodes' (a host-wide slowdown,
        ``planner.stragglers.nodes``) is not a straggler: its node is.
        """
        relative = self.relative_compute()
        floor = 0.9 * math.log1p(self.detector.min_effect_ratio)
        host_wide = self._host_wide()
        seen: set[int] = set()
        unique = []
        for flag in self.detector.flags():
            shifts, error = self._flag_evidence(flag.since_step)
            shift = shifts.get(flag.rank, 0.0)
            if flag.rank in seen or shift < max(floor, SIGNIFICANCE * error.get(flag.rank, 0.0)):
                continue
            if self.nodes.get(flag.rank) in host_wide:
                continue
            seen.add(flag.rank)
            unique.append(flag)
        # The window test (``_update_window_flags``): a shift far out of the window's noise is
        # a straggler even when the CUSUM, tuned for 10 % shifts, has not crossed its threshold
        # (under heavy noise that threshold is many times the shift of interest).
        for rank, since in sorted(self.window_flags.items()):
            if rank in seen or self.nodes.get(rank) in host_wide:
                continue
            unique.append(
                RankFlag(
                    rank=rank,
                    name=self.detector.ranks[rank],
                    kind="window",
                    slowdown=math.exp(relative.get(rank, 0.0)),
                    since_step=since,
                )
            )
        return unique

    def slow_nodes(self) -> list[SlowNode]:
        """Nodes whose ranks are all slower than the other nodes' (``planner.stragglers.nodes``)
        and that a detector flagged: the node detector, or the rank detector for every one of
        the node's ranks (with two nodes the node detector has no peers to compare with, so a
        node slow from the start is seen through its ranks). Per node: its ranks, the kind of
        flag, the slowdown against the other nodes and the iteration it started."""
        host_wide = self._host_wide()
        if not host_wide:
            return []
        starts: dict[str, tuple[str, int]] = {}
        if self.node_detector is not None:
            for flag in self.node_detector.flags():
                starts.setdefault(flag.name, (flag.kind, flag.since_step))
        rank_flags: dict[int, RankFlag] = {}
        for flag in self.detector.flags():
            rank_flags.setdefault(flag.rank, flag)
        result: list[SlowNode] = []
        for node in sorted(host_wide):
            ranks = sorted(r for r, n in self.nodes.items() if n == node)
            if node not in starts and all(r in rank_flags for r in ranks):
                first = min((rank_flags[r] for r in ranks), key=lambda f: f.since_step)
                starts[node] = (f"ranks-{first.kind}", first.since_step)
            if node in starts:
                kind, since = starts[node]
                result.append(
                    SlowNode(
                        node=node,
                        ranks=ranks,
                        kind=kind,
                        slowdown=host_wide[node],
                        since_iteration=since,
                    )
                )
        return result

    def relative_compute(self) -> dict[int, float]:
        """Per rank, the median over the recent intervals of ``log(compute / median of the
        other ranks' compute)``; empty for a single rank or no history. The median, not the
        mean: on a contended host one rank is descheduled now and then (an interval 2-3x
        slower), and a few such spikes must not make a rank look persistently slower."""
        key = (self.last_iteration, len(self.history))
        memo = self._memo
        if memo.relative_key != key:
            shift, error = self._shift_since(self.window[0].iteration if self.history else 0)
            memo.relative_key, memo.relative, memo.relative_error = key, shift, error
        return memo.relative

    def _shift_since(self, iteration: int) -> tuple[dict[int, float], dict[int, float]]:
        """Per rank, the median ``log(compute / median of the other ranks' compute)`` over the
        kept intervals from ``iteration`` on, and its standard error; empty for one rank."""
        intervals = [h.compute_s for h in self.history if h.iteration >= iteration]
        if self.world_size < 2 or not intervals:
            return {}, {}
        logs = np.log(np.array(intervals, dtype=np.float64))
        shift, error = shift_and_error(logs - median_of_others(logs))
        return (
            {r: float(shift[r]) for r in range(self.world_size)},
            {r: float(error[r]) for r in range(self.world_size)},
        )

    def _flag_evidence(self, since_step: int) -> tuple[dict[int, float], dict[int, float]]:
        """:meth:`relative_compute` and its error over the intervals since a detector flag's
        change point (``EVIDENCE_WINDOW``), or over the window when the change point is newer."""
        if not self.history or since_step >= self.window[0].iteration:
            return self.relative_compute(), self.relative_error()
        key = (self.last_iteration, len(self.history))
        memo = self._memo
        if memo.evidence_key != key:
            memo.evidence_key, memo.evidence = key, {}
        evidence = memo.evidence
        if since_step not in evidence:
            evidence[since_step] = self._shift_since(since_step)
        return evidence[since_step]

    @property
    def window(self) -> list[IntervalStats]:
        """The last ``WINDOW`` complete intervals (the what-if's and the window test's span)."""
        return self.history[-WINDOW:]

    def relative_error(self) -> dict[int, float]:
        """Per rank, the standard error of :meth:`relative_compute` (from the spread of the
        window: on a contended host a shift must stand out of its own noise)."""
        self.relative_compute()
        return self._memo.relative_error

    def report(self, *, remaining_s: float | None = None) -> LiveStragglerReport | None:
        """The what-if slowdown over the last complete intervals, None before the first one.

        ``remaining_s`` (the job's remaining time at its current pace) adds the impact.
        """
        if not self.history:
            return None
        flags = self.flags()
        slow_nodes = self.slow_nodes()
        flagged = {f.rank for f in flags} | {r for n in slow_nodes for r in n["ranks"]}
        overhead = (
            statistics.median(self.healthy_overhead_ratio)
            if flagged and self.healthy_overhead_ratio
            else None
        )
        actual, ideal = [], []
        for interval in self.window:
            others = [c for r, c in enumerate(interval.compute_s) if r not in flagged]
            reference = statistics.median(others or interval.compute_s)
            actual.append(interval.step_time_s)
            if overhead is not None:
                own_gap = interval.step_time_s - interval.max_compute_s
                ideal_s = min(interval.step_time_s, reference + max(own_gap, reference * overhead))
            else:
                ideal_s = interval.step_time_s - max(0.0, interval.max_compute_s - reference)
            ideal.append(max(ideal_s, 1e-12))
        actual_s = float(np.mean(actual))
        ideal_s = float(np.mean(ideal))
        slowdown = max(1.0, actual_s / ideal_s)
        stragglers = tuple(
            StragglerFlag(
                rank=f.rank,
                node=self.nodes.get(f.rank),
                kind=f.kind,
                slowdown=f.slowdown,
                since_iteration=f.since_step,
            )
            for f in flags
        )
        diagnosis, action, advice = diagnose(slowdown, flags, self.nodes, slow_nodes)
        result = LiveStragglerReport(
            slowdown=slowdown,
            actual_step_time_s=actual_s,
            ideal_step_time_s=ideal_s,
            num_intervals=len(self.window),
            stragglers=stragglers,
            diagnosis=diagnosis,
            action=action,
            advice=advice,
            slow_nodes=tuple(slow_nodes),
        )
        if remaining_s is None or not math.isfinite(remaining_s) or remaining_s < 0:
            return result
        ideal_remaining = remaining_s / slowdown
        lost_h = (remaining_s - ideal_remaining) / 3600.0
        gain = _duration_text(remaining_s - ideal_remaining)
        suffix = (
            f" Expected gain: {gain} of the remaining run."
            if (flags or slow_nodes) and gain is not None
            else ""
        )
        return replace(
            result,
            remaining_s=remaining_s,
            remaining_ideal_s=ideal_remaining,
            hours_lost=lost_h,
            advice=advice + suffix,
        )

    # ------------------------------------------------------------------ persistence

    def to_json(self) -> LiveStragglersJson:
        """The tracker as a JSON-ready dict."""
        return {
            "world_size": self.world_size,
            "detector": self.detector.to_json(),
            "pending": {
                str(i): {str(r): list(v) for r, v in reports.items()}
                for i, reports in self.pending.items()
            },
            "history": [
                {
                    "iteration": h.iteration,
                    "step_time_s": h.step_time_s,
                    "max_compute_s": h.max_compute_s,
                    "slowest_rank": h.slowest_rank,
                    "compute_s": list(h.compute_s),
                }
                for h in self.history
            ],
            "nodes": {str(r): n for r, n in self.nodes.items()},
            "last_iteration": self.last_iteration,
            "healthy_overhead_ratio": list(self.healthy_overhead_ratio),
            "node_detector": None if self.node_detector is None else self.node_detector.to_json(),
            "window_flags": {str(r): since for r, since in self.window_flags.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> LiveStragglers:
        """Inverse of :meth:`to_json` (the fields after ``detector`` may be missing: a state
        stored before they existed); raises ``SpecError`` naming the field on a malformed
        document."""
        path = "stragglers"
        history = objects(data, "history", path) if "history" in data else []
        # A state stored before the overhead was kept as a ratio has ``healthy_overhead_s``
        # (absolute seconds, not comparable): it is left out and the ratio is re-learnt from
        # the next healthy intervals.
        overhead = (
            number_list(data, "healthy_overhead_ratio", path)
            if "healthy_overhead_ratio" in data
            else []
        )
        nodes = mapping(data.get("nodes", {}), f"{path}.nodes")
        flags = mapping(data.get("window_flags", {}), f"{path}.window_flags")
        node_detector = data.get("node_detector")
        return cls(
            world_size=integer(data, "world_size", path),
            detector=StragglerDetector.from_json(section(data, "detector", path)),
            pending=_pending(data.get("pending", {}), f"{path}.pending"),
            history=[_interval(h, f"{path}.history[{k}]") for k, h in enumerate(history)],
            nodes={int_key(r, f"{path}.nodes"): str(n) for r, n in nodes.items()},
            last_iteration=(
                integer(data, "last_iteration", path) if "last_iteration" in data else -1
            ),
            healthy_overhead_ratio=[
                _required(v, f"{path}.healthy_overhead_ratio") for v in overhead
            ],
            node_detector=(
                StragglerDetector.from_json(mapping(node_detector, f"{path}.node_detector"))
                if node_detector
                else None
            ),
            window_flags={
                int_key(r, f"{path}.window_flags"): integer(flags, r, f"{path}.window_flags")
                for r in flags
            },
        )


def _interval(stored: Mapping[str, object], path: str) -> IntervalStats:
    """One stored ``IntervalStats``."""
    return IntervalStats(
        iteration=integer(stored, "iteration", path),
        step_time_s=number(stored, "step_time_s", path),
        max_compute_s=number(stored, "max_compute_s", path),
        slowest_rank=integer(stored, "slowest_rank", path),
        compute_s=tuple(
            _required(v, f"{path}.compute_s") for v in number_list(stored, "compute_s", path)
        ),
    )


def _required(value: float | None, path: str) -> float:
    """A number of a stored list that cannot be null."""
    if value is None:
        raise SpecError(path, "stored state is malformed: a number is null")
    return value


def _pending(raw: object, path: str) -> dict[int, dict[int, tuple[float, float | None]]]:
    """The stored ``pending`` intervals: iteration -> rank -> (compute s, step s or None)."""
    out: dict[int, dict[int, tuple[float, float | None]]] = {}
    for i, reports in mapping(raw, path).items():
        at = f"{path}.{i}"
        ranks: dict[int, tuple[float, float | None]] = {}
        for r in mapping(reports, at):
            pair = number_list(mapping(reports, at), r, at)
            if len(pair) != 2 or pair[0] is None:
                raise SpecError(f"{at}.{r}", "stored state is malformed: needs [compute_s, step_s]")
            ranks[int_key(r, at)] = (pair[0], pair[1])
        out[int_key(i, path)] = ranks
    return out


def _duration_text(seconds: float) -> str | None:
    """``42 s``, ``12 min``, ``3.4 h``: a duration in the unit that reads best; None below a
    second (nothing is gained: no line)."""
    if not seconds >= 1.0:
        return None
    if seconds < 120.0:
        return f"{seconds:.0f} s"
    if seconds < 7200.0:
        return f"{seconds / 60.0:.0f} min"
    return f"{seconds / 3600.0:.1f} h"
