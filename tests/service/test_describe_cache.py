"""The service's caches of descriptions (``planner.service.describe``): a launch many jobs share
is described once while the files it read read as they did, a scenario text once however many
files hold it; a changed file, or a job that reads the file otherwise, gets a new description;
every cache is bounded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from planner.errors import SourceError
from planner.launch.describe import LaunchDescription, describe_launch
from planner.launch.types import Launch, LaunchFiles
from planner.service import describe
from planner.service.describe import describe_job, training_schedule
from planner.service.lru import Lru
from planner.specs.job import JobState

from .conftest import JobFactory

JOB_DIR = "/jobs/titan"
COMMAND = (
    "torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file configs/run.toml "
    "--training.steps 2000"
)
SCENARIO = (
    "model: {num_layers: 2, hidden_size: 128, num_attention_heads: 4, seq_length: 128,"
    " vocab_size: 1024}\nhardware: {gpu: h100-sxm, num_gpus: 2}\n"
    "parallelism: {micro_batch_size: 4, global_batch_size: 8}\ntraining: {train_iters: 200}\n"
)


def _config(tensor_parallel: int) -> str:
    return f"""[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
seq_len = 4096
steps = 10000

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = {tensor_parallel}
"""


class Files:
    """A job's files by absolute path; counts the reads, and refuses ``refused`` paths."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: list[str] = []
        self.refused: set[str] = set()

    def read(self, path: str) -> str:
        self.reads.append(path)
        if path in self.refused:
            raise SourceError("slurm:file", f"{path}: refused: not readable by user bob")
        if path not in self.files:
            raise SourceError("slurm:file", f"{path}: no such file")
        return self.files[path]


@pytest.fixture(autouse=True)
def empty_caches() -> Iterator[None]:
    """Each test starts and ends with the caches empty (they are the process's)."""
    for cache in (describe._launches, describe._scenario_files, describe._schedules):
        cache.clear()
    yield
    for cache in (describe._launches, describe._scenario_files, describe._schedules):
        cache.clear()


@pytest.fixture
def launches_described(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The commands ``planner.launch.describe.describe_launch`` ran for, in order."""
    described: list[str] = []

    def counting(launch: Launch, files: LaunchFiles) -> LaunchDescription:
        described.append(launch.command or "")
        return describe_launch(launch, files)

    monkeypatch.setattr(describe, "describe_launch", counting)
    return described


def _titan_job(make_job: JobFactory, job_id: str, **kw: object) -> JobState:
    fields: dict[str, object] = {
        "command": COMMAND,
        "work_dir": JOB_DIR,
        "num_gpus": 8,
        "num_nodes": 1,
        "name": "titan",
        **kw,
    }
    return make_job(job_id=job_id, **fields)


def test_a_shared_launch_is_described_once_while_its_files_read_the_same(
    make_job: JobFactory, launches_described: list[str]
) -> None:
    files = Files({f"{JOB_DIR}/configs/run.toml": _config(2)})
    first = describe_job(_titan_job(make_job, "1"), files.read)
    again = describe_job(_titan_job(make_job, "2", user="bob"), files.read)
    assert first.described_by == "torchtitan"
    assert first.prediction is not None
    assert again == first
    assert len(launches_described) == 1  # the second job only read the file again
    assert files.reads.count(f"{JOB_DIR}/configs/run.toml") == 2
    assert again.document is not first.document  # each job gets its own mappings


def test_a_changed_config_file_gives_a_new_description(
    make_job: JobFactory, launches_described: list[str]
) -> None:
    files = Files({f"{JOB_DIR}/configs/run.toml": _config(2)})
    before = describe_job(_titan_job(make_job, "1"), files.read)
    files.files[f"{JOB_DIR}/configs/run.toml"] = _config(4)
    after = describe_job(_titan_job(make_job, "2"), files.read)
    assert before.facts is not None
    assert after.facts is not None
    assert before.document is not None
    assert after.document is not None
    assert before.document["parallelism"] != after.document["parallelism"]
    assert len(launches_described) == 2
    # and the old file's description is still there for a job that reads the old file
    files.files[f"{JOB_DIR}/configs/run.toml"] = _config(2)
    assert describe_job(_titan_job(make_job, "3"), files.read) == before
    assert len(launches_described) == 2


def test_a_job_that_may_not_read_the_file_is_described_on_its_own(
    make_job: JobFactory, launches_described: list[str]
) -> None:
    readable = Files({f"{JOB_DIR}/configs/run.toml": _config(2)})
    refused = Files(dict(readable.files))
    refused.refused.add(f"{JOB_DIR}/configs/run.toml")
    mine = describe_job(_titan_job(make_job, "1"), readable.read)
    theirs = describe_job(_titan_job(make_job, "2", user="bob"), refused.read)
    assert mine.prediction is not None
    assert theirs != mine
    assert theirs.prediction is None
    assert len(launches_described) == 2


def test_another_launch_is_not_taken_for_a_kept_one(
    make_job: JobFactory, launches_described: list[str]
) -> None:
    files = Files({f"{JOB_DIR}/configs/run.toml": _config(2)})
    eight = describe_job(_titan_job(make_job, "1"), files.read)
    describe_job(_titan_job(make_job, "2", num_gpus=16, num_nodes=2), files.read)
    renamed = describe_job(_titan_job(make_job, "3", name="other"), files.read)
    assert len(launches_described) == 3
    assert eight.document is not None
    assert renamed.document is not None
    assert (eight.document.get("name"), renamed.document.get("name")) == ("titan", "other")


def test_the_launch_cache_is_bounded(make_job: JobFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    small = Lru[bytes, tuple[describe._Described, ...]](
        max_entries=5, max_bytes=1 << 20, weigh=lambda kept: sum(v.size for v in kept)
    )
    monkeypatch.setattr(describe, "_launches", small)
    files = Files({f"{JOB_DIR}/configs/run.toml": _config(2)})
    for steps in range(20):
        command = COMMAND.replace("2000", str(1000 + steps))
        describe_job(_titan_job(make_job, str(steps), command=command), files.read)
        assert len(small) <= 5
    assert 0 < small.bytes <= 1 << 20
    # and variants of one launch (its file changed again and again) are bounded too
    for tensor_parallel in (1, 2, 4, 8, 16, 3, 1):
        files.files[f"{JOB_DIR}/configs/run.toml"] = _config(tensor_parallel)
        describe_job(_titan_job(make_job, "x"), files.read)
    assert all(len(variants) <= describe.LAUNCH_VARIANTS for variants in small.values())


def test_the_bounds_drop_the_least_recently_used() -> None:
    cache = Lru[str, bytes](max_entries=3, max_bytes=10, weigh=len)
    for key in "abc":
        cache.put(key, b"x")
    assert cache.get("a") == b"x"  # now the most recently used
    cache.put("d", b"x")
    assert cache.get("b") is None
    assert cache.get("a") == b"x"
    cache.put("e", b"123456789")  # 9 + 1 kept over 10 bytes: the least recently used go
    assert cache.bytes <= 10
    assert cache.get("e") == b"123456789"
    cache.put("f", b"12345678901")  # alone over the bound: not kept
    assert cache.get("f") is None
    assert cache.bytes <= 10
    counted = Lru[int, str](max_entries=2)  # no bound on bytes: on entries only
    for number in range(3):
        counted.put(number, "x" * 1000)
    assert counted.values() == ["x" * 1000] * 2
    assert counted.get(0) is None


def test_a_scenario_text_is_predicted_once_however_many_files_hold_it(
    tmp_path: Path, make_job: JobFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    predicted: list[object] = []
    real = describe._predictions.predict

    def counting(document: dict[str, object]) -> object:
        predicted.append(document)
        return real(document)

    monkeypatch.setattr(describe._predictions, "predict", counting)
    files = Files({"/s/a.yaml": SCENARIO, "/s/b.yaml": SCENARIO})
    a = describe_job(make_job(job_id="1", comment="planner:scenario=/s/a.yaml"), files.read)
    b = describe_job(make_job(job_id="2", comment="planner:scenario=/s/b.yaml"), files.read)
    assert (a.detail, b.detail) == ("/s/a.yaml", "/s/b.yaml")
    assert a.prediction is not None
    assert a.prediction == b.prediction
    assert a.document == b.document
    assert a.document is not b.document
    assert len(predicted) == 1
    files.files["/s/b.yaml"] = SCENARIO.replace("train_iters: 200", "train_iters: 400")
    changed = describe_job(make_job(job_id="2", comment="planner:scenario=/s/b.yaml"), files.read)
    assert (changed.train_iters, a.train_iters) == (400, 200)
    assert len(predicted) == 2
    # the same text under another format is another scenario file
    files.files["/s/c.json"] = SCENARIO
    as_json = describe_job(make_job(job_id="3", comment="planner:scenario=/s/c.json"), files.read)
    assert as_json.error is not None
    assert as_json.detail == "/s/c.json"


def test_a_training_schedule_is_a_new_mapping_each_time(make_job: JobFactory) -> None:
    job = make_job(command="pretrain_gpt.py --eval-interval 50 --save-interval 100")
    first = training_schedule(job)
    assert first is not None
    assert first["eval_interval"] == 50
    first["eval_interval"] = 1
    again = training_schedule(job)
    assert again is not None
    assert again["eval_interval"] == 50
    assert training_schedule(make_job(command="train.py")) is None
