"""Files that jobs name are data, not paths to anything the planner can read.

Each probe of the issue, against the Slurm source (``planner:scenario=`` in a comment), the
Kubernetes source (a path in an annotation) and the trace reader (``planner:trace=``): a
root-only file, a world-readable file outside the allowed roots, a symlink out of the job's
directory, a FIFO and ``/dev/zero`` are all refused, quickly, with no content in the error.
"""

from __future__ import annotations

import os
import pwd
import time
from pathlib import Path

import pytest

from adapters.slurm.source import SlurmSource
from adapters.traces import TraceFiles
from planner.errors import SourceError, SourcePermanentError
from planner.specs.job import JobState

SECRET = "s3cret-hash:do-not-leak"
ME = pwd.getpwuid(os.getuid()).pw_name
TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def other_user() -> str:
    """A host user that is not the one running the tests (``nobody`` normally)."""
    for entry in pwd.getpwall():
        if entry.pw_uid not in {0, os.getuid()} and entry.pw_name == "nobody":
            return entry.pw_name
    pytest.skip("no user 'nobody' on this host")


def slurm_job(user: str, work_dir: Path | str) -> JobState:
    return JobState(scheduler="slurm", cluster="c", job_id="7", user=user, work_dir=str(work_dir))


def refused(exc: pytest.ExceptionInfo[SourceError], *secrets: str) -> str:
    """The message, checked to hold none of the secrets (file content)."""
    message = str(exc.value)
    for secret in secrets:
        assert secret not in message
    return message


# ------------------------------------------------------------------------------- Slurm


def test_a_root_only_file_is_refused_without_its_content(job_dir: Path) -> None:
    """``--comment=planner:scenario=/etc/shadow``: not readable by the job's user, even when
    the job claims /etc as its working directory."""
    source = SlurmSource()
    secret = job_dir / "shadow"
    secret.write_text(f"root:{SECRET}:20228:0:99999:7:::\n")
    secret.chmod(0o600)
    with pytest.raises(SourcePermanentError) as exc:
        source.read_text_file(str(secret), 65536, job=slurm_job(other_user(), job_dir))
    assert "not readable by user nobody" in refused(exc, SECRET, "root:")
    if os.path.exists("/etc/shadow"):
        with pytest.raises(SourcePermanentError) as exc:
            source.read_text_file("/etc/shadow", 65536, job=slurm_job(other_user(), "/etc"))
        assert "not readable by user nobody" in refused(exc, "root:")


def test_a_world_readable_file_outside_the_roots_is_refused(job_dir: Path) -> None:
    source = SlurmSource()
    with pytest.raises(SourcePermanentError) as exc:
        source.read_text_file("/etc/passwd", 65536, job=slurm_job(ME, job_dir))
    assert "outside the allowed directories" in refused(exc, "root:")
    # ... unless the operator allows its directory.
    allowed = SlurmSource(allowed_file_roots=["/etc"])
    assert "root:" in allowed.read_text_file("/etc/passwd", 65536, job=slurm_job(ME, job_dir))


def test_a_symlink_out_of_the_jobs_directory_is_refused(job_dir: Path) -> None:
    (job_dir / "scenario.yaml").symlink_to("/etc/passwd")
    (job_dir / "real.yaml").write_text("model: {preset: llama3-8b}\n")
    (job_dir / "inside.yaml").symlink_to(job_dir / "real.yaml")
    source = SlurmSource()
    job = slurm_job(ME, job_dir)
    with pytest.raises(SourcePermanentError) as exc:
        source.read_text_file(str(job_dir / "scenario.yaml"), 65536, job=job)
    message = refused(exc, "root:", "/etc/passwd")
    assert "outside the allowed directories" in message
    assert source.read_text_file(str(job_dir / "inside.yaml"), 65536, job=job).startswith("model")


def test_a_fifo_does_not_hang(fifo: Path, job_dir: Path) -> None:
    source = SlurmSource()
    start = time.monotonic()
    with pytest.raises(SourcePermanentError) as exc:
        source.read_text_file(str(fifo), 65536, job=slurm_job(ME, job_dir))
    assert time.monotonic() - start < 1.0
    assert "not a regular file (a FIFO)" in refused(exc)


def test_dev_zero_is_refused_without_reading(job_dir: Path) -> None:
    source = SlurmSource(allowed_file_roots=["/dev"])
    (job_dir / "zero.yaml").symlink_to("/dev/zero")
    start = time.monotonic()
    for path in ("/dev/zero", str(job_dir / "zero.yaml")):
        with pytest.raises(SourcePermanentError) as exc:
            source.read_text_file(path, 65536, job=slurm_job(ME, job_dir))
        assert "not a regular file (a character device)" in refused(exc)
    assert time.monotonic() - start < 1.0


def test_directories_must_be_searchable_by_the_jobs_user(job_dir: Path) -> None:
    private = job_dir / "private"
    private.mkdir(mode=0o700)
    (private / "s.yaml").write_text(SECRET)
    (private / "s.yaml").chmod(0o644)
    source = SlurmSource()
    with pytest.raises(SourcePermanentError) as exc:
        source.read_text_file(str(private / "s.yaml"), 100, job=slurm_job(other_user(), job_dir))
    assert "not searchable by user nobody" in refused(exc, SECRET)
    assert source.read_text_file(str(private / "s.yaml"), 100, job=slurm_job(ME, job_dir))


def test_without_a_job_or_a_host_user_only_world_readable_files_under_allowed_roots(
    job_dir: Path,
) -> None:
    mine = job_dir / "mine.yaml"
    mine.write_text(SECRET)
    mine.chmod(0o600)
    with pytest.raises(SourcePermanentError) as exc:
        SlurmSource().read_text_file(str(mine), 100)
    assert "no directory is allowed" in refused(exc, SECRET)
    source = SlurmSource(allowed_file_roots=[str(job_dir)])
    for job in (None, slurm_job("no-such-user-here", job_dir), slurm_job("", job_dir)):
        with pytest.raises(SourcePermanentError) as exc:
            source.read_text_file(str(mine), 100, job=job)
        assert "not readable by user" in refused(exc, SECRET)
    mine.chmod(0o644)
    assert source.read_text_file(str(mine), 100) == SECRET


# ------------------------------------------------------------------------------- traces


def _trace_files(job_dir: Path) -> tuple[Path, Path]:
    trace = job_dir / "trace.parquet"
    meta = job_dir / "meta.yaml"
    trace.write_bytes((TRACES / "bytedance-straggler-trace-ST.parquet").read_bytes())
    meta.write_bytes((TRACES / "bytedance-straggler-meta-ST.yaml").read_bytes())
    return trace, meta


def test_a_jobs_trace_is_read_as_its_user(job_dir: Path) -> None:
    trace, meta = _trace_files(job_dir)
    traces = TraceFiles()
    job = slurm_job(ME, job_dir)
    assert traces.read(str(trace), str(meta), job=job).num_ops == 6784
    assert traces.fingerprint(str(trace), str(meta), job=job) is not None
    assert traces.fingerprint(str(job_dir / "none.parquet"), str(meta), job=job) is None
    nobody = slurm_job(other_user(), job_dir)
    trace.chmod(0o600)
    assert traces.fingerprint(str(trace), str(meta), job=nobody) == "refused"
    with pytest.raises(SourcePermanentError, match="not readable by user nobody"):
        traces.read(str(trace), str(meta), job=nobody)


def test_a_trace_fifo_does_not_hang(fifo: Path, job_dir: Path) -> None:
    _, meta = _trace_files(job_dir)
    start = time.monotonic()
    for job in (slurm_job(ME, job_dir), None):  # None: the service's own (uploaded) files
        with pytest.raises((SourcePermanentError, ValueError)) as exc:
            TraceFiles().read(str(fifo), str(meta), job=job)
        assert "not a regular file (a FIFO)" in str(exc.value)
    assert time.monotonic() - start < 1.0


def test_a_trace_on_dev_zero_is_refused_without_reading(job_dir: Path) -> None:
    _, meta = _trace_files(job_dir)
    (job_dir / "zero.csv").symlink_to("/dev/zero")
    traces = TraceFiles(allowed_file_roots={"slurm": ["/dev"]})
    start = time.monotonic()
    for path in ("/dev/zero", str(job_dir / "zero.csv")):
        for job in (slurm_job(ME, job_dir), None):
            with pytest.raises((SourcePermanentError, ValueError)) as exc:
                traces.read(path, str(meta), job=job)
            assert "a character device" in str(exc.value) or "outside" in str(exc.value)
    assert time.monotonic() - start < 1.0


def test_a_trace_outside_the_jobs_directory_is_refused(job_dir: Path) -> None:
    _, meta = _trace_files(job_dir)
    (job_dir / "t.csv").symlink_to("/etc/passwd")
    for path in ("/etc/passwd", str(job_dir / "t.csv")):
        with pytest.raises(SourcePermanentError) as exc:
            TraceFiles().read(path, str(meta), job=slurm_job(ME, job_dir))
        assert "outside the allowed directories" in refused(exc, "root:")


def test_a_kubernetes_jobs_trace_only_under_its_roots_and_world_readable(job_dir: Path) -> None:
    trace, meta = _trace_files(job_dir)
    kube = JobState(scheduler="kubernetes", cluster="k", job_id="a/j", user=ME, work_dir="/")
    with pytest.raises(SourcePermanentError, match="no directory is allowed"):
        TraceFiles(allowed_file_roots={"slurm": [str(job_dir)]}).read(
            str(trace), str(meta), job=kube
        )
    traces = TraceFiles(allowed_file_roots={"kubernetes": [str(job_dir)]})
    trace.chmod(0o644)
    meta.chmod(0o644)
    assert traces.read(str(trace), str(meta), job=kube).num_ops == 6784
    trace.chmod(0o600)
    with pytest.raises(SourcePermanentError, match=r"not readable by user \(no host user\)"):
        traces.read(str(trace), str(meta), job=kube)
