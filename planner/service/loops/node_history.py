"""The per-node history of slowness, and the expected straggler term of queued jobs.

After each poll of a source (``planner.service.loops.cycle``):

1. drained or cordoned nodes leave the history (``planner.stragglers.exposure.is_drained``);
2. every running job whose live straggler report flags ranks (``stragglers``, each with its
   node) or slow nodes (``slow_nodes``) extends, per flagged node, its current episode (last
   seen within ``EPISODE_GAP_S``) or starts a new one, with the job's what-if slowdown;
3. every pending job with a prediction gets the expected straggler term for its size
   (``planner.stragglers.exposure.expected_straggler_term``) in its prediction:
   ``prediction["expected_straggler"]`` (the term) and
   ``prediction["iteration_time_with_stragglers_s"]`` (the model's step time x the factor).
   The pending ETA multiplies its step time by ``expected_straggler.factor`` (and records it
   as ``eta["straggler_factor"]``); the admission message and the time-limit hint show and
   apply it (``planner.recommend``).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from planner.errors import PlannerError
from planner.service.models import JobRow, NodeSlownessRow
from planner.service.store import UnitOfWork
from planner.service.stored_json import fields, rows
from planner.specs.job import JobStatus, NodeState
from planner.stragglers.exposure import (
    WINDOW_S,
    StragglerTerm,
    expected_straggler_term,
    is_drained,
)

#: An episode seen again within this many seconds goes on; after a longer gap a new one starts.
EPISODE_GAP_S = 600.0


def flagged_nodes(report: object) -> Counter[str]:
    """Per node, the ranks a live straggler report (a JSON object; anything else flags
    nothing) flags there (stragglers and slow nodes)."""
    counts: Counter[str] = Counter()
    doc = fields(report)
    for item in rows(doc.get("stragglers")):
        node = item.get("node")
        if isinstance(node, str) and node:
            counts[node] += 1
    for item in rows(doc.get("slow_nodes")):
        node = item.get("node")
        if isinstance(node, str) and node:
            ranks = item.get("ranks")
            counts[node] += (len(ranks) if isinstance(ranks, list) else 0) or 1
    return counts


def record_episodes(
    uow: UnitOfWork,
    rows: Sequence[JobRow],
    *,
    scheduler: str,
    cluster: str,
    drained: set[str],
    now_s: float,
) -> list[NodeSlownessRow]:
    """Extend or start the episodes of the nodes flagged in running jobs; returns the
    cluster's episodes of the history window."""
    episodes = uow.slow_episodes(scheduler, cluster, since_s=now_s - WINDOW_S)
    latest = {(e.node, e.job_id): e for e in episodes}
    for row in rows:
        if not row.active or row.status != JobStatus.RUNNING.value:
            continue
        report = fields((row.stragglers or {}).get("report"))
        slowdown = report.get("slowdown")
        if not isinstance(slowdown, int | float) or not math.isfinite(slowdown):
            continue
        for node, ranks in flagged_nodes(report).items():
            if node in drained:
                continue
            episode = latest.get((node, row.job_id))
            if episode is not None and now_s - episode.last_seen_s <= EPISODE_GAP_S:
                seen = episode.last_seen_s - episode.started_s
                step = max(0.0, now_s - episode.last_seen_s)
                if seen + step > 0:
                    episode.slowdown = (episode.slowdown * seen + slowdown * step) / (seen + step)
                episode.last_seen_s = now_s
                episode.ranks = max(episode.ranks, ranks)
                continue
            episode = uow.add_slow_episode(
                scheduler=scheduler,
                cluster=cluster,
                node=node,
                job_id=row.job_id,
                now_s=now_s,
                ranks=ranks,
                slowdown=float(slowdown),
            )
            latest[node, row.job_id] = episode
            episodes.append(episode)
    return episodes


def job_nodes(state: Mapping[str, object], gpus_per_node: float) -> int:
    """Nodes a job asks for: its node count, else its GPUs over the cluster's GPUs per node
    (rounded up), else 0 (unknown)."""
    nodes = state.get("num_nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 0:
        return nodes
    gpus = state.get("num_gpus")
    if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0 and gpus_per_node > 0:
        return max(1, math.ceil(gpus / gpus_per_node))
    return 0


def with_term(prediction: Mapping[str, object], term: StragglerTerm) -> dict[str, object]:
    """The prediction with the term beside the model's numbers (which stay as they are)."""
    result = {**prediction, "expected_straggler": term.to_dict()}
    step = prediction.get("iteration_time_s")
    if isinstance(step, int | float) and not isinstance(step, bool):
        result["iteration_time_with_stragglers_s"] = float(step) * term.factor
    return result


def update_node_history(
    uow: UnitOfWork,
    *,
    scheduler: str,
    cluster: str,
    nodes: Sequence[NodeState],
    now_s: float,
) -> list[JobRow]:
    """Steps 1-3 of the module docstring for one source's cluster; returns the pending jobs
    whose prediction got a new term (their ETAs were made without it)."""
    drained = {n.name for n in nodes if is_drained(n.state)}
    uow.forget_nodes(scheduler, cluster, sorted(drained))
    rows = uow.jobs_of(scheduler, cluster)
    stored = record_episodes(
        uow, rows, scheduler=scheduler, cluster=cluster, drained=drained, now_s=now_s
    )
    episodes = [e.episode() for e in stored if e.node not in drained]
    in_service = [n for n in nodes if not is_drained(n.state)]
    gpus = [n.num_gpus for n in in_service if n.num_gpus > 0]
    gpus_per_node = statistics.median(gpus) if gpus else 0.0
    changes: list[tuple[JobRow, Mapping[str, object]]] = []
    for row in rows:
        if row.status != JobStatus.PENDING.value or row.prediction is None:
            continue
        try:
            term = expected_straggler_term(
                episodes,
                job_nodes=job_nodes(row.state or {}, gpus_per_node),
                cluster_nodes=len(in_service),
                now_s=now_s,
            )
        except PlannerError:
            continue
        updated = with_term(row.prediction, term)
        if updated != row.prediction:
            changes.append((row, {"prediction": updated}))
    # in bulk (``UnitOfWork.write_jobs``): a first cycle of 10,000 jobs gives 2,300 pending
    # jobs a term, rows the flush had to write one by one
    uow.write_jobs(changes)
    return [row for row, _ in changes]
