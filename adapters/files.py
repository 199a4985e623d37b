"""Reading files on this host: files that jobs name (data, never a path to anything the planner
itself may read) and files the planner's own user names (command-line arguments, uploads).

**Files jobs name** (``planner:scenario=`` and ``planner:trace=`` in a Slurm comment, a path in a
Kubernetes annotation, the configs a launch names, the job's log: its stdout path) are written
by any cluster user, so :func:`read_job_file` (:func:`read_job_file_part` for a growing log,
:func:`stat_job_file` for a fingerprint) reads one only when all of these hold, and otherwise
raises ``SourcePermanentError`` saying which rule refused it, naming only the path the job
gave (never the file's content, its size or where a symlink pointed):

1. *Roots*: the path, resolved (symlinks followed, ``..`` removed), lies under one of ``roots``
   (themselves resolved): for Slurm the job's working directory tree plus the operator's
   ``slurm.allowed_file_roots``; for Kubernetes only ``kubernetes.allowed_file_roots`` (volumes
   mounted into the planner's pod). No roots: nothing is read. A symlink out of the roots is
   refused.
2. *The job user's view*: every directory on the resolved path is searchable, and the file
   readable, by ``user`` (a host user name, as Slurm reports the job's owner) under the file
   mode bits: the owner bits when the user owns it, else the group bits when it is one of the
   user's groups, else the other bits (root reads everything; POSIX ACLs are not consulted).
   Without a known host user (``None``, an empty or unknown name, any Kubernetes job) only what
   *others* may read counts: world-searchable directories and world-readable files.
3. *Regular files only*: the last component is checked with ``lstat`` before it is opened (a
   FIFO, device, socket or directory is never opened, so ``/dev/zero`` is never read and a FIFO
   never blocks), opened with ``O_NONBLOCK | O_NOFOLLOW`` relative to its directory (each
   directory opened with ``O_NOFOLLOW``: a symlink swapped in after the check is refused), and
   checked again with ``fstat`` on the open descriptor.
4. *Bounded*: at most ``max_bytes`` are read, and the whole read (path resolution included)
   must finish within ``timeout_s`` (else ``SourceTemporaryError``: a hung network file system
   holds one worker thread, never the caller; at most :data:`MAX_HUNG_READS` may hang at once).

Many files are read in one hand-off to a worker thread by :func:`read_job_files` (and
:func:`read_job_file_parts`), each under the rules as its own :func:`read_job_file`
(:func:`read_job_file_part`) would read it.

Whether many files changed is told by :func:`lstat_paths` (``lstat`` only, nothing opened or
read, all in one worker thread within one time limit): a log that did not grow is then not
read at all.

**Files the planner's own user names** (:func:`read_local_text`) skip the roots and owner
rules but keep the bounds (the command line's own input files are read by
``planner.cli_input``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import queue
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from planner.errors import SourcePermanentError, SourceTemporaryError
from planner.specs.job import JobState

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_HUNG_READS",
    "FilePart",
    "JobFileRead",
    "MissingFileError",
    "job_file_access",
    "lstat_paths",
    "read_job_file",
    "read_job_file_part",
    "read_job_file_parts",
    "read_job_files",
    "read_local_file",
    "read_local_file_part",
    "read_local_text",
    "stat_job_file",
    "utf8_head",
    "utf8_text",
]

DEFAULT_TIMEOUT_S = 5.0
"""Default time limit of a job file read, seconds (resolution, checks and reading)."""
MAX_HUNG_READS = 8
"""Reads that may still be running past their time limit (each holds a daemon thread); while
this many hang, further job file reads fail at once with ``SourceTemporaryError``."""
_MAX_PATH_CHARS = 4096
_CHUNK_BYTES = 1 << 16
_DIR_FLAGS = (
    getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
)  # O_PATH: search permission suffices, as for the job's user
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
VIEWER_TTL_S = 60.0
"""How long a host user's uid and groups, once looked up, are used for job file reads, seconds
(a change of the user's groups counts after at most this long)."""
_MAX_VIEWERS = 10_000
_slots = threading.BoundedSemaphore(MAX_HUNG_READS)
_T = TypeVar("_T")
_U = TypeVar("_U")


class MissingFileError(SourcePermanentError):
    """The file does not exist (yet: a job's log before its first line)."""


@dataclass(frozen=True, slots=True)
class FilePart:
    """Part of a file read from an offset: ``info`` is ``fstat`` of the opened file,
    ``data`` at most the asked bytes from ``offset_bytes`` (empty when nothing was asked)."""

    info: os.stat_result
    offset_bytes: int
    data: bytes


#: Where to read an opened file from, given its ``fstat``: a byte offset, or None for nothing.
ReadFrom = Callable[[os.stat_result], int | None]


#: Host users looked up: user name -> (monotonic time the entry expires, its viewer).
_viewers: dict[str, tuple[float, _Viewer]] = {}


class _RefusedError(Exception):
    """A rule refused the read; the message says which (without the file's content)."""


@dataclass(frozen=True, slots=True)
class _Viewer:
    """Whose view of the file system is checked: a host uid and its groups, or only others."""

    name: str
    uid: int | None
    gids: frozenset[int]

    @classmethod
    def of(cls, user: str | None) -> _Viewer:
        """The viewer of host user ``user``, looked up at most once per
        :data:`VIEWER_TTL_S` (a job's log is read at every ingest cycle)."""
        now = time.monotonic()
        kept = _viewers.get(user or "")
        if kept is not None and kept[0] > now:
            return kept[1]
        viewer = cls._look_up(user)
        if len(_viewers) >= _MAX_VIEWERS:
            _viewers.clear()
        _viewers[user or ""] = (now + VIEWER_TTL_S, viewer)
        return viewer

    @classmethod
    def _look_up(cls, user: str | None) -> _Viewer:
        if not user:
            return cls("(no host user)", None, frozenset())
        try:
            entry = pwd.getpwnam(user)
            groups = frozenset(os.getgrouplist(user, entry.pw_gid))
        except (KeyError, OSError):
            return cls(f"{user} (not a user of this host)", None, frozenset())
        return cls(user, entry.pw_uid, groups)

    def may(self, info: os.stat_result, owner_bit: int, group_bit: int, other_bit: int) -> bool:
        """True when the mode bits let this viewer (read or search) the inode."""
        if self.uid == 0:
            return True
        if self.uid is not None and info.st_uid == self.uid:
            return bool(info.st_mode & owner_bit)
        if self.uid is not None and info.st_gid in self.gids:
            return bool(info.st_mode & group_bit)
        return bool(info.st_mode & other_bit)


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((name for test, name in kinds if test(mode)), "not a plain file")


def _check_path(source: str, path: str) -> None:
    if not isinstance(path, str) or not os.path.isabs(path):
        raise SourcePermanentError(source, f"{path!r} is not an absolute path")
    if "\0" in path or len(path) > _MAX_PATH_CHARS:
        raise SourcePermanentError(source, "not a valid path (NUL byte or over 4096 characters)")


def _under(real: str, roots: Sequence[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)


def _read_fd(fd: int, max_bytes: int, deadline: float, cancelled: threading.Event) -> bytes:
    """At most ``max_bytes + 1`` bytes of the open descriptor (the caller checks the limit)."""
    chunks: list[bytes] = []
    left = max_bytes + 1
    while left > 0:
        if cancelled.is_set() or time.monotonic() > deadline:
            raise TimeoutError
        chunk = os.read(fd, min(_CHUNK_BYTES, left))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _open_as(real: str, viewer: _Viewer) -> int:
    """Open the resolved ``real`` component by component as ``viewer`` would; the file's fd."""
    parts = [part for part in real.split("/") if part]
    if not parts:
        raise _RefusedError("not a regular file (a directory)")
    fd = os.open("/", _DIR_FLAGS)
    try:
        for name in [None, *parts[:-1]]:
            if name is not None:
                try:
                    step = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in {errno.ELOOP, errno.ENOTDIR}:
                        raise _RefusedError("the path changed while it was checked") from None
                    raise
                os.close(fd)
                fd = step
            if not viewer.may(os.fstat(fd), stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH):
                raise _RefusedError(
                    f"a directory on the path is not searchable by user {viewer.name}; "
                    "job files are read as the job's user would see them"
                )
        info = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        if not viewer.may(info, stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH):
            raise _RefusedError(
                f"not readable by user {viewer.name}; a job file must be readable by the job's "
                "user (its owner, its group, or world-readable)"
            )
        if not stat.S_ISREG(info.st_mode):
            raise _RefusedError(f"not a regular file ({_kind(info.st_mode)})")
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _RefusedError("the path changed while it was checked") from None
            raise
    finally:
        os.close(fd)
    opened = os.fstat(file_fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
        info.st_dev,
        info.st_ino,
    ):
        os.close(file_fd)
        raise _RefusedError("the path changed while it was checked")
    return file_fd


class _Workers:
    """:data:`MAX_HUNG_READS` daemon threads that run the job file reads, started on the first
    read of each process (a forked child starts its own): a log is read at every ingest cycle,
    and starting a thread per read cost more than the read. A read holds one of ``_slots``
    while it runs, so no read waits for a worker while a slot is free."""

    def __init__(self) -> None:
        self._pid = -1
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()

    def submit(self, task: Callable[[], None]) -> None:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._tasks = queue.SimpleQueue()
                    for number in range(MAX_HUNG_READS):
                        threading.Thread(
                            target=_serve,
                            args=(self._tasks,),
                            name=f"planner-file-read-{number}",
                            daemon=True,
                        ).start()
                    self._pid = os.getpid()
        self._tasks.put(task)


def _serve(tasks: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        task = tasks.get()
        with contextlib.suppress(BaseException):  # a task hands its own errors to its caller
            task()


_workers = _Workers()


def _in_thread(source: str, path: str, timeout_s: float, work: Callable[[], _T]) -> _T:
    """Run ``work`` on a worker thread, waiting at most ``timeout_s`` for it."""
    if not _slots.acquire(blocking=False):
        raise SourceTemporaryError(
            source, f"{path}: not read: {MAX_HUNG_READS} earlier file reads are still hung"
        )
    values: list[_T] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            values.append(work())
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)
        finally:
            _slots.release()
            done.set()

    try:
        _workers.submit(run)
    except BaseException:
        _slots.release()
        raise
    if not done.wait(timeout_s):
        raise SourceTemporaryError(source, f"{path}: not read within {timeout_s:g} s")
    if errors:
        raise errors[0]
    return values[0]


def _os_error(source: str, path: str, exc: OSError) -> Exception:
    if exc.errno == errno.ENOENT:
        return MissingFileError(source, f"{path}: no such file")
    if exc.errno in {errno.EACCES, errno.EPERM}:
        return SourcePermanentError(source, f"{path}: permission denied")
    if exc.errno in {errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG}:
        return SourcePermanentError(source, f"{path}: not a valid path ({exc.strerror})")
    return SourceTemporaryError(source, f"{path}: {exc.strerror or type(exc).__name__}")


def job_file_access(
    job: JobState | None, allowed_file_roots: Sequence[str]
) -> tuple[tuple[str, ...], str | None]:
    """``(roots, user)`` for :func:`read_job_file` of a file ``job`` names.

    A Slurm job: its working directory (when Slurm reports an absolute one) and
    ``allowed_file_roots``, viewed as its user (Slurm's ``user_name``, a host user). A job of
    another scheduler (Kubernetes: its user is only an annotation, no host identity) or no job:
    ``allowed_file_roots`` only, viewed as others (world-readable files only).
    """
    allowed = tuple(allowed_file_roots)
    if job is None or job.scheduler != "slurm":
        return allowed, None
    work_dir = job.work_dir
    own = (work_dir,) if work_dir and os.path.isabs(work_dir) else ()
    return (*own, *allowed), job.user or None


def _open_and_use(
    path: str,
    use: Callable[[int, float, threading.Event], _T],
    *,
    roots: Sequence[str],
    user: str | None,
    deadline: float,
    cancelled: threading.Event,
) -> _T:
    """The rules' work on a worker thread: resolve ``path``, check it lies under ``roots``,
    open it as ``user`` would (:func:`_open_as`) and return ``use(fd, deadline, cancelled)``.
    Raises ``_RefusedError``, ``TimeoutError`` or ``OSError`` (:func:`_job_file_error` names
    them for the caller)."""
    viewer = _Viewer.of(user)  # here: a user lookup may ask a slow directory service
    allowed = [os.path.realpath(r) for r in roots if isinstance(r, str) and os.path.isabs(r)]
    real = os.path.realpath(path)
    if not _under(real, allowed):
        where = "no directory is allowed" if not allowed else "outside the allowed directories"
        raise _RefusedError(
            f"{where}: job files are read only under the job's working directory (Slurm) "
            "and allowed_file_roots"
        )
    fd = _open_as(real, viewer)
    try:
        return use(fd, deadline, cancelled)
    finally:
        os.close(fd)


def _job_file_error(source: str, path: str, exc: BaseException, timeout_s: float) -> BaseException:
    """The ``SourceError`` a caller gets for what :func:`_open_and_use` raised (``exc`` itself
    when it is not one of those)."""
    if isinstance(exc, _RefusedError):
        return SourcePermanentError(source, f"{path}: refused: {exc}")
    if isinstance(exc, TimeoutError):
        return SourceTemporaryError(source, f"{path}: not read within {timeout_s:g} s")
    if isinstance(exc, OSError):
        return _os_error(source, path, exc)
    return exc


def _as_job_user(
    source: str,
    path: str,
    use: Callable[[int, float, threading.Event], _T],
    *,
    roots: Sequence[str],
    user: str | None,
    timeout_s: float,
) -> _T:
    """Open ``path`` under the rules (in a worker thread, within ``timeout_s``) and return
    ``use(fd, deadline, cancelled)``; every refusal and failure as a ``SourceError``."""
    _check_path(source, path)
    cancelled = threading.Event()

    def work() -> _T:
        deadline = time.monotonic() + timeout_s
        return _open_and_use(
            path, use, roots=roots, user=user, deadline=deadline, cancelled=cancelled
        )

    try:
        return _in_thread(source, path, timeout_s, work)
    except (_RefusedError, TimeoutError, OSError) as exc:
        raise _job_file_error(source, path, exc, timeout_s) from None
    finally:
        cancelled.set()  # a read still running past the limit stops at its next chunk


def read_job_file(
    source: str,
    path: str,
    *,
    roots: Sequence[str],
    user: str | None,
    max_bytes: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    head: bool = False,
) -> bytes:
    """The bytes of a file a job named, read under the module's rules (roots, the job user's
    view, regular files only, bounded). ``head``: a longer file gives its first ``max_bytes``
    bytes instead of an error (the start of a growing log).

    ``path`` must be absolute (a caller joins a relative one to the job's working directory);
    ``roots`` are the directories files may be read from; ``user`` is the job's host user
    name (None: only world-readable files); ``max_bytes`` the size limit, ``timeout_s`` the
    time limit, seconds.

    Raises ``SourcePermanentError(source, ...)`` when a rule refuses the file or it is missing,
    larger than ``max_bytes``; ``SourceTemporaryError`` on a timeout or another I/O error.
    """

    def read(fd: int, deadline: float, cancelled: threading.Event) -> bytes:
        return _read_fd(fd, max_bytes, deadline, cancelled)

    data = _as_job_user(source, path, read, roots=roots, user=user, timeout_s=timeout_s)
    return _bounded(source, path, data, max_bytes, head=head)


def _bounded(source: str, path: str, data: bytes, max_bytes: int, *, head: bool) -> bytes:
    """``data`` read as :func:`read_job_file` gives it (its first ``max_bytes`` when ``head``,
    else an error when longer)."""
    if head:
        return data[:max_bytes]
    if len(data) > max_bytes:
        raise SourcePermanentError(source, f"{path}: larger than the {max_bytes}-byte limit")
    return data


@dataclass(frozen=True, slots=True)
class JobFileRead:
    """One file of :func:`read_job_files`: its absolute ``path``, the ``roots`` it may lie
    under and the host ``user`` whose view is checked (as for :func:`read_job_file`)."""

    path: str
    roots: tuple[str, ...]
    user: str | None


def read_job_files(
    source: str,
    reads: Sequence[JobFileRead],
    *,
    max_bytes: int,
    max_total_bytes: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[int, bytes | SourcePermanentError]:
    """Many :func:`read_job_file` reads in one hand-off to a worker thread: each file is read
    under every rule, as its own :func:`read_job_file` would read it (its roots, its user's
    view, regular files only, at most ``max_bytes``), one after the other, all within
    ``timeout_s`` seconds in all; the caller waits for one thread instead of one per file (a
    first cycle of 10,000 jobs reads 8,000 files it names: 0.14 CPU-ms a hand-off).

    Returns index in ``reads`` -> the bytes :func:`read_job_file` returns, or the
    ``SourcePermanentError`` it raises (a refusal, a missing file, too large). A read that
    failed otherwise (a time limit, another I/O error), or was not reached in time or within
    ``max_total_bytes`` (what all the files read hold, at most: the reads stop once it is
    reached), is left out: the caller reads it alone, as usual."""

    def read(fd: int, deadline: float, cancelled: threading.Event) -> bytes:
        return _read_fd(fd, max_bytes, deadline, cancelled)

    def bounded(one: JobFileRead, data: bytes) -> bytes:
        return _bounded(source, one.path, data, max_bytes, head=False)

    return _in_one_thread(
        source,
        reads,
        use=lambda _: read,
        finish=bounded,
        weigh=len,
        max_total_bytes=max_total_bytes,
        timeout_s=timeout_s,
    )


def read_job_file_parts(
    source: str,
    reads: Sequence[tuple[JobFileRead, ReadFrom]],
    *,
    max_bytes: int,
    max_total_bytes: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[int, FilePart | SourcePermanentError]:
    """Many :func:`read_job_file_part` reads (growing logs: each file with where to read it
    from) in one hand-off to a worker thread, as :func:`read_job_files` reads whole files:
    each under every rule, all within ``timeout_s`` in all and ``max_total_bytes`` of data
    in all. Returns index in ``reads`` -> the part :func:`read_job_file_part` returns, or the
    ``SourcePermanentError`` it raises (a refusal, :class:`MissingFileError`); the others are
    left out (read them alone)."""

    def part(index: int) -> Callable[[int, float, threading.Event], FilePart]:
        read_from = reads[index][1]
        return lambda fd, deadline, cancelled: _part(fd, read_from, max_bytes, deadline, cancelled)

    return _in_one_thread(
        source,
        [one for one, _ in reads],
        use=part,
        finish=lambda _one, found: found,
        weigh=lambda found: len(found.data),
        max_total_bytes=max_total_bytes,
        timeout_s=timeout_s,
    )


def _in_one_thread(
    source: str,
    reads: Sequence[JobFileRead],
    *,
    use: Callable[[int], Callable[[int, float, threading.Event], _T]],
    finish: Callable[[JobFileRead, _T], _U],
    weigh: Callable[[_U], int],
    max_total_bytes: int,
    timeout_s: float,
) -> dict[int, _U | SourcePermanentError]:
    """``finish(read, use(index)(fd, ...))`` of each of ``reads`` opened under the rules, one
    after the other on one worker thread within ``timeout_s`` in all, until what they gave
    weighs ``max_total_bytes`` (``weigh``: bytes of one); index -> what it gave, or the
    permanent error its own read would raise (other failures and reads not reached left
    out)."""
    done: list[tuple[int, _U | SourcePermanentError]] = []
    cancelled = threading.Event()

    def work() -> None:
        deadline = time.monotonic() + timeout_s
        held = 0
        for index, one in enumerate(reads):
            if cancelled.is_set() or time.monotonic() > deadline or held >= max_total_bytes:
                return
            try:
                _check_path(source, one.path)
                found = _open_and_use(
                    one.path,
                    use(index),
                    roots=one.roots,
                    user=one.user,
                    deadline=deadline,
                    cancelled=cancelled,
                )
                kept = finish(one, found)
                held += weigh(kept)
                done.append((index, kept))
            except Exception as exc:  # what the file's own read would raise
                error = _job_file_error(source, one.path, exc, timeout_s)
                if isinstance(error, SourcePermanentError):
                    done.append((index, error))

    try:
        _in_thread(source, f"{len(reads)} files", timeout_s, work)
    except SourceTemporaryError:
        pass  # past the limit, or earlier reads hung: what was read in time
    finally:
        cancelled.set()  # a read still running past the limit stops at its next chunk
    return dict(list(done))


def stat_job_file(
    source: str,
    path: str,
    *,
    roots: Sequence[str],
    user: str | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> os.stat_result:
    """``fstat`` of a file a job named, opened under the same rules as :func:`read_job_file`
    (nothing is read); raises as it does."""
    return _as_job_user(
        source, path, lambda fd, *_: os.fstat(fd), roots=roots, user=user, timeout_s=timeout_s
    )


def lstat_paths(
    source: str, paths: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> dict[str, os.stat_result | None]:
    """``lstat`` of many absolute ``paths`` at once (symlinks not followed; nothing opened,
    nothing read): one worker thread looks at them all, within ``timeout_s`` seconds in all, so
    telling whether thousands of logs grew costs one hand-off instead of one per file, and a
    hung network file system stalls that thread, never the caller. Returns path -> its
    ``lstat``, None for a path that does not exist (``ENOENT``); a path that is not absolute,
    cannot be looked at otherwise or was not reached in time is left out (the caller reads it
    as usual, under the rules). Says nothing about whether the rules let a file be read: read
    it with :func:`read_job_file_part`."""
    found: list[tuple[str, os.stat_result | None]] = []
    cancelled = threading.Event()

    def work() -> None:
        for path in paths:
            if cancelled.is_set():
                return
            if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
                continue
            try:
                found.append((path, os.lstat(path)))
            except FileNotFoundError:
                found.append((path, None))
            except (OSError, ValueError):
                continue

    try:
        _in_thread(source, f"{len(paths)} files", timeout_s, work)
    except SourceTemporaryError:
        pass  # past the limit, or earlier reads hung: what was looked at in time
    finally:
        cancelled.set()  # a look still running past the limit stops at its next path
    return dict(list(found))


def read_job_file_part(
    source: str,
    path: str,
    *,
    roots: Sequence[str],
    user: str | None,
    read_from: ReadFrom,
    max_bytes: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> FilePart:
    """At most ``max_bytes`` of a file a job named (its growing log), opened under the same
    rules as :func:`read_job_file`; ``read_from(fstat of the opened file)`` says where to start
    (None: read nothing, e.g. the file did not grow). Raises as :func:`read_job_file`
    (:class:`MissingFileError` when the file does not exist)."""

    def read(fd: int, deadline: float, cancelled: threading.Event) -> FilePart:
        return _part(fd, read_from, max_bytes, deadline, cancelled)

    return _as_job_user(source, path, read, roots=roots, user=user, timeout_s=timeout_s)


def _part(
    fd: int, read_from: ReadFrom, max_bytes: int, deadline: float, cancelled: threading.Event
) -> FilePart:
    info = os.fstat(fd)
    offset = read_from(info)
    if offset is None:
        return FilePart(info=info, offset_bytes=0, data=b"")
    os.lseek(fd, offset, os.SEEK_SET)
    return FilePart(
        info=info,
        offset_bytes=offset,
        data=_read_fd(fd, max_bytes, deadline, cancelled)[:max_bytes],
    )


def utf8_head(data: bytes) -> str:
    """The first bytes of a file as text: a character the cut split, and any other byte that is
    not UTF-8, becomes U+FFFD (a log's head is read for what it prints, never executed)."""
    return data.decode("utf-8", errors="replace")


def utf8_text(source: str, path: str, data: bytes) -> str:
    """``data`` decoded as UTF-8; ``SourcePermanentError(source, ...)`` naming ``path`` when
    it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourcePermanentError(source, f"{path}: not UTF-8 text ({exc.reason})") from None


def read_local_text(source: str, path: str, max_bytes: int) -> str:
    """:func:`read_local_file` decoded as UTF-8 (``SourcePermanentError`` when it is not)."""
    return utf8_text(source, path, read_local_file(source, path, max_bytes))


def read_local_file(source: str, path: str, max_bytes: int) -> bytes:
    """The bytes of the absolute ``path`` the planner's own user named (a command-line
    argument, an uploaded file), at most ``max_bytes``; symlinks are followed.

    A non-regular file is refused before it is opened (``stat``), the file is opened
    non-blocking and checked again on its descriptor. Raises ``SourcePermanentError(source,
    ...)`` when ``path`` is relative, missing, not a regular file, unreadable or larger than
    ``max_bytes`` (retrying cannot help), and ``SourceTemporaryError`` on other I/O errors.
    """

    def read(fd: int) -> bytes:
        return _read_fd(fd, max_bytes, float("inf"), threading.Event())

    data = _as_own_user(source, path, read, max_bytes=max_bytes)
    if len(data) > max_bytes:
        raise SourcePermanentError(source, f"{path}: larger than the {max_bytes}-byte limit")
    return data


def read_local_file_part(
    source: str, path: str, *, read_from: ReadFrom, max_bytes: int
) -> FilePart:
    """:func:`read_job_file_part` of a file the planner's own user named (a log given on the
    command line): regular files only, opened non-blocking, symlinks followed; raises as
    :func:`read_local_file` (:class:`MissingFileError` when the file does not exist)."""

    def read(fd: int) -> FilePart:
        return _part(fd, read_from, max_bytes, float("inf"), threading.Event())

    return _as_own_user(source, path, read)


def _as_own_user(
    source: str, path: str, use: Callable[[int], _T], *, max_bytes: int | None = None
) -> _T:
    """Open ``path`` as the planner's own user (regular files only, non-blocking, at most
    ``max_bytes`` when given) and return ``use(fd)``; failures as ``SourceError``."""
    _check_path(source, path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise SourcePermanentError(
                source, f"{path}: not a regular file ({_kind(info.st_mode)})"
            )
        if max_bytes is not None and info.st_size > max_bytes:
            raise SourcePermanentError(
                source, f"{path}: {info.st_size} bytes, larger than the {max_bytes}-byte limit"
            )
        fd = os.open(path, _FILE_FLAGS & ~os.O_NOFOLLOW)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SourcePermanentError(source, f"{path}: not a regular file")
            return use(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _os_error(source, path, exc) from None
