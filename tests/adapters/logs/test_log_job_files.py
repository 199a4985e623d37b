"""A job's log is read under the rules of the other files a job names (``adapters.files``).

The probes: a log path that is a symlink to another user's root-only log outside the job's tree,
a root-only log inside it, a FIFO and ``/dev/zero`` as the log, and a log replaced by such a
symlink between two reads. Each gives no records and a ``SourcePermanentError`` saying which
rule refused it, without the log's content or where the symlink pointed.
"""

from __future__ import annotations

import os
from datetime import UTC
from pathlib import Path

import pytest

from adapters.logs import tail as tail_module
from adapters.logs.tail import LogTailer
from planner.errors import SourcePermanentError
from planner.specs.job import JobState, TailCursor
from tests.adapters.test_job_files import ME, other_user, slurm_job

SECRET_LOSS = "4.242424E+00"


def megatron(first: int, last: int) -> str:
    """Megatron iteration lines every 10 iterations, with a loss nobody else may learn."""
    return "".join(
        f" iteration {i:8d}/{1000:8d} | consumed samples: {i * 8:12d} |"
        f" elapsed time per iteration (ms): 250.0 | lm loss: {SECRET_LOSS} |\n"
        for i in range(first, last + 1, 10)
    )


@pytest.fixture
def their_log(open_dir: Path) -> Path:
    """Another user's log outside the job's tree, readable by root only (mode 0600)."""
    other = open_dir / "other-user"
    other.mkdir(mode=0o755)
    path = other / "secret-run.out"
    path.write_text(megatron(10, 200))
    path.chmod(0o600)
    return path


def refusal(exc: pytest.ExceptionInfo[SourcePermanentError], *hidden: str) -> str:
    message = str(exc.value)
    for text in (SECRET_LOSS, "iteration", *hidden):
        assert text not in message
    return message


def test_a_log_symlinked_to_a_root_only_log_outside_the_tree_gives_nothing(
    job_dir: Path, their_log: Path
) -> None:
    log = job_dir / "train.out"
    log.symlink_to(their_log)
    tailer = LogTailer(tz=UTC)
    for user in (other_user(), ME):  # even a job of the root user: not outside its tree
        cursor = TailCursor(path=str(log))
        with pytest.raises(SourcePermanentError) as exc:
            tailer.read(cursor, job=slurm_job(user, job_dir))
        assert "outside the allowed directories" in refusal(exc, str(their_log))
    # Without the job (the planner's own user names the file) it is read: the rule is the job's.
    assert len(tailer.read(TailCursor(path=str(log)))[0]) == 20


def test_a_root_only_log_in_the_tree_is_not_read_for_another_user(job_dir: Path) -> None:
    log = job_dir / "train.out"
    log.write_text(megatron(10, 50))
    log.chmod(0o600)
    tailer = LogTailer(tz=UTC)
    with pytest.raises(SourcePermanentError) as exc:
        tailer.read(TailCursor(path=str(log)), job=slurm_job(other_user(), job_dir))
    assert "not readable by user nobody" in refusal(exc)
    records, _ = tailer.read(TailCursor(path=str(log)), job=slurm_job(ME, job_dir))
    assert [r.iteration for r in records] == [10, 20, 30, 40, 50]


def test_a_fifo_as_the_log_is_refused_and_does_not_hang(fifo: Path, job_dir: Path) -> None:
    """The FIFO's writer stays for 3 s: a reader that opened it without ``O_NONBLOCK`` or read
    it would wait that long and then find nothing, not a refusal."""
    tailer = LogTailer(tz=UTC)
    for job in (slurm_job(ME, job_dir), None):
        with pytest.raises(SourcePermanentError) as exc:
            tailer.read(TailCursor(path=str(fifo)), job=job)
        assert "not a regular file (a FIFO)" in refusal(exc)


def test_dev_zero_as_the_log_is_refused_without_reading(job_dir: Path) -> None:
    log = job_dir / "train.out"
    log.symlink_to("/dev/zero")
    job = slurm_job(ME, job_dir)
    with pytest.raises(SourcePermanentError) as exc:
        LogTailer().read(TailCursor(path=str(log)), job=job)
    assert "outside the allowed directories" in refusal(exc, "/dev/zero")
    allowed = LogTailer(allowed_file_roots={"slurm": ["/dev"]})
    for path in ("/dev/zero", str(log)):
        with pytest.raises(SourcePermanentError) as exc:
            allowed.read(TailCursor(path=path), job=job)
        assert "not a regular file (a character device)" in refusal(exc)


def test_a_log_replaced_by_a_symlink_between_reads_gives_nothing_more(
    job_dir: Path, their_log: Path
) -> None:
    log = job_dir / "train.out"
    log.write_text(megatron(10, 30))
    log.chmod(0o644)
    job = slurm_job(other_user(), job_dir)
    tailer = LogTailer(tz=UTC)
    records, cursor = tailer.read(TailCursor(path=str(log)), job=job)
    assert [r.iteration for r in records] == [10, 20, 30]
    os.link(log, job_dir / "kept.out")  # its inode stays taken: not reused for run-2.out
    swap = job_dir / "swap"
    swap.symlink_to(their_log)
    os.replace(swap, log)  # atomically: the path now names the other user's log
    with pytest.raises(SourcePermanentError) as exc:
        tailer.read(cursor, job=job)
    assert "outside the allowed directories" in refusal(exc, str(their_log))
    # a symlink within the tree to a file the job's user may read is followed
    inside = job_dir / "run-2.out"
    inside.write_text(megatron(10, 40))
    inside.chmod(0o644)
    os.remove(log)
    log.symlink_to(inside)
    records, _ = tailer.read(cursor, job=job)
    assert [r.iteration for r in records] == [10, 20, 30, 40]  # another inode: from its start


def test_a_kubernetes_jobs_log_only_under_its_roots_and_world_readable(job_dir: Path) -> None:
    log = job_dir / "train.out"
    log.write_text(megatron(10, 20))
    kube = slurm_job(ME, job_dir)
    kube = type(kube)(scheduler="kubernetes", cluster="k", job_id="ns/j", user=ME, work_dir="/")
    with pytest.raises(SourcePermanentError) as exc:
        LogTailer(allowed_file_roots={"slurm": [str(job_dir)]}).read(
            TailCursor(path=str(log)), job=kube
        )
    assert "no directory is allowed" in refusal(exc)
    tailer = LogTailer(allowed_file_roots={"kubernetes": [str(job_dir)]})
    log.chmod(0o644)
    assert len(tailer.read(TailCursor(path=str(log)), job=kube)[0]) == 2
    log.chmod(0o600)  # no host identity: only what others may read
    with pytest.raises(SourcePermanentError, match="not readable by user"):
        tailer.read(TailCursor(path=str(log)), job=kube)


def test_unchanged_lists_only_logs_the_cursor_read_to_their_end(
    job_dir: Path, their_log: Path, fifo: Path
) -> None:
    """``LogTailer.unchanged`` (one look at many logs, nothing read) names a log only when
    reading it would give nothing: grown, rotated, swapped for a symlink (even to the same
    file), missing or a FIFO is read as usual, under the rules."""
    job = slurm_job(ME, job_dir)
    tailer = LogTailer(tz=UTC)
    cursors = {}
    for name in ("quiet", "grows", "rotated", "swapped", "gone"):
        log = job_dir / f"{name}.out"
        log.write_text(megatron(10, 30))
        _, cursors[name] = tailer.read(TailCursor(path=str(log)), job=job)
    (job_dir / "grows.out").write_text(megatron(10, 40))
    os.link(job_dir / "rotated.out", job_dir / "kept.out")  # the old inode stays taken
    (job_dir / "rotated.out").unlink()
    (job_dir / "rotated.out").write_text(megatron(10, 30))
    os.link(job_dir / "swapped.out", job_dir / "swapped-target.out")
    (job_dir / "swapped.out").unlink()
    (job_dir / "swapped.out").symlink_to(job_dir / "swapped-target.out")
    (job_dir / "gone.out").unlink()
    fresh = TailCursor(path=str(job_dir / "never-read.out"))
    (job_dir / "never-read.out").write_text("")
    probe = [*cursors.values(), TailCursor(path=str(fifo)), fresh, TailCursor(path="relative")]
    assert tailer.unchanged(probe) == {str(job_dir / "quiet.out")}
    assert tailer.unchanged([]) == set()
    # what it names reads nothing indeed; what it leaves out is read (or refused) as before
    assert tailer.read(cursors["quiet"], job=job) == ([], cursors["quiet"])
    assert [r.iteration for r in tailer.read(cursors["grows"], job=job)[0]] == [40]
    (job_dir / "swapped.out").unlink()
    (job_dir / "swapped.out").symlink_to(their_log)
    with pytest.raises(SourcePermanentError):
        tailer.read(cursors["swapped"], job=job)


def test_a_log_still_missing_since_its_last_read_is_not_read_again(
    job_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log whose last read found no file (under the rules) and that still does not exist is
    named by ``unchanged`` (reading it would give nothing): it is not handed to a reader thread
    again until it appears; one never read, or refused, is read as usual."""
    import adapters.files as files

    job = slurm_job(ME, job_dir)
    tailer = LogTailer(tz=UTC)
    later = TailCursor(path=str(job_dir / "later.out"))
    never = TailCursor(path=str(job_dir / "never.out"))
    outside = TailCursor(path="/nonexistent-planner-dir/x.out")  # outside the job's tree
    assert tailer.read(later, job=job) == ([], later)
    with pytest.raises(SourcePermanentError):
        tailer.read(outside, job=job)
    handed: list[str] = []
    real = files._in_thread

    def counting(source: str, path: str, timeout_s: float, work: object) -> object:
        handed.append(path)
        return real(source, path, timeout_s, work)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "_in_thread", counting)
    assert tailer.unchanged([later, never, outside]) == {later.path}
    assert handed == ["3 files"]  # one look at all three, nothing read
    (job_dir / "later.out").write_text(megatron(10, 20))
    assert tailer.unchanged([later]) == set()  # it appeared: read as usual
    records, cursor = tailer.read(later, job=job)
    assert [r.iteration for r in records] == [10, 20]
    (job_dir / "later.out").unlink()  # gone after a read that found it: read as usual
    assert tailer.unchanged([cursor]) == set()


def test_logs_read_ahead_give_each_job_what_its_own_read_gives(
    job_dir: Path, their_log: Path, fifo: Path, file_handoffs: list[tuple[str, str]]
) -> None:
    """``LogTailer.read_ahead`` reads many jobs' logs in one hand-off to a reader thread;
    each ``read`` then gives what it gives alone (the records and cursor, or the same refusal:
    a symlink out of the tree, another user's view, a FIFO, a missing log), once: a read with
    another cursor, or after the next ``read_ahead``, reads the file itself."""
    (job_dir / "train.out").write_text(megatron(10, 200))
    (job_dir / "out.out").symlink_to(their_log)
    private = job_dir / "private.out"
    private.write_text(megatron(10, 50))
    private.chmod(0o600)
    mine, nobody = slurm_job(ME, job_dir), slurm_job(other_user(), job_dir)
    reads = [
        (TailCursor(path=str(job_dir / "train.out")), mine),
        (TailCursor(path=str(job_dir / "train.out")), nobody),
        (TailCursor(path=str(job_dir / "out.out")), mine),
        (TailCursor(path=str(private)), nobody),
        (TailCursor(path=str(fifo)), mine),
        (TailCursor(path=str(job_dir / "absent.out")), mine),
    ]

    def outcome(tailer: LogTailer, cursor: TailCursor, job: JobState) -> str:
        try:
            records, after = tailer.read(cursor, job=job)
        except SourcePermanentError as exc:
            return f"{type(exc).__name__}: {exc}"
        return repr((records, after))

    expected = [outcome(LogTailer(tz=UTC), cursor, job) for cursor, job in reads]
    assert "iteration=200" in expected[0]
    assert expected[0] == expected[1]
    assert all("SourcePermanentError" in e for e in expected[2:5])
    assert expected[5] == repr(([], reads[5][0]))  # missing: nothing, the cursor as it was

    tailer = LogTailer(tz=UTC)
    file_handoffs.clear()
    assert tailer.read_ahead(reads) == len(reads)
    assert [outcome(tailer, cursor, job) for cursor, job in reads] == expected
    assert [path for _, path in file_handoffs] == [f"{len(reads)} files"]
    # taken once: reading the same cursor again reads the file (its old cursor: all again)
    assert outcome(tailer, *reads[0]) == expected[0]
    assert [path for _, path in file_handoffs][1:] == [str(job_dir / "train.out")]


def test_logs_read_ahead_hold_at_most_their_bytes(
    job_dir: Path, monkeypatch: pytest.MonkeyPatch, file_handoffs: list[tuple[str, str]]
) -> None:
    """``read_ahead`` stops once what it read holds ``MAX_AHEAD_BYTES`` (thousands of logs of
    up to ``max_read_bytes`` each are not held at once); the logs past it are read alone."""
    monkeypatch.setattr(tail_module, "MAX_AHEAD_BYTES", 1)
    job = slurm_job(ME, job_dir)
    reads = []
    for name in ("a.out", "b.out", "c.out"):
        (job_dir / name).write_text(megatron(10, 50))
        reads.append((TailCursor(path=str(job_dir / name)), job))
    tailer = LogTailer(tz=UTC)
    assert tailer.read_ahead(reads) == 3
    alone = [tailer.read(cursor, job=job) for cursor, job in reads]
    assert [path for _, path in file_handoffs] == [
        "3 files",
        str(job_dir / "b.out"),
        str(job_dir / "c.out"),
    ]
    assert alone == [LogTailer(tz=UTC).read(cursor, job=job) for cursor, job in reads]
