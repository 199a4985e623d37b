"""The per-node slowness history in the store and the expected straggler term of queued jobs:
recorded from live reports, drained nodes forgotten, shown in the prediction, the admission
message and the time-limit hint (applied once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.recommend.admission import advisory_hints, prediction_message
from planner.recommend.time_limit import runtime_hint
from planner.service.loops.eta import update_eta
from planner.service.loops.node_history import update_node_history
from planner.service.loops.publish import outlook_of
from planner.service.store.sql import SqlStore
from planner.specs.job import JobState, JobStatus, NodeState

NOW = 1_800_000_000.0


def _nodes(drained: str = "") -> tuple[NodeState, ...]:
    return tuple(
        NodeState(name=f"n{i}", state="idle+drain" if f"n{i}" == drained else "mixed", num_gpus=8)
        for i in range(10)
    )


@pytest.fixture
def store(tmp_path: Path) -> SqlStore:
    s = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    s.migrate()
    return s


def _seed(store: SqlStore) -> None:
    with store.unit_of_work() as uow:
        running = uow.new_job(scheduler="slurm", cluster="c", job_id="1", first_seen_s=NOW)
        running.status, running.active, running.state = "running", True, {"num_gpus": 16}
        running.last_seen_s = NOW
        running.stragglers = {
            "report": {
                "slowdown": 1.5,
                "stragglers": [{"rank": 3, "node": "n3"}],
                "slow_nodes": [{"node": "n7", "ranks": [8, 9, 10, 11]}],
            }
        }
        queued = uow.new_job(scheduler="slurm", cluster="c", job_id="2", first_seen_s=NOW)
        queued.status, queued.active, queued.last_seen_s = "pending", True, NOW
        queued.state = {"num_gpus": 32, "num_nodes": 0}
        queued.train_iters = 1000
        queued.prediction = {"iteration_time_s": 2.0, "mfu": 0.4, "fits_in_memory": True}
        queued.eta = {"remaining_s": {"p50": 2000.0, "p90": 2400.0}}


def _cycle(store: SqlStore, now_s: float, drained: str = "") -> None:
    with store.unit_of_work() as uow:
        update_node_history(uow, scheduler="slurm", cluster="c", nodes=_nodes(drained), now_s=now_s)


def test_flagged_nodes_become_episodes_that_last_and_drained_nodes_leave(store: SqlStore) -> None:
    _seed(store)
    for minute in range(0, 61, 2):
        _cycle(store, NOW + 60 * minute)
    with store.unit_of_work() as uow:
        episodes = uow.slow_episodes("slurm", "c", since_s=0)
        assert sorted((e.node, e.ranks) for e in episodes) == [("n3", 1), ("n7", 4)]
        assert all(e.last_seen_s - e.started_s == pytest.approx(3600) for e in episodes)
        assert all(e.slowdown == pytest.approx(1.5) for e in episodes)
    _cycle(store, NOW + 3720, drained="n7")
    with store.unit_of_work() as uow:
        assert [e.node for e in uow.slow_episodes("slurm", "c", since_s=0)] == ["n3"]


def test_a_queued_job_gets_the_term_in_its_prediction_hint_and_message(store: SqlStore) -> None:
    _seed(store)
    for minute in range(0, 61, 2):
        _cycle(store, NOW + 60 * minute)
    queued = store.find_jobs("2")[0]
    term = queued.prediction["expected_straggler"]
    # 2 nodes slow 1 h each of 10 nodes x 7 days; a 32-GPU job takes 4 of the 8-GPU nodes.
    p = 2 * 3600 / (10 * 7 * 86400)
    probability = 1 - (1 - p) ** 4
    assert term["job_nodes"] == 4
    assert term["probability"] == pytest.approx(probability)
    assert term["factor"] == pytest.approx(1 + probability * 0.5)
    assert queued.prediction["iteration_time_s"] == 2.0  # the model's own number stays
    assert queued.prediction["iteration_time_with_stragglers_s"] == pytest.approx(
        2.0 * term["factor"]
    )
    outlook = outlook_of(queued)
    assert "expected straggler slowdown +" in prediction_message(outlook)
    assert advisory_hints(outlook).predicted_runtime_s == pytest.approx(2000.0 * term["factor"])
    hint = runtime_hint(outlook)
    assert hint is not None
    # The ETA did not include the term: the hint applies it (rounded up to 5 min).
    assert hint.predicted_runtime_s >= 2000.0 * term["factor"]
    # Once the pending ETA multiplies it in (and says so), the hint does not apply it twice.
    queued.eta = {"remaining_s": {"p50": 2000.0 * 1.2, "p90": 2400.0}, "straggler_factor": 1.2}
    queued.prediction = {**queued.prediction, "expected_straggler": {**term, "factor": 1.2}}
    again = runtime_hint(outlook_of(queued))
    assert again is not None
    assert again.predicted_runtime_s == pytest.approx(2400.0)


def test_no_history_says_so_in_the_message(store: SqlStore) -> None:
    with store.unit_of_work() as uow:
        queued = uow.new_job(scheduler="slurm", cluster="c", job_id="9", first_seen_s=NOW)
        queued.status, queued.active, queued.last_seen_s = "pending", True, NOW
        queued.state = {"num_gpus": 8}
        queued.train_iters = 10
        queued.prediction = {"iteration_time_s": 1.0}
    _cycle(store, NOW)
    queued = store.find_jobs("9")[0]
    assert queued.prediction["expected_straggler"]["factor"] == 1.0
    assert "none" in prediction_message(outlook_of(queued))


def test_the_pending_eta_multiplies_the_term_in_and_says_so(store: SqlStore) -> None:
    _seed(store)
    job = JobState(
        scheduler="slurm", cluster="c", job_id="2", name="q", user="u", status=JobStatus.PENDING
    )
    with store.unit_of_work() as uow:
        queued = next(r for r in uow.jobs_of("slurm", "c") if r.job_id == "2")
        update_eta(uow, queued, job, now_s=NOW, default_log_sd=0.1)
        plain = queued.eta["remaining_s"]["p50"]
        assert queued.eta["straggler_factor"] == 1.0
        queued.prediction = {**queued.prediction, "expected_straggler": {"factor": 1.25}}
        update_eta(uow, queued, job, now_s=NOW + 1.0, default_log_sd=0.1)
        assert queued.eta["straggler_factor"] == 1.25
        assert queued.eta["remaining_s"]["p50"] == pytest.approx(1.25 * plain, rel=1e-6)


def test_the_terms_are_written_in_bulk_not_left_to_the_flush(store: SqlStore) -> None:
    _seed(store)
    with store.unit_of_work() as uow:
        changed = update_node_history(
            uow, scheduler="slurm", cluster="c", nodes=_nodes(), now_s=NOW
        )
        assert [row.job_id for row in changed] == ["2"]
        (queued,) = changed
        assert "expected_straggler" in (queued.prediction or {})
        assert not uow._s.is_modified(queued)  # written already (``UnitOfWork.write_jobs``)
    assert "expected_straggler" in (store.find_jobs("2")[0].prediction or {})
