"""``SlurmSource``: reads a Slurm cluster through its command-line tools (the only I/O here).

Runs ``squeue --json``, ``sinfo --json``, ``sacct --json`` (recently ended jobs) and ``scontrol``
on the login/head node the planner runs on, and turns the answers into a
:class:`~planner.specs.job.ClusterSnapshot` with the pure parsers of :mod:`adapters.slurm`.
Tested against Slurm 22.05.8 (Debian bookworm).
"""

from __future__ import annotations

import locale
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import BinaryIO

from adapters.files import (
    DEFAULT_TIMEOUT_S,
    JobFileRead,
    job_file_access,
    read_job_file,
    read_job_files,
    utf8_head,
    utf8_text,
)
from adapters.slurm.output import SCHEDULER, SOURCE_SACCT
from adapters.slurm.sacct import is_accounting_disabled, parse_sacct_json
from adapters.slurm.scontrol import (
    batch_script_failed,
    parse_backfill_interval,
    parse_cluster_name,
)
from adapters.slurm.sinfo import parse_sinfo_json
from adapters.slurm.squeue import SqueueCache, SqueueRecord, parse_squeue_records
from planner.errors import SourceError, SourcePermanentError, SourceTemporaryError
from planner.specs.job import ClusterSnapshot, JobState

_log = logging.getLogger(__name__)

#: Seconds after which ``scontrol show config`` is read again (the cluster name, the backfill
#: cycle): a reconfigured controller is seen within this.
CONFIG_REFRESH_S = 600.0

#: Batch scripts fetched at once (``scontrol write batch_script``), each its own process.
SCRIPT_FETCHERS = 4

#: Bounds of the texts of job files kept for the rest of a cycle (``SlurmSource.read_text_file``):
#: files, and characters of them all (the files of a first cycle of 10,000 jobs: 8,000, most of
#: them missing scripts, whose refusal is a short message).
READ_MEMO_FILES = 16384
READ_MEMO_CHARS = 16 << 20

#: sacct states of ended jobs (completed, failed, cancelled, timeout, node fail, OOM, preempted).
ENDED_STATES = "CD,F,CA,TO,NF,OOM,PR,BF,DL"

# stderr texts that retrying will not fix: no configuration, bad usage.
_PERMANENT_HINTS = (
    "could not establish a configuration source",
    "unable to process configuration file",
    "unrecognized option",
    "invalid option",
    "usage:",
    "permission denied",
)


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command printed: exit status, stdout and stderr as text."""

    returncode: int
    stdout: str
    stderr: str


#: ``runner(argv, timeout_s, env) -> CommandResult``; raises ``TimeoutError`` when the command
#: ran past ``timeout_s`` (and was killed) and ``FileNotFoundError`` when it does not exist.
Runner = Callable[[Sequence[str], float, Mapping[str, str]], CommandResult]


def subprocess_runner(
    argv: Sequence[str], timeout_s: float, env: Mapping[str, str]
) -> CommandResult:
    """Default :data:`Runner`: ``subprocess.run`` without a shell, killed after ``timeout_s``.
    Its output is written to a file in memory and read in one piece (a pipe is read 32 KB at
    a time: 1,200 reads of a 40 MB ``squeue --json`` answer), and decoded as ``text=True``
    decodes it (:func:`_text`)."""
    with _output_file() as out:
        try:
            proc = subprocess.run(
                list(argv),
                stdout=out,
                stderr=subprocess.PIPE,
                timeout=timeout_s,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{argv[0]} ran longer than {timeout_s:g} s") from None
        out.seek(0)
        stdout = out.read()
    return CommandResult(proc.returncode, _text(stdout), _text(proc.stderr))


def _output_file() -> BinaryIO:
    """An anonymous file for a command's output: in memory where Linux has ``memfd_create``,
    else a temporary file."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        try:
            return open(memfd_create("slurm-output"), "w+b")
        except OSError:  # no memory files here (a kernel or sandbox without them)
            pass
    return tempfile.TemporaryFile()


def _text(data: bytes) -> str:
    """``data`` as ``subprocess.run(text=True, errors="replace")`` gives it: decoded in the
    locale's encoding, undecodable bytes replaced, line ends made ``\\n`` (the text is looked
    through for a carriage return once, not replaced twice: a 40 MB answer has none)."""
    text = data.decode(locale.getpreferredencoding(False), errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def detect_slurm(path_env: str | None = None) -> bool:
    """True when ``squeue`` and ``sinfo`` are on ``path_env`` (default: this process's PATH)."""
    path = path_env if path_env is not None else os.environ.get("PATH", os.defpath)
    return all(shutil.which(cmd, path=path) for cmd in ("squeue", "sinfo"))


class SlurmSource:
    """A :class:`planner.ports.SchedulerSource` for Slurm (22.05+ command-line tools).

    Parameters:
        cluster: cluster name to report; default: from the jobs' records, else ``scontrol show
            config`` ``ClusterName``.
        timeout_s: limit for each command, seconds; a command past it is killed and the call
            raises ``SourceTemporaryError``.
        bin_dir: directory holding the Slurm commands; default: looked up on PATH.
        use_sacct: ``True`` requires accounting (an error if disabled), ``False`` never runs sacct,
            ``None`` (default) runs it and, once Slurm answers that accounting is disabled, stops
            asking and reports a warning in each snapshot instead.
        sacct_window_s: how far back ended jobs are read, seconds.
        fetch_batch_scripts: read each active batch job's script once (``scontrol write
            batch_script``) into ``JobState.batch_script``.
        max_script_fetches: at most this many scripts are fetched per snapshot (the rest next time).
        allowed_file_roots: directories, besides each job's own working directory, under which
            files that jobs name (``planner:scenario=`` in the comment) may be read (setting
            ``slurm.allowed_file_roots``); default none. See :mod:`adapters.files` for the rules
            (read as the job's user would see them, regular files only, bounded).
        file_timeout_s: time limit of one such read, seconds.
        runner: runs one command (injectable for tests); default :func:`subprocess_runner`.
        env: variables layered over this process's environment for the commands (e.g.
            ``SLURM_CONF``).
        clock: returns epoch seconds (``taken_at_s``); default ``time.time``.
    """

    def __init__(
        self,
        cluster: str | None = None,
        *,
        timeout_s: float = 10.0,
        bin_dir: str | None = None,
        use_sacct: bool | None = None,
        sacct_window_s: float = 3600.0,
        fetch_batch_scripts: bool = True,
        max_script_fetches: int = 50,
        allowed_file_roots: Sequence[str] = (),
        file_timeout_s: float = DEFAULT_TIMEOUT_S,
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
        self._cluster = cluster
        self._timeout_s = float(timeout_s)
        self._bin_dir = bin_dir
        self._use_sacct = use_sacct
        self._sacct_disabled = False
        self._sacct_window_s = sacct_window_s
        self._fetch_scripts = fetch_batch_scripts
        self._max_script_fetches = max_script_fetches
        self._allowed_file_roots = tuple(allowed_file_roots)
        self._file_timeout_s = float(file_timeout_s)
        self._runner: Runner = runner or subprocess_runner
        self._env = dict(env or {})
        self._clock = clock
        # `scontrol show config`: its text and when it was read (None: never read; ""
        # when the read failed), for the cluster name and the backfill cycle.
        self._config_text: str | None = None
        self._config_read_s = 0.0
        # Slurm job id -> script text (None: Slurm has none, e.g. an srun job); fetched once.
        self._scripts: dict[int, str | None] = {}
        # Slurm job id -> (the squeue record's job, that job with its script): a job whose
        # record is the one of the last poll (the squeue cache keeps an unchanged job's) is
        # the same object as then, not copied again (10,000 copies a poll)
        self._scripted: dict[int, tuple[JobState, JobState]] = {}
        # The last squeue answer's records: the next poll parses only the jobs that changed.
        self._squeue_cache = SqueueCache()
        # Job files read since the last snapshot, by everything a read depends on (path, the
        # roots and user it is read as, the size limit), for the jobs of the same cycle that
        # read them again (a user's script submitted again and again names the same configs);
        # emptied at every snapshot. What is kept: the text, or the refusal (a launch reader
        # looks for files that are not there); not a temporary error, nor a log's head.
        self._read_memo: dict[
            tuple[str, tuple[str, ...], str | None, int], str | SourcePermanentError
        ] = {}
        self._read_memo_chars = 0
        self._in_cycle = False  # set by the first snapshot: before it, every read is read

    @property
    def scheduler(self) -> str:
        """``"slurm"``."""
        return SCHEDULER

    # ----------------------------------------------------------------------------- snapshot

    def snapshot(self) -> ClusterSnapshot:
        """Read active and recently ended jobs and the nodes now.

        Raises ``SourceTemporaryError`` when a command timed out or the controller could not be
        reached, ``SourcePermanentError`` when a command is missing or printed something
        unparseable. Failures of sacct (accounting disabled, slurmdbd down) and of batch script
        reads only add warnings, unless ``use_sacct=True`` and accounting is disabled.
        """
        taken_at_s = self._clock()
        self._read_memo.clear()  # a new cycle reads its jobs' files afresh
        self._read_memo_chars = 0
        self._in_cycle = True
        warnings: list[str] = []
        squeue = self._run_ok("squeue", ["--json", "--all"])
        records = parse_squeue_records(squeue, cluster=self._cluster, cache=self._squeue_cache)
        nodes = parse_sinfo_json(self._run_ok("sinfo", ["--json", "--all"]))

        failed = self._fetch_scripts_of(records)
        jobs = [self._with_script(rec, failed, warnings) for rec in records]
        live_ids = {rec.slurm_job_id for rec in records}
        self._scripts = {k: v for k, v in self._scripts.items() if k in live_ids}
        self._scripted = {k: v for k, v in self._scripted.items() if k in live_ids}

        seen = {job.job_id for job in jobs}
        jobs.extend(job for job in self._ended_jobs(warnings) if job.job_id not in seen)

        config = self._config(taken_at_s, warnings)
        cluster = self._cluster or next((j.cluster for j in jobs if j.cluster), None)
        if not cluster:
            cluster = parse_cluster_name(config) or ""
        jobs = [j if j.cluster else replace(j, cluster=cluster) for j in jobs]
        return ClusterSnapshot(
            scheduler=SCHEDULER,
            cluster=cluster,
            taken_at_s=taken_at_s,
            jobs=tuple(jobs),
            nodes=tuple(nodes),
            warnings=tuple(warnings),
            resources=tuple(r.resources for r in records if r.resources is not None),
            backfill_interval_s=parse_backfill_interval(config),
        )

    def _wants_script(self, rec: SqueueRecord) -> bool:
        return self._fetch_scripts and rec.is_batch and rec.job.status.is_active

    def _fetch_scripts_of(self, records: Sequence[SqueueRecord]) -> dict[int, SourceError]:
        """Fetch the scripts not fetched yet, the first ``max_script_fetches`` in ``records``'
        order, :data:`SCRIPT_FETCHERS` at a time (50 ``scontrol`` runs one after the
        other took a third of a second per cycle); returns the failures by job id."""
        missing = [r.slurm_job_id for r in records if self._wants_script(r)]
        missing = [i for i in dict.fromkeys(missing) if i not in self._scripts]
        wanted = missing[: max(0, self._max_script_fetches)]

        def fetch(slurm_job_id: int) -> str | SourceError | None:
            try:
                return self.batch_script(slurm_job_id)
            except SourceError as exc:
                return exc

        if len(wanted) > 1:
            with ThreadPoolExecutor(max_workers=SCRIPT_FETCHERS) as pool:
                results = list(pool.map(fetch, wanted))
        else:
            results = [fetch(i) for i in wanted]
        failed: dict[int, SourceError] = {}
        for slurm_job_id, result in zip(wanted, results, strict=True):
            if isinstance(result, SourceError):
                failed[slurm_job_id] = result
            else:
                self._scripts[slurm_job_id] = result
        return failed

    def _with_script(
        self, rec: SqueueRecord, failed: dict[int, SourceError], warnings: list[str]
    ) -> JobState:
        """``rec.job`` with its batch script when fetched (once per job id); the job made for
        the same record and script at the last poll, when there was one."""
        job = rec.job
        if not self._wants_script(rec):
            return job
        error = failed.get(rec.slurm_job_id)
        if error is not None:
            warnings.append(f"batch script of job {job.job_id} not read: {error}")
            return job
        script = self._scripts.get(rec.slurm_job_id)
        if script is None:
            return job
        kept = self._scripted.get(rec.slurm_job_id)
        if kept is not None and kept[0] is job and kept[1].batch_script is script:
            return kept[1]
        scripted = replace(job, batch_script=script)
        self._scripted[rec.slurm_job_id] = (job, scripted)
        return scripted

    def batch_script(self, slurm_job_id: int) -> str | None:
        """The batch script of a job (``scontrol write batch_script ID -``), or ``None`` when Slurm
        has none (``srun``/``salloc`` jobs, jobs already purged). Raises ``SourceError``."""
        result = self._run("scontrol", ["write", "batch_script", str(slurm_job_id), "-"])
        if result.returncode != 0:
            raise self._failure("scontrol", result)
        if batch_script_failed(result.stderr) or not result.stdout:
            return None
        return result.stdout

    def _ended_jobs(self, warnings: list[str]) -> list[JobState]:
        if self._use_sacct is False:
            return []
        if self._sacct_disabled:
            warnings.append("Slurm accounting is disabled: recently ended jobs are not reported")
            return []
        args = [
            "--json",
            "--allusers",
            "--allocations",
            "--starttime",
            f"now-{int(self._sacct_window_s)}",
            "--endtime",
            "now",
            "--state",
            ENDED_STATES,
        ]
        try:
            result = self._run("sacct", args)
        except SourceTemporaryError as exc:
            warnings.append(f"recently ended jobs not read: {exc}")
            return []
        if is_accounting_disabled(result.stderr + result.stdout):
            if self._use_sacct:
                raise SourcePermanentError(
                    SOURCE_SACCT,
                    "Slurm accounting storage is disabled but use_sacct=True; enable slurmdbd "
                    "or set use_sacct=False",
                )
            self._sacct_disabled = True
            _log.warning("Slurm accounting is disabled; ended jobs will not be reported")
            warnings.append("Slurm accounting is disabled: recently ended jobs are not reported")
            return []
        if result.returncode != 0:
            failure = self._failure("sacct", result)
            if isinstance(failure, SourcePermanentError) and self._use_sacct:
                raise failure
            warnings.append(f"recently ended jobs not read: {failure}")
            return []
        try:
            return parse_sacct_json(result.stdout, cluster=self._cluster)
        except SourceTemporaryError as exc:
            warnings.append(f"recently ended jobs not read: {exc}")
            return []

    def _config(self, now_s: float, warnings: list[str]) -> str:
        """``scontrol show config``'s text, read at the first snapshot and again every
        :data:`CONFIG_REFRESH_S` (an ``scontrol reconfigure`` changes it); "" when it could not
        be read (a warning the first time, then the last text or "" until the next try)."""
        if self._config_text is not None and now_s - self._config_read_s < CONFIG_REFRESH_S:
            return self._config_text
        first = self._config_text is None
        self._config_read_s = now_s
        try:
            self._config_text = self._run_ok("scontrol", ["show", "config"])
        except SourceError as exc:
            if first:
                warnings.append(
                    f"scontrol show config not read (cluster name and backfill cycle unknown): "
                    f"{exc}"
                )
            self._config_text = self._config_text or ""
        return self._config_text

    # ----------------------------------------------------------------------------- files

    def read_text_file(
        self, path: str, max_bytes: int, *, job: JobState | None = None, head: bool = False
    ) -> str:
        """Read a UTF-8 text file on this host that ``job`` names (a scenario in its comment).

        Read only under the job's working directory and ``allowed_file_roots``, as the job's
        user would see it (:func:`adapters.files.job_file_access`); without ``job`` only
        world-readable files under ``allowed_file_roots``. ``path`` must be absolute. Raises
        ``SourcePermanentError`` when a rule refuses it or it is missing, larger than
        ``max_bytes`` or not UTF-8, and ``SourceTemporaryError`` on a timeout or other I/O
        errors; no message holds the file's content.

        Once a :meth:`snapshot` was taken, what a read since the last one gave (the text, or
        a permanent error) is given again to a job that reads the file as the same user under
        the same roots and limit (at most :data:`READ_MEMO_FILES` files,
        :data:`READ_MEMO_CHARS` characters): the jobs of one cycle see its files as they were
        when it first read them.
        """
        roots, user = job_file_access(job, self._allowed_file_roots)
        key = (path, roots, user, max_bytes)
        kept = self._read_memo.get(key) if self._in_cycle and not head else None
        if isinstance(kept, SourcePermanentError):
            raise type(kept)(kept.source, kept.message)
        if kept is not None:
            return kept
        try:
            data = read_job_file(
                "slurm:file",
                path,
                roots=roots,
                user=user,
                max_bytes=max_bytes,
                timeout_s=self._file_timeout_s,
                head=head,
            )
            if head:
                return utf8_head(data)
            text = utf8_text("slurm:file", path, data)
        except SourcePermanentError as exc:
            if self._in_cycle and not head:
                self._keep_read(key, exc, len(exc.message))
            raise
        if self._in_cycle:
            self._keep_read(key, text, len(text))
        return text

    def read_text_files(self, reads: Sequence[tuple[str, JobState]], max_bytes: int) -> int:
        """Read files that jobs of this cycle will read with :meth:`read_text_file` (``(path,
        job)`` pairs; the same ``max_bytes`` for all) in one hand-off to a worker thread
        (:func:`adapters.files.read_job_files`: each under the rules, as its job's user would
        read it), keeping what each gave for the rest of the cycle as :meth:`read_text_file`
        keeps it: a job that then reads its file gets it without a hand-off of its own. Only
        after a snapshot, within :data:`READ_MEMO_FILES`; a file kept already is not read
        again, one that failed otherwise or was not read in time is left for its job's own
        read. Returns how many files were asked of the worker thread."""
        if not self._in_cycle:
            return 0
        wanted: dict[tuple[str, tuple[str, ...], str | None, int], JobFileRead] = {}
        for path, job in reads:
            roots, user = job_file_access(job, self._allowed_file_roots)
            key = (path, roots, user, max_bytes)
            if key not in self._read_memo and key not in wanted:
                wanted[key] = JobFileRead(path=path, roots=roots, user=user)
        room = READ_MEMO_FILES - len(self._read_memo)
        keys = list(wanted)[: max(0, room)]
        if not keys:
            return 0
        outcomes = read_job_files(
            "slurm:file",
            [wanted[key] for key in keys],
            max_bytes=max_bytes,
            max_total_bytes=max(0, READ_MEMO_CHARS - self._read_memo_chars),  # what it keeps
            timeout_s=self._file_timeout_s,
        )
        for index, outcome in outcomes.items():
            key = keys[index]
            if isinstance(outcome, SourcePermanentError):
                self._keep_read(key, outcome, len(outcome.message))
                continue
            try:
                text = utf8_text("slurm:file", key[0], outcome)
            except SourcePermanentError as exc:
                self._keep_read(key, exc, len(exc.message))
            else:
                self._keep_read(key, text, len(text))
        return len(keys)

    def _keep_read(
        self,
        key: tuple[str, tuple[str, ...], str | None, int],
        outcome: str | SourcePermanentError,
        chars: int,
    ) -> None:
        if len(self._read_memo) < READ_MEMO_FILES and (
            self._read_memo_chars + chars <= READ_MEMO_CHARS
        ):
            self._read_memo[key] = outcome
            self._read_memo_chars += chars

    # ----------------------------------------------------------------------------- commands

    def _argv0(self, command: str) -> str:
        return os.path.join(self._bin_dir, command) if self._bin_dir else command

    def _run(self, command: str, args: Sequence[str]) -> CommandResult:
        """Run a Slurm command; raises for a missing command or a timeout, not for rc != 0."""
        source = f"slurm:{command}"
        argv = [self._argv0(command), *args]
        env = {**os.environ, **self._env}
        try:
            return self._runner(argv, self._timeout_s, env)
        except TimeoutError:
            raise SourceTemporaryError(
                source, f"`{' '.join(argv)}` timed out after {self._timeout_s:g} s"
            ) from None
        except FileNotFoundError:
            raise SourcePermanentError(
                source, f"command {argv[0]!r} not found (is Slurm installed? bin_dir/PATH)"
            ) from None
        except PermissionError:
            raise SourcePermanentError(source, f"command {argv[0]!r} is not executable") from None
        except OSError as exc:
            raise SourceTemporaryError(source, f"could not run {argv[0]!r}: {exc}") from None

    def _run_ok(self, command: str, args: Sequence[str]) -> str:
        result = self._run(command, args)
        if result.returncode != 0:
            raise self._failure(command, result)
        return result.stdout

    def _failure(self, command: str, result: CommandResult) -> SourceError:
        """Classify a non-zero exit: configuration/usage errors are permanent, the rest (e.g.
        "Unable to contact slurm controller", slurmdbd down) temporary."""
        text = (result.stderr.strip() or result.stdout.strip())[-500:]
        message = f"exit status {result.returncode}: {text or '(no output)'}"
        if any(hint in text.lower() for hint in _PERMANENT_HINTS):
            return SourcePermanentError(f"slurm:{command}", message)
        return SourceTemporaryError(f"slurm:{command}", message)
