"""The review's Monte Carlo and what-if scenarios as Ray tasks, against a local Ray head that
this test starts on loopback: the same code path as local, the same numbers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from planner.capacity import read_fleet, read_plan, read_snapshot, read_what_ifs, run_review

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="ray is not installed (optional extra [ray])",
    ),
]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "deploy" / "examples"


def _review(executor=None):
    fleet = read_fleet((EXAMPLES / "fleet.yaml").read_text(), "fleet.yaml")
    plan = read_plan((EXAMPLES / "plan.yaml").read_text(), "plan.yaml", fleet)
    snapshot = read_snapshot((EXAMPLES / "jobs-snapshot.json").read_text(), "jobs.json")
    what_ifs = read_what_ifs(
        (EXAMPLES / "what-if-more-h100.yaml").read_text(), "w.yaml", fleet, plan, snapshot
    )
    return run_review(
        fleet,
        plan,
        snapshot,
        what_ifs,
        start_s=fleet.start_s or 0.0,
        samples=60,
        rng=np.random.default_rng(7),
        seed=7,
        executor=executor,
        sizing=False,
    )


def test_ray_executor_gives_the_local_answer():
    from adapters.ray import RayExecutor
    from adapters.ray.local import LocalRayHead

    local = _review()
    with LocalRayHead(port=6391, num_cpus=2, pythonpath=str(REPO)) as head:
        executor = RayExecutor(head.address)
        try:
            assert executor.num_cpus == 2
            remote = _review(executor)
        finally:
            executor.close()
    assert json.dumps(remote.to_dict()) == json.dumps(local.to_dict())
