"""What a cycle does not redo: jobs that share a launch (the same script submitted again and
again) are described once per cycle, each with the same description as if described alone (the
next cycle reads the launch's files afresh); nodes reported as before are not rewritten."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from adapters.logs import LogTailer
from planner.service.describe import JobDescription, describe_job
from planner.service.loops import IngestLoop, jobs
from planner.service.loops.context import LaunchDescriptions
from planner.service.store.sql import SqlStore
from planner.specs.job import ClusterSnapshot, NodeState

from .conftest import Clock, JobFactory, ScriptedSource

SCENARIO = (
    "model: {num_layers: 2, hidden_size: 128, num_attention_heads: 4, seq_length: 128,"
    " vocab_size: 1024}\nhardware: {gpu: h100-sxm, num_gpus: 2}\n"
    "parallelism: {micro_batch_size: 4, global_batch_size: 8}\ntraining: {train_iters: {n}}\n"
)


def test_jobs_sharing_a_launch_are_described_once_per_cycle(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.replace("{n}", "200"))
    described: list[str] = []
    real = describe_job

    def counting(job: Any, read: Any, **kw: Any) -> Any:
        described.append(job.job_id)
        return real(job, read, **kw)

    monkeypatch.setattr(jobs, "describe_job", counting)
    store = SqlStore(db_url)
    store.migrate()
    loop = IngestLoop(store, [source], LogTailer(), clock=clock)
    launch = {
        "comment": f"planner:scenario={scenario}",
        "command": "train.py --eval-interval 50",
        "work_dir": str(tmp_path),
    }
    source.set_jobs(
        make_job(job_id="1", **launch),
        make_job(job_id="2", **launch),
        make_job(job_id="3", **launch, num_gpus=4),  # another launch: described on its own
    )
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert described == ["1", "3"]
    rows = {r.job_id: r for r in store.list_jobs()}
    assert rows["1"].scenario == rows["2"].scenario is not None
    assert rows["1"].train_iters == rows["2"].train_iters == 200
    schedule = rows["1"].schedule
    assert schedule == rows["2"].schedule is not None
    assert schedule is not None
    assert schedule["eval_interval"] == 50
    assert rows["1"].prediction == rows["2"].prediction is not None
    assert rows["1"].description_facts == rows["2"].description_facts

    # the next cycle: the file changed; a new job of the same launch reads it afresh
    scenario.write_text(SCENARIO.replace("{n}", "400"))
    clock.now += 15.0
    source.set_jobs(*(make_job(job_id=i, **launch) for i in ("1", "2", "4")))
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert described == ["1", "3", "4"]
    assert store.find_jobs("4")[0].train_iters == 400


def test_nodes_reported_as_before_are_not_rewritten(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    store = SqlStore(db_url)
    store.migrate()
    loop = IngestLoop(store, [source], LogTailer(), clock=clock)
    nodes = tuple(
        NodeState(name=f"n{i}", state="idle", num_gpus=8, gpu_type="h100", partitions=("gpu",))
        for i in range(3)
    )
    writes: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("UPDATE sources") and "nodes" in statement:
            writes.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    for step, state in enumerate(("idle", "idle", "drain")):
        clock.now += 15.0
        changed = (dataclasses.replace(nodes[0], state=state), *nodes[1:])
        source.answer = ClusterSnapshot(
            scheduler="slurm",
            cluster="test",
            taken_at_s=clock.now,
            jobs=(make_job(),),
            nodes=changed,
        )
        assert loop.run_cycle().results == {"slurm": "ok"}
        (row,) = store.sources()
        assert row.nodes == json.loads(json.dumps([dataclasses.asdict(n) for n in changed]))
        assert len(writes) == [0, 0, 1][step]  # the first cycle inserts; a change is written


def test_a_job_changing_its_description_in_place_changes_no_other_jobs() -> None:
    def made() -> JobDescription:
        return JobDescription(
            described_by="megatron",
            detail="train.sh",
            document={"model": {"num_layers": 2}},
            prediction={"iteration_time_s": 1.5, "breakdown_s": {"compute": 1.0}},
            facts={
                "provenance": {"model.num_layers": "train.sh:3"},
                "assumed": [],
                "unknown": ["training.train_iters"],
                "launch": {},
                "notes": [],
                "log_read": False,
            },
        )

    kept = LaunchDescriptions()
    key = ("digest", "slurm", "test", "alice", "1")
    first = made()
    schedule: dict[str, object] = {"eval_interval": 50}
    kept.put(key, first, schedule)
    # the job described first keeps its own description: its row changes it in place
    assert first.document is not None
    assert first.facts is not None
    first.document["model"] = {"num_layers": 99}
    first.facts["unknown"].append("model.hidden_size")
    schedule["eval_interval"] = 1
    second = kept.get(key)
    assert second == (made(), {"eval_interval": 50})
    assert second is not None
    assert second[0].prediction is not None
    breakdown = second[0].prediction["breakdown_s"]
    assert isinstance(breakdown, dict)
    breakdown["compute"] = 7.0  # the second job's row changes its copy
    assert kept.get(key) == (made(), {"eval_interval": 50})

    # a description of text only is kept as it is (nothing in it can change)
    plain = JobDescription(described_by="none", detail="no command")
    kept.put(key, plain, None)
    assert kept.get(key) == (plain, None)
