"""Sizing: the smallest capacity addition per GPU type, and its latest date, that meets every
deadline at p90, after setting apart the deadlines that capacity cannot save.

First, the missed deadlines that are no capacity problem are named with their fix
(``not_capacity``): a job that cannot run at all (its reason), and a job whose misses come
mostly from time-limit kills (``stats.CAUSES``) while its p90 runtime is longer than its limit
(raise the limit to the p90 runtime). They are left out of the criterion below; when nothing
else is missed, the answer is 0 GPUs to add.

For each GPU type of the fleet, GPUs are added to its first pool (in whole nodes of the
catalog's ``gpus_per_node``) from the review's start, and the criterion "every deadline met at
p90" (p90 completion <= deadline) is tested by a full Monte Carlo with common random numbers:

1. ``N = 0``: if the criterion holds, nothing is needed.
2. ``N = U``, the GPUs of every queued or planned job that can run on that pool (all of them
   could then start at once): the deadlines still missed are ones this GPU type cannot fix
   (they are reported and left out of the criterion).
3. Bisection on the number of nodes in ``(0, U]``: about ``log2(U / gpus_per_node)`` runs.
4. With that ``N``, bisection on the day of the addition in ``[start, horizon]``: the latest
   date that still meets the criterion.

Assumption (stated, not proven): the criterion is monotone: more GPUs, or the same GPUs
earlier, never make a deadline miss more likely. List scheduling has anomalies where it can
(Graham 1969), and backfill with inaccurate time limits too; the answer is therefore checked
only at the bisection's points, each of which is a real simulation.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterator
from dataclasses import dataclass

from typing_extensions import TypedDict

from planner.capacity.evaluate import Case, Evaluator
from planner.capacity.fleet import CapacityChange, Fleet
from planner.capacity.stats import ScenarioResult

__all__ = ["NotCapacity", "NotCapacityJson", "Sizing", "SizingJson", "not_capacity", "size_fleet"]


class SizingJson(TypedDict):
    """``Sizing.to_dict``: its fields and the answer in words."""

    gpu: str
    pool: str
    gpus_added: int | None
    latest_date_s: float | None
    unfixable: list[str]
    evaluations: int
    answer: str


class NotCapacityJson(TypedDict):
    """``NotCapacity.to_dict``."""

    job: str
    cause: str
    fix: str
    raise_limit_to_s: float | None


@dataclass(frozen=True, slots=True)
class Sizing:
    """The answer for one GPU type.

    ``gpus_added`` is the smallest addition to ``pool`` meeting the criterion (0: met already,
    or every miss is no capacity problem; None: no addition of this type meets it);
    ``latest_date_s`` the latest day (epoch) it may arrive; ``unfixable`` the deadline jobs
    this type cannot save (they miss even when every queued job can start at once);
    ``evaluations`` the Monte Carlo runs spent."""

    gpu: str
    pool: str
    gpus_added: int | None
    latest_date_s: float | None
    unfixable: tuple[str, ...]
    evaluations: int

    def to_dict(self) -> SizingJson:
        """JSON-ready."""
        return {
            "gpu": self.gpu,
            "pool": self.pool,
            "gpus_added": self.gpus_added,
            "latest_date_s": self.latest_date_s,
            "unfixable": list(self.unfixable),
            "evaluations": self.evaluations,
            "answer": self.answer(),
        }

    def answer(self) -> str:
        """The answer in words: ``add 64 GPUs of h100-sxm to h100 by 2025-07-20``, ``0 to
        add``, or that no addition of this type saves the deadlines it misses."""
        if self.gpus_added == 0:
            return "0 to add"
        if self.gpus_added is None:
            return (
                f"no addition of {self.gpu} saves {', '.join(self.unfixable)}: they miss even "
                "when every queued job can start at once"
            )
        day = (
            dt.datetime.fromtimestamp(self.latest_date_s, dt.UTC).strftime("%Y-%m-%d")
            if self.latest_date_s is not None
            else "the start"
        )
        return f"add {self.gpus_added} GPUs of {self.gpu} to {self.pool} by {day}"


@dataclass(frozen=True, slots=True)
class NotCapacity:
    """A missed deadline that no capacity saves: the job, why (``cannot run``, ``time
    limit``) and the fix in words; ``raise_limit_to_s`` the limit that would let one run
    finish (its p90 runtime, seconds; None unless the cause is a time limit)."""

    job: str
    cause: str
    fix: str
    raise_limit_to_s: float | None = None

    def to_dict(self) -> NotCapacityJson:
        """JSON-ready."""
        return {
            "job": self.job,
            "cause": self.cause,
            "fix": self.fix,
            "raise_limit_to_s": self.raise_limit_to_s,
        }


def slurm_duration(seconds: float) -> str:
    """Seconds as a Slurm time limit ``days-hours:minutes:seconds``, rounded up to a minute."""
    minutes = math.ceil(seconds / 60.0)
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def not_capacity(result: ScenarioResult) -> tuple[NotCapacity, ...]:
    """The missed deadlines of ``result`` that capacity cannot save (module docstring)."""
    out = [
        NotCapacity(name, "cannot run", f"{reason}; fix the job (or its what-if) first")
        for name, reason in result.excluded
        if name in result.excluded_with_deadline
    ]
    missed = set(result.misses_at_p90)
    for job in result.jobs:
        limit, runtime = job.time_limit_s, job.runtime_p90_s
        if (
            job.name in missed
            and job.miss_cause == "time limit"
            and limit is not None
            and runtime is not None
            and runtime > limit
        ):
            out.append(
                NotCapacity(
                    job.name,
                    "time limit",
                    f"time limit {slurm_duration(limit)} is shorter than its runtime: raise it "
                    f"to {slurm_duration(runtime)} (p90 runtime); each kill costs the work since "
                    "the last checkpoint, a restart and another queue wait",
                    runtime,
                )
            )
    return tuple(out)


def _with_addition(case: Case, pool: str, gpus: int, at_s: float) -> Case:
    fleet: Fleet = case.fleet
    pools = []
    for p in fleet.pools:
        if p.name == pool and gpus:
            added = CapacityChange(at_s=at_s, delta_gpus=gpus)
            changes = tuple(sorted((*p.changes, added), key=lambda c: c.at_s))
            pools.append(dataclasses.replace(p, changes=changes))
        else:
            pools.append(p)
    return dataclasses.replace(
        case, name=f"+{gpus} {pool}", fleet=dataclasses.replace(fleet, pools=tuple(pools))
    )


def size_fleet(
    evaluator: Evaluator, base: Case, ignore: frozenset[str] = frozenset()
) -> Iterator[Sizing]:
    """One ``Sizing`` per GPU type of ``base.fleet`` (see the module docstring); the jobs in
    ``ignore`` (``not_capacity``) are left out of the criterion."""
    start = evaluator.start_s

    def _misses(result: ScenarioResult) -> set[str]:
        return set(result.misses_at_p90) - ignore

    base_result = evaluator.evaluate([base])[0]
    missed = _misses(base_result)
    workload = evaluator.workload(base)
    horizon_days = max(int(base.fleet.horizon_s // 86400), 1)
    for gpu in dict.fromkeys(p.gpu for p in base.fleet.pools):
        pool_index = next(i for i, p in enumerate(base.fleet.pools) if p.gpu == gpu)
        pool = base.fleet.pools[pool_index]
        spent = evaluator.evaluations
        if not missed:
            yield Sizing(gpu, pool.name, 0, None, (), 0)
            continue
        node = pool.gpus_per_node
        queued = [
            k
            for k in range(workload.num_options)
            if workload.opt_pool[k] == pool_index
            and not math.isfinite(workload.job_start_s[workload.opt_job[k]])
        ]
        bound = int(sum(int(workload.opt_gpus[k]) for k in queued))
        hi = max(math.ceil(bound / node), 1)

        def misses(
            nodes: int, at_s: float = start, *, name: str = pool.name, size: int = node
        ) -> set[str]:
            case = _with_addition(base, name, nodes * size, at_s)
            return _misses(evaluator.evaluate([case])[0])

        unfixable = misses(hi)
        if missed <= unfixable:
            yield Sizing(
                gpu, pool.name, None, None, tuple(sorted(unfixable)), evaluator.evaluations - spent
            )
            continue
        lo = 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if misses(mid) <= unfixable:
                hi = mid
            else:
                lo = mid
        early, late = 0, horizon_days
        if misses(hi, start + late * 86400.0) <= unfixable:
            early = late
        while late - early > 1:
            mid = (early + late) // 2
            if misses(hi, start + mid * 86400.0) <= unfixable:
                early = mid
            else:
                late = mid
        yield Sizing(
            gpu,
            pool.name,
            hi * node,
            start + early * 86400.0,
            tuple(sorted(unfixable)),
            evaluator.evaluations - spent,
        )
