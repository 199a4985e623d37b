"""SlurmSource with an injected runner replaying outputs recorded from Slurm 22.05.8."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.files import MissingFileError, read_job_file
from adapters.slurm import source as source_module
from adapters.slurm.source import (
    CONFIG_REFRESH_S,
    CommandResult,
    SlurmSource,
    detect_slurm,
    subprocess_runner,
)
from planner.errors import SourceError, SourcePermanentError, SourceTemporaryError
from planner.ports import SchedulerSource
from planner.specs.job import JobState, JobStatus

DATA = Path(__file__).parents[2] / "data" / "slurm"


def read(name: str) -> str:
    return (DATA / name).read_text()


Handler = Callable[[list[str]], CommandResult]


class FakeRunner:
    """Answers each Slurm command from a table; records the calls."""

    def __init__(self, handlers: Mapping[str, Handler | CommandResult | Exception]) -> None:
        self.handlers = dict(handlers)
        self.calls: list[list[str]] = []
        self.envs: list[Mapping[str, str]] = []

    def __call__(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str]
    ) -> CommandResult:
        self.calls.append(list(argv))
        self.envs.append(env)
        handler = self.handlers[os.path.basename(argv[0])]
        if isinstance(handler, Exception):
            raise handler
        if isinstance(handler, CommandResult):
            return handler
        return handler(list(argv))

    def commands(self, name: str) -> list[list[str]]:
        return [c for c in self.calls if os.path.basename(c[0]) == name]

    def script_fetches(self) -> list[list[str]]:
        """The ``scontrol write batch_script`` calls."""
        return [c for c in self.commands("scontrol") if c[1:2] == ["write"]]


def ok(text: str) -> CommandResult:
    return CommandResult(0, text, "")


def scripts(argv: list[str]) -> CommandResult:
    """``scontrol``: the recorded ``show config``, and the recorded batch scripts."""
    if argv[1:] == ["show", "config"]:
        return ok(read("scontrol_show_config.txt"))
    job_id = argv[3]
    if job_id == "4":
        return ok(read("batch_script_4.sh"))
    if job_id == "5":
        return ok(read("batch_script_5_wrap.sh"))
    return CommandResult(0, "", "job script retrieval failed: Job script not specified\n")


def recorded(**overrides: Handler | CommandResult | Exception) -> FakeRunner:
    handlers: dict[str, Handler | CommandResult | Exception] = {
        "squeue": ok(read("squeue.json")),
        "sinfo": ok(read("sinfo.json")),
        "sacct": ok(read("sacct_ended.json")),
        "scontrol": scripts,
    }
    handlers.update(overrides)
    return FakeRunner(handlers)


def test_slurm_source_satisfies_the_port() -> None:
    source: SchedulerSource = SlurmSource(runner=recorded())
    assert source.scheduler == "slurm"


def test_snapshot_merges_active_ended_nodes_and_scripts() -> None:
    runner = recorded()
    source = SlurmSource(runner=runner, clock=lambda: 1795243000.0, env={"SLURM_CONF": "/x.conf"})
    snap = source.snapshot()
    assert (snap.scheduler, snap.cluster, snap.taken_at_s) == ("slurm", "devcluster", 1795243000.0)
    jobs = {j.job_id: j for j in snap.jobs}
    assert jobs["4"].batch_script is not None
    assert "--tensor-model-parallel-size 2" in jobs["4"].batch_script
    assert jobs["5"].batch_script == read("batch_script_5_wrap.sh")
    assert jobs["7"].batch_script is None  # srun job: no script, not even asked
    assert jobs["17"].status is JobStatus.COMPLETED  # only sacct knows it
    assert jobs["17"].num_gpus == 3
    assert jobs["1"].status is JobStatus.RUNNING  # squeue's view wins over sacct's
    assert [n.name for n in snap.nodes] == ["node1", "node2"]
    assert snap.warnings == ()
    assert all(env["SLURM_CONF"] == "/x.conf" for env in runner.envs)
    assert "PATH" in runner.envs[0]
    (sacct,) = runner.commands("sacct")
    assert "--json" in sacct
    assert "CD,F,CA,TO,NF,OOM,PR,BF,DL" in sacct
    script_ids = sorted(c[3] for c in runner.script_fetches())
    # active batch jobs only (not 2/3 which ended, not srun job 7); by Slurm's numeric id
    assert script_ids == sorted(["1", "4", "5", "9", "8", "10", "6", "11", "13"])


def test_batch_scripts_are_fetched_once_per_job() -> None:
    runner = recorded()
    source = SlurmSource(runner=runner)
    source.snapshot()
    first = len(runner.script_fetches())
    snap = source.snapshot()
    assert len(runner.script_fetches()) == first
    assert {j.job_id: j for j in snap.jobs}["4"].batch_script is not None


def test_a_job_whose_record_did_not_change_is_the_one_made_at_the_last_poll() -> None:
    """A job whose squeue record is the same as at the last poll is the job (with its batch
    script) made then, not a new copy (10,000 copies a poll at 10,000 jobs)."""
    source = SlurmSource(runner=recorded())
    first = {j.job_id: j for j in source.snapshot().jobs}
    second = {j.job_id: j for j in source.snapshot().jobs}
    scripted = [job_id for job_id, job in first.items() if job.batch_script is not None]
    assert "4" in scripted
    assert all(second[job_id] is first[job_id] for job_id in scripted)


def test_batch_script_fetches_are_capped_per_snapshot() -> None:
    runner = recorded()
    source = SlurmSource(runner=runner, max_script_fetches=2)
    source.snapshot()
    assert len(runner.script_fetches()) == 2
    source.snapshot()
    assert len(runner.script_fetches()) == 4


def test_batch_script_failure_is_a_warning() -> None:
    runner = recorded(scontrol=TimeoutError("slow"))
    snap = SlurmSource(runner=runner, max_script_fetches=1).snapshot()
    assert any("batch script of job" in w for w in snap.warnings)


def test_no_scripts_when_disabled() -> None:
    runner = recorded()
    SlurmSource(runner=runner, fetch_batch_scripts=False, use_sacct=False).snapshot()
    assert runner.script_fetches() == []
    assert runner.commands("sacct") == []


def test_accounting_disabled_is_detected_once_and_warned() -> None:
    disabled = CommandResult(1, "", read("sacct_accounting_disabled.stderr"))
    runner = recorded(sacct=disabled)
    source = SlurmSource(runner=runner)
    first = source.snapshot()
    second = source.snapshot()
    assert len(runner.commands("sacct")) == 1
    for snap in (first, second):
        assert any("accounting is disabled" in w for w in snap.warnings)
        assert {j.job_id for j in snap.jobs} >= {"4", "8"}


def test_accounting_disabled_with_use_sacct_true_is_permanent() -> None:
    runner = recorded(sacct=CommandResult(1, "", read("sacct_accounting_disabled.stderr")))
    with pytest.raises(SourcePermanentError, match="accounting"):
        SlurmSource(runner=runner, use_sacct=True).snapshot()


def test_slurmdbd_down_is_a_warning() -> None:
    down = CommandResult(1, "", "sacct: error: Problem talking to the database: Connection refused")
    snap = SlurmSource(runner=recorded(sacct=down)).snapshot()
    assert any("Connection refused" in w for w in snap.warnings)


def test_cluster_name_from_config_when_jobs_do_not_say() -> None:
    def scontrol(argv: list[str]) -> CommandResult:
        assert argv[1:] == ["show", "config"]
        return ok(read("scontrol_show_config.txt"))

    runner = recorded(squeue=ok('{"jobs": []}'), sacct=ok('{"jobs": []}'), scontrol=scontrol)
    source = SlurmSource(runner=runner)
    assert source.snapshot().cluster == "devcluster"
    assert source.snapshot().cluster == "devcluster"
    assert len(runner.commands("scontrol")) == 1  # cached


def test_the_backfill_cycle_is_read_from_the_config_and_read_again_after_a_while() -> None:
    configs = [read("scontrol_show_config.txt")]  # bf_interval=5

    def scontrol(argv: list[str]) -> CommandResult:
        return ok(configs[-1]) if argv[1:] == ["show", "config"] else scripts(argv)

    now = [1795243000.0]
    runner = recorded(scontrol=scontrol)
    source = SlurmSource(runner=runner, clock=lambda: now[0])
    assert source.snapshot().backfill_interval_s == 5.0
    configs.append(configs[0].replace("bf_interval=5", "bf_interval=45,bf_window=1440"))
    now[0] += CONFIG_REFRESH_S - 1
    assert source.snapshot().backfill_interval_s == 5.0  # not read again yet
    now[0] += 1
    assert source.snapshot().backfill_interval_s == 45.0  # after `scontrol reconfigure`
    shows = [c for c in runner.commands("scontrol") if c[1:] == ["show", "config"]]
    assert len(shows) == 2


def test_a_config_that_cannot_be_read_is_one_warning_and_no_backfill_cycle() -> None:
    refused = CommandResult(1, "", "slurm_load_ctl_conf error: Unable to contact slurm controller")

    def scontrol(argv: list[str]) -> CommandResult:
        return refused if argv[1:] == ["show", "config"] else scripts(argv)

    source = SlurmSource(runner=recorded(scontrol=scontrol))
    first, second = source.snapshot(), source.snapshot()
    assert first.backfill_interval_s is None
    assert first.cluster == "devcluster"  # the jobs say it
    (warning,) = [w for w in first.warnings if "show config" in w]
    assert "backfill cycle unknown" in warning
    assert "Unable to contact slurm controller" in warning
    assert not [w for w in second.warnings if "show config" in w]


def test_cluster_override_wins() -> None:
    snap = SlurmSource("prod", runner=recorded()).snapshot()
    assert snap.cluster == "prod"
    assert {j.cluster for j in snap.jobs} == {"prod"}


def test_controller_down_json_is_temporary() -> None:
    runner = recorded(squeue=ok(read("squeue_controller_down.stdout")))
    with pytest.raises(SourceTemporaryError) as err:
        SlurmSource(runner=runner).snapshot()
    assert err.value.source == "slurm:squeue"


@pytest.mark.parametrize(
    ("result", "error"),
    [
        (TimeoutError("x"), SourceTemporaryError),
        (FileNotFoundError("squeue"), SourcePermanentError),
        (PermissionError("squeue"), SourcePermanentError),
        (
            CommandResult(1, "", "squeue: error: Unable to contact slurm controller"),
            SourceTemporaryError,
        ),
        (
            CommandResult(1, "", "sinfo: fatal: Could not establish a configuration source"),
            SourcePermanentError,
        ),
        (CommandResult(1, "", ""), SourceTemporaryError),
        (ok("garbage"), SourcePermanentError),
    ],
)
def test_command_failures_map_to_source_errors(
    result: CommandResult | Exception, error: type[Exception]
) -> None:
    with pytest.raises(error) as err:
        SlurmSource(runner=recorded(squeue=result)).snapshot()
    assert err.value.source == "slurm:squeue"  # type: ignore[attr-defined]


def test_bin_dir_prefixes_commands() -> None:
    runner = recorded()
    SlurmSource(runner=runner, bin_dir="/opt/slurm/bin", use_sacct=False).snapshot()
    assert runner.calls[0][0] == "/opt/slurm/bin/squeue"


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        SlurmSource(timeout_s=0)


# --------------------------------------------------------------------------- default runner


def test_subprocess_runner_kills_on_timeout() -> None:
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        subprocess_runner([sys.executable, "-c", "import time; time.sleep(30)"], 0.3, os.environ)
    assert time.monotonic() - start < 2.0


def test_subprocess_runner_reads_a_file_and_decodes_as_text_mode() -> None:
    """A command's output is written to a file and read in one piece (not 32 KB at a time
    from a pipe: a 40 MB answer) and decoded as ``subprocess.run(text=True, errors="replace")``
    decodes it: line ends made ``\\n``, undecodable bytes replaced."""
    script = (
        "import os, stat, sys; "
        "sys.stdout.buffer.write(b'a\\r\\nb\\rc\\xff\\n'); "
        "sys.stdout.buffer.write(b'pipe' if stat.S_ISFIFO(os.fstat(1).st_mode) else b'file'); "
        "sys.stderr.buffer.write(b'err\\r\\n'); sys.exit(3)"
    )
    argv = [sys.executable, "-c", script]
    result = subprocess_runner(argv, 30.0, os.environ)
    text = subprocess.run(argv, capture_output=True, text=True, errors="replace", check=False)
    assert text.stdout.endswith("pipe")
    assert result.stdout == text.stdout.removesuffix("pipe") + "file"
    assert (result.returncode, result.stderr) == (3, text.stderr) == (3, "err\n")
    assert "\ufffd" in result.stdout


def test_subprocess_runner_missing_command() -> None:
    with pytest.raises(FileNotFoundError):
        subprocess_runner(["/nonexistent/squeue"], 1.0, os.environ)


def test_real_runner_through_source_on_a_fake_squeue(tmp_path: Path) -> None:
    """The default runner end to end, with shell scripts standing in for the Slurm commands."""
    for name, body in {
        "squeue": f"cat {DATA / 'squeue.json'}",
        "sinfo": f"cat {DATA / 'sinfo.json'}",
        "sacct": "echo 'Slurm accounting storage is disabled' >&2; exit 1",
        "scontrol": 'echo "conf=$SLURM_CONF"',
    }.items():
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    source = SlurmSource(bin_dir=str(tmp_path), env={"SLURM_CONF": "/etc/x.conf"})
    snap = source.snapshot()
    assert {j.job_id: j for j in snap.jobs}["4"].batch_script == "conf=/etc/x.conf\n"
    assert any("accounting" in w for w in snap.warnings)


def test_detect_slurm(tmp_path: Path) -> None:
    assert detect_slurm(str(tmp_path)) is False
    for name in ("squeue", "sinfo"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert detect_slurm(str(tmp_path)) is True


# --------------------------------------------------------------------------- read_text_file


def test_read_text_file(tmp_path: Path) -> None:
    source = SlurmSource(runner=recorded())
    job = JobState(
        scheduler="slurm",
        cluster="c",
        job_id="1",
        user=pwd.getpwuid(os.getuid()).pw_name,
        work_dir=str(tmp_path),
    )
    path = tmp_path / "x.yaml"
    path.write_text("model: gpt\n")
    assert source.read_text_file(str(path), 100, job=job) == "model: gpt\n"
    with pytest.raises(SourcePermanentError, match="larger than the 5-byte limit"):
        source.read_text_file(str(path), 5, job=job)
    with pytest.raises(SourcePermanentError, match="no such file"):
        source.read_text_file(str(tmp_path / "missing.yaml"), 100, job=job)
    with pytest.raises(SourcePermanentError, match="not a regular file"):
        source.read_text_file(str(tmp_path), 100, job=job)
    with pytest.raises(SourcePermanentError, match="not an absolute path"):
        source.read_text_file("x.yaml", 100, job=job)
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe")
    with pytest.raises(SourcePermanentError, match="not UTF-8"):
        source.read_text_file(str(tmp_path / "bin.yaml"), 100, job=job)


def test_a_job_file_is_read_once_per_cycle_by_jobs_that_see_it_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[str] = []
    real = read_job_file

    def counting(source: str, path: str, **kw: Any) -> bytes:
        read.append(path)
        return real(source, path, **kw)

    monkeypatch.setattr(source_module, "read_job_file", counting)
    source = SlurmSource(runner=recorded())
    source.snapshot()  # a cycle begins
    me = pwd.getpwuid(os.getuid()).pw_name
    job = JobState(scheduler="slurm", cluster="c", job_id="1", user=me, work_dir=str(tmp_path))
    again = JobState(scheduler="slurm", cluster="c", job_id="2", user=me, work_dir=str(tmp_path))
    path = tmp_path / "run.yaml"
    path.write_text("model: gpt\n")
    assert source.read_text_file(str(path), 100, job=job) == "model: gpt\n"
    assert source.read_text_file(str(path), 100, job=again) == "model: gpt\n"
    assert read == [str(path)]
    # a job that sees the file otherwise reads it under its own rules: here refused
    (tmp_path / "other").mkdir()
    other = JobState(
        scheduler="slurm", cluster="c", job_id="3", user=me, work_dir=str(tmp_path / "other")
    )
    with pytest.raises(SourcePermanentError, match="outside the allowed directories"):
        source.read_text_file(str(path), 100, job=other)
    with pytest.raises(SourcePermanentError, match="larger than the 5-byte limit"):
        source.read_text_file(str(path), 5, job=job)
    assert source.read_text_file(str(path), 100, job=job, head=True) == "model: gpt\n"
    assert len(read) == 4
    # a file that is not there is not there for the rest of the cycle either
    for reader in (job, again):
        with pytest.raises(MissingFileError, match="no such file"):
            source.read_text_file(str(tmp_path / "absent.yaml"), 100, job=reader)
    assert len(read) == 5
    # the next cycle reads them afresh
    path.write_text("model: llama\n")
    (tmp_path / "absent.yaml").write_text("model: gpt\n")
    source.snapshot()
    assert source.read_text_file(str(path), 100, job=again) == "model: llama\n"
    assert source.read_text_file(str(tmp_path / "absent.yaml"), 100, job=job) == "model: gpt\n"
    assert len(read) == 7


def test_subprocess_module_is_only_used_by_the_source() -> None:
    root = Path(__file__).parents[3] / "adapters" / "slurm"
    users = [p.name for p in root.glob("*.py") if "subprocess" in p.read_text()]
    assert users == ["source.py"]
    assert subprocess is not None


SECRET = "s3cret:not-for-the-log"


def _nobody() -> str:
    """``nobody``, a host user other than the one running the tests."""
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' on this host")
    if entry.pw_uid == os.getuid():
        pytest.skip("the tests run as 'nobody'")
    return entry.pw_name


def _job_of(user: str, work_dir: Path) -> JobState:
    return JobState(scheduler="slurm", cluster="c", job_id="9", user=user, work_dir=str(work_dir))


def test_files_read_at_once_are_each_read_under_their_jobs_rules(
    job_dir: Path, fifo: Path, file_handoffs: list[tuple[str, str]]
) -> None:
    """``SlurmSource.read_text_files`` reads many jobs' files in one hand-off to a reader
    thread; each file then gives its job what that job's own read gives (the text, or the same
    refusal: another user's view, outside the roots, a symlink out, a FIFO, /dev/zero, too
    large, not UTF-8, missing), and no job reads another's outcome."""
    secret = job_dir / "shadow"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    (job_dir / "out.yaml").symlink_to("/etc/passwd")
    (job_dir / "zero.yaml").symlink_to("/dev/zero")
    (job_dir / "run.yaml").write_text("model: {preset: llama3-8b}\n")
    (job_dir / "big.yaml").write_text("x" * 200)
    (job_dir / "bin.yaml").write_bytes(b"\xff\xfe")
    mine = _job_of(pwd.getpwuid(os.getuid()).pw_name, job_dir)
    nobody = _job_of(_nobody(), job_dir)
    reads = [
        (str(job_dir / "run.yaml"), mine),
        (str(job_dir / "run.yaml"), nobody),
        (str(secret), mine),
        (str(secret), nobody),
        ("/etc/passwd", mine),
        (str(job_dir / "out.yaml"), mine),
        (str(fifo), mine),
        (str(job_dir / "zero.yaml"), mine),
        (str(job_dir / "big.yaml"), mine),
        (str(job_dir / "bin.yaml"), mine),
        (str(job_dir / "absent.yaml"), mine),
        ("relative.yaml", mine),
    ]

    def outcome(source: SlurmSource, path: str, job: JobState, limit: int = 100) -> str:
        try:
            return "text: " + source.read_text_file(path, limit, job=job)
        except SourceError as exc:
            return f"{type(exc).__name__}: {exc}"

    alone = SlurmSource(allowed_file_roots=["/dev"])  # never in a cycle: reads every time
    expected = [outcome(alone, path, job) for path, job in reads]
    assert expected[0] == expected[1] == "text: model: {preset: llama3-8b}\n"
    assert expected[2] == "text: " + SECRET
    assert "not readable by user nobody" in expected[3]
    assert len(set(expected[2:])) == len(expected) - 2  # each refusal its own

    source = SlurmSource(allowed_file_roots=["/dev"], runner=recorded())
    source.snapshot()  # a cycle begins
    file_handoffs.clear()

    def handoffs() -> list[str]:
        return [path for _, path in file_handoffs]

    assert source.read_text_files(reads, 100) == len(reads)
    assert handoffs() == [f"{len(reads)} files"]
    assert [outcome(source, path, job) for path, job in reads] == expected
    assert handoffs() == [f"{len(reads)} files"]  # each job got what was read for it
    assert source.read_text_files(reads, 100) == 0  # all kept: nothing read again
    assert outcome(source, str(job_dir / "big.yaml"), mine) == expected[8]
    assert len(handoffs()) == 1
    # a read with another size limit is a read of its own
    assert "larger than" in outcome(source, str(job_dir / "run.yaml"), mine, limit=5)
    assert handoffs()[1:] == [str(job_dir / "run.yaml")]


def test_files_read_at_once_hold_no_more_than_the_cycle_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file_handoffs: list[tuple[str, str]]
) -> None:
    """``read_text_files`` reads no more than the cycle's memo of file texts may keep
    (``READ_MEMO_CHARS``): the files past it are read by their jobs, one by one."""
    monkeypatch.setattr(source_module, "READ_MEMO_CHARS", 15)
    job = _job_of(pwd.getpwuid(os.getuid()).pw_name, tmp_path)
    reads = []
    for name in ("a.yaml", "b.yaml", "c.yaml"):
        (tmp_path / name).write_text("model: gpt\n")  # 11 characters
        reads.append((str(tmp_path / name), job))
    read_at_once: list[int] = []
    real = source_module.read_job_files

    def counting(*args: Any, **kw: Any) -> Any:
        found = real(*args, **kw)
        read_at_once.append(len(found))
        return found

    monkeypatch.setattr(source_module, "read_job_files", counting)
    source = SlurmSource(runner=recorded())
    source.snapshot()
    file_handoffs.clear()
    assert source.read_text_files(reads, 100) == 3
    assert read_at_once == [2]  # a's 11 characters, then b's reach the 15: c is not read
    assert [source.read_text_file(path, 100, job=job) for path, job in reads] == [
        "model: gpt\n"
    ] * 3
    assert [path for _, path in file_handoffs] == [
        "3 files",
        str(tmp_path / "b.yaml"),
        str(tmp_path / "c.yaml"),
    ]
