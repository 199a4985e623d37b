"""Sizing: the smallest capacity addition per GPU type, and its latest date, that meets every
deadline at p90.

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
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from planner.capacity.evaluate import Case, Evaluator
from planner.capacity.fleet import CapacityChange, Fleet
from planner.capacity.stats import ScenarioResult

__all__ = ["Sizing", "size_fleet"]


@dataclass(frozen=True, slots=True)
class Sizing:
    """The answer for one GPU type.

    ``gpus_added`` is the smallest addition to ``pool`` meeting the criterion (0: met already;
    None: no addition of this type meets it); ``latest_date_s`` the latest day (epoch) it may
    arrive; ``unfixable`` the deadline jobs this type cannot save; ``evaluations`` the Monte
    Carlo runs spent."""

    gpu: str
    pool: str
    gpus_added: int | None
    latest_date_s: float | None
    unfixable: tuple[str, ...]
    evaluations: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "gpu": self.gpu,
            "pool": self.pool,
            "gpus_added": self.gpus_added,
            "latest_date_s": self.latest_date_s,
            "unfixable": list(self.unfixable),
            "evaluations": self.evaluations,
        }


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


def _misses(result: ScenarioResult) -> set[str]:
    return set(result.misses_at_p90) | {n for n, _ in result.excluded}


def size_fleet(evaluator: Evaluator, base: Case) -> Iterator[Sizing]:
    """One ``Sizing`` per GPU type of ``base.fleet`` (see the module docstring)."""
    start = evaluator.start_s
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
