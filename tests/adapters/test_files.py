"""Reading a job's small text files: every failure a clear, classified error; the job file
rules' time and size bounds (the attacker's probes are in ``test_job_files.py``)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import adapters.files as files
from adapters.files import (
    job_file_access,
    read_job_file,
    read_local_text,
)
from planner.errors import SourcePermanentError, SourceTemporaryError
from planner.specs.job import JobState
from tests.adapters.test_job_files import ME, refused, slurm_job


def test_reads_utf8_text(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("model: {preset: llama3-8b}  # é\n", encoding="utf-8")
    assert read_local_text("test", str(path), 1000).endswith("é\n")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.yaml", None, "no such file"),
        ("", None, "not a regular file"),  # the directory itself
        ("big.yaml", b"x" * 11, "larger than the 10-byte limit"),
        ("bin.yaml", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_each_failure_is_permanent_and_names_the_file(
    tmp_path: Path, name: str, content: bytes | None, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SourcePermanentError, match=message) as info:
        read_local_text("test:file", str(path), 10)
    assert "test:file" in str(info.value)


def test_a_relative_path_is_refused() -> None:
    with pytest.raises(SourcePermanentError, match="not an absolute path"):
        read_local_text("test:file", "relative.yaml", 10)


@pytest.fixture
def job_dir(open_dir: Path) -> Path:
    path = open_dir / "job"
    path.mkdir(mode=0o755)
    return path


def test_a_hung_read_times_out_and_hung_reads_are_bounded(
    job_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (job_dir / "s.yaml").write_text("x: 1\n")
    release = threading.Event()
    real_open = files._open_as

    def hang(real: str, viewer: object) -> int:
        release.wait(5.0)  # a hung network file system
        return real_open(real, viewer)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "_open_as", hang)
    roots, user = job_file_access(slurm_job(ME, job_dir), ())
    start = time.monotonic()
    try:
        with pytest.raises(SourceTemporaryError, match=r"not read within 0\.2 s"):
            read_job_file("t", str(job_dir / "s.yaml"), roots=roots, user=user, max_bytes=9,
                          timeout_s=0.2)  # fmt: skip
        assert time.monotonic() - start < 1.0
        monkeypatch.setattr(files, "_slots", threading.BoundedSemaphore(1))
        files._slots.acquire()  # every slot held by a hung read
        with pytest.raises(SourceTemporaryError, match="still hung"):
            read_job_file("t", str(job_dir / "s.yaml"), roots=roots, user=user, max_bytes=9)
    finally:
        release.set()


def test_the_size_limit_holds(job_dir: Path) -> None:
    (job_dir / "big.yaml").write_text("x" * 100)
    roots, user = job_file_access(slurm_job(ME, job_dir), ())
    with pytest.raises(SourcePermanentError) as exc:
        read_job_file("t", str(job_dir / "big.yaml"), roots=roots, user=user, max_bytes=10)
    assert "larger than the 10-byte limit" in refused(exc, "xxx")


def test_only_slurm_jobs_bring_their_directory_and_user() -> None:
    slurm = slurm_job("alice", "/home/alice/run")
    assert job_file_access(slurm, ["/shared"]) == (("/home/alice/run", "/shared"), "alice")
    kube = JobState(scheduler="kubernetes", cluster="k", job_id="a/b", user="alice", work_dir="/")
    assert job_file_access(kube, ["/mnt/s"]) == (("/mnt/s",), None)
    assert job_file_access(None, []) == ((), None)


def test_local_reads_refuse_devices_and_fifos_before_opening(open_dir: Path) -> None:
    os.mkfifo(open_dir / "f")
    for path, kind in (("/dev/zero", "a character device"), (str(open_dir / "f"), "a FIFO")):
        with pytest.raises(SourcePermanentError, match=f"not a regular file \\({kind}\\)"):
            read_local_text("test", path, 10)
