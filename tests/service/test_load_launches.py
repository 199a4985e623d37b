"""The fake Slurm of ``benchmarks/load.py`` launches its jobs in every style the planner's launch
readers describe (``benchmarks/fake_launches.py``): each job's batch script, fetched through the
real Slurm adapter, and the config files it names in the job's working directory are described
by the style's reader, with a prediction, as the service describes them at ingest."""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

from adapters.logs import LogTailer
from adapters.slurm import SlurmSource
from benchmarks.fake_launches import STYLES
from benchmarks.fake_slurm import FakeSlurm
from planner.service.describe import describe_job
from planner.service.loops import IngestLoop
from planner.service.store.sql import SqlStore
from planner.specs.job import JobState

from .conftest import Clock

T0 = 1_800_000_000.0
PER_STYLE = 2


def test_every_launch_style_of_the_fake_cluster_is_described_by_its_reader(
    cluster_root: Path,
) -> None:
    clock = Clock(T0)
    fake = FakeSlurm(
        cluster_root / "cluster", jobs=160, nodes=30, gpus=800, users=12, seed=3, clock=clock
    )
    fake.populate()
    styles = fake.styles()
    counts = Counter(style for style, _ in styles.values())
    assert set(STYLES) | {"scenario_file", "megatron"} <= set(counts)
    assert 35 <= counts["scenario_file"] <= 75  # a third of the jobs, as before

    source = SlurmSource(
        bin_dir=str(fake.bin_dir),
        allowed_file_roots=[str(fake.shared)],
        max_script_fetches=100_000,
        clock=clock,
    )
    snapshot = source.snapshot()
    assert fake.fetched()  # the scripts came through ``scontrol write batch_script``
    described: Counter[str] = Counter()
    for job in snapshot.jobs:
        style = styles[job.job_id][0]
        if not job.status.is_active or style in ("scenario_file", "megatron"):
            continue
        if described[style] == PER_STYLE:
            continue
        assert job.batch_script is not None
        description = describe_job(job, functools.partial(_read, source, job))
        reader = STYLES[style]
        detail = (style, job.job_id, description.error or description.detail)
        if reader is None:
            assert description.described_by == "none", detail
            assert description.prediction is None
        else:
            assert description.described_by == reader, detail
            assert description.error is None, detail
            assert description.prediction is not None, detail
            assert description.train_iters == fake_iters(fake, job.job_id), detail
        described[style] += 1
    assert described == dict.fromkeys(STYLES, PER_STYLE)


def fake_iters(fake: FakeSlurm, job_id: str) -> int:
    """The iterations the fake job runs (every style states them on its command line)."""
    (job,) = [j for j in fake.jobs.values() if fake.display_id(j) == job_id]
    return job.train_iters


def _read(source: SlurmSource, job: JobState, path: str) -> str:
    return source.read_text_file(path, 1 << 20, job=job)


def test_the_files_a_cycle_describes_launches_from_and_its_logs_are_read_in_one_hand_off(
    cluster_root: Path, file_handoffs: list[tuple[str, str]]
) -> None:
    """A cycle reads the scenario file each job's comment names, and the script each
    command-only launch runs (its batch script not fetched yet), in one hand-off to a reader
    thread, and the logs of its running jobs in another, instead of one per file; what it
    stores of every job, over cycles that see the logs grow, is what it stores when each job
    reads its files itself."""
    handoffs = file_handoffs
    stored = []
    for batched in (True, False):
        clock = Clock(T0)
        root = cluster_root / f"batched-{batched}"
        fake = FakeSlurm(root, jobs=160, nodes=30, gpus=800, users=12, seed=3, clock=clock)
        fake.populate()
        source = SlurmSource(
            bin_dir=str(fake.bin_dir), allowed_file_roots=[str(fake.shared)], clock=clock
        )
        logs = LogTailer(allowed_file_roots={"slurm": [str(fake.shared)]})
        if not batched:
            source.read_text_files = None  # type: ignore[assignment,method-assign]
            logs.read_ahead = None  # type: ignore[assignment,method-assign]
        store = SqlStore(f"sqlite:///{root / 'planner.db'}")
        store.migrate()
        loop = IngestLoop(store, [source], logs, clock=clock)
        for cycle in range(3):
            if cycle:
                clock.now += 60.0
                fake.advance()
            handoffs.clear()
            assert loop.run_cycle().all_ok
            # the scenario files (in a home's scenarios/ or the shared projects), the scripts
            # and the logs; the config files a fetched batch script names are read as the
            # launch reader asks for them
            alone = [
                p
                for where, p in handoffs
                if p.endswith(".sbatch")
                or (where == "logs" and p.endswith(".out"))  # not a log's head: its witness
                or "/scenarios/" in p
                or p.startswith(str(fake.shared))
            ]
            batches = [int(p.split()[0]) for _, p in handoffs if p.endswith(" files")]
            if batched:
                assert alone == []
                if cycle == 0:
                    assert len(batches) == 2
                    assert min(batches) > 20  # the running jobs' logs
                    assert max(batches) > 60  # the scenario files and scripts
            else:
                assert len(alone) > (80 if cycle == 0 else 5)
                assert len(batches) == (0 if cycle == 0 else 1)  # the logs' lstat (quiet_logs)
        stored.append(
            {
                row.job_id: (
                    row.described_by,
                    row.description_detail,
                    row.prediction,
                    row.iteration,
                    {k: v for k, v in (row.log_cursor or {}).items() if k != "inode"},
                    row.eta,
                )
                for row in store.list_jobs()
            }
        )
        loop.close()
    assert json.dumps(stored[0], sort_keys=True).replace("batched-True", "X") == json.dumps(
        stored[1], sort_keys=True
    ).replace("batched-False", "X")
