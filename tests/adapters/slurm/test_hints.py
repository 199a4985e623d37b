"""Slurm hints: comment merging, time-limit policy, hints file, writer (injected runner)."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.slurm import (
    COMMENT_MAX_BYTES,
    SlurmHint,
    SlurmHintWriter,
    TimeLimitPolicy,
    UnknownJobError,
    job_key,
    merge_hint,
    parse_hint_token,
    propose_time_limit_min,
    scenario_key,
    write_hints_file,
)
from adapters.slurm.hints import (
    HINT_PREFIX,
    HINTS_FILE_HEADER,
    format_hint_token,
    format_hints_file,
    policy_time_limit_min,
    read_hints_file,
    strip_hint,
)
from adapters.slurm.source import CommandResult
from planner.errors import SourcePermanentError, SourceTemporaryError, SpecError

FULL = SlurmHint(
    predicted_runtime_s=12345.4,
    runtime_p90_s=14000,
    eta_s=1_795_000_000.2,
    recommended_gpus=16,
    recommended_parallelism="tp=8,pp=2,dp=1",
)
TOKEN_RE = re.compile(r"(?:(?<=[ \t\n\r\f\v])|^)planner:hint=")

# ----------------------------------------------------------------------------- token


def test_token_syntax_and_round_trip() -> None:
    token = format_hint_token(FULL)
    assert token == "planner:hint=rt:12345;eta:1795000000;p90:14000;gpus:16;par:tp=8,pp=2,dp=1"
    back = parse_hint_token(f"user text {token} other:tool")
    assert back == SlurmHint(
        predicted_runtime_s=12345,
        runtime_p90_s=14000,
        eta_s=1_795_000_000,
        recommended_gpus=16,
        recommended_parallelism="tp=8,pp=2,dp=1",
    )


def test_token_drops_fields_from_the_end_to_fit() -> None:
    assert format_hint_token(FULL, max_bytes=40) == "planner:hint=rt:12345;eta:1795000000"
    assert format_hint_token(FULL, max_bytes=len("planner:hint=rt:12345")) == (
        "planner:hint=rt:12345"
    )
    assert format_hint_token(FULL, max_bytes=15) == ""


def test_parse_ignores_unknown_keys_and_rejects_garbage() -> None:
    assert parse_hint_token("planner:hint=rt:60;new:1;x") == SlurmHint(predicted_runtime_s=60)
    assert parse_hint_token("planner:hint=eta:5") is None
    assert parse_hint_token("planner:hint=rt:abc") is None
    assert parse_hint_token("xplanner:hint=rt:60") is None
    assert parse_hint_token("") is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"predicted_runtime_s": 0}, "predicted_runtime_s"),
        ({"predicted_runtime_s": math.nan}, "predicted_runtime_s"),
        ({"predicted_runtime_s": 1, "runtime_p90_s": -1}, "runtime_p90_s"),
        ({"predicted_runtime_s": 1, "eta_s": math.inf}, "eta_s"),
        ({"predicted_runtime_s": 1, "recommended_gpus": 0}, "recommended_gpus"),
        ({"predicted_runtime_s": 1, "recommended_parallelism": "tp 8"}, "recommended_parallelism"),
        ({"predicted_runtime_s": 1, "recommended_parallelism": "a;b"}, "recommended_parallelism"),
    ],
)
def test_bad_hints_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        SlurmHint(**kwargs)
    assert err.value.field == field


# ----------------------------------------------------------------------------- comment merging


def test_merge_keeps_users_text_and_other_tokens() -> None:
    comment = "my run planner:scenario=/x.yaml other:tool=1"
    merged = merge_hint(comment, FULL)
    assert merged == f"{comment} {format_hint_token(FULL)}"
    again = merge_hint(merged + " late:tool", SlurmHint(predicted_runtime_s=60))
    assert again == f"{comment} late:tool planner:hint=rt:60"
    assert merge_hint(again, None) == f"{comment} late:tool"
    assert merge_hint("", FULL) == format_hint_token(FULL)
    assert strip_hint("planner:hint=rt:1 rest") == "rest"


def test_merge_never_shortens_the_users_text() -> None:
    long_text = "é" * 500 + "x" * 10  # 1010 bytes: room for 13 bytes, too few for a token
    assert merge_hint(long_text, FULL) == long_text
    almost = "x" * (COMMENT_MAX_BYTES - 1 - len("planner:hint=rt:12345;eta:1795000000"))
    merged = merge_hint(almost, FULL)
    assert merged == f"{almost} planner:hint=rt:12345;eta:1795000000"
    assert len(merged.encode()) == COMMENT_MAX_BYTES
    too_long = "y" * 2000
    assert merge_hint(too_long + " planner:hint=rt:5", FULL) == too_long


# Comments a user or another tool may have written: printable text, whitespace, non-ASCII.
pieces = st.sampled_from(
    [*"ab:=;/ \t\n.é€_-", "planner:hint", "planner:scenario=/x.yaml", "xplanner:hint=1", "  "]
)
user_texts = st.lists(pieces, max_size=30).map("".join).filter(lambda t: not TOKEN_RE.search(t))
hints = st.builds(
    SlurmHint,
    predicted_runtime_s=st.floats(1, 1e8),
    runtime_p90_s=st.none() | st.floats(1, 1e8),
    eta_s=st.none() | st.floats(1, 4e9),
    recommended_gpus=st.none() | st.integers(1, 100_000),
    recommended_parallelism=st.none() | st.from_regex(r"[a-z0-9=,.]{1,40}", fullmatch=True),
)
budgets = st.integers(0, COMMENT_MAX_BYTES)


@given(text=user_texts, hint=hints, max_bytes=budgets)
def test_users_text_is_preserved_byte_for_byte(text: str, hint: SlurmHint, max_bytes: int) -> None:
    merged = merge_hint(text, hint, max_bytes=max_bytes)
    assert strip_hint(merged) == text
    assert merged.startswith(text)


@given(text=user_texts, first=hints, second=hints, max_bytes=budgets)
def test_merge_is_idempotent_and_our_token_unique(
    text: str, first: SlurmHint, second: SlurmHint, max_bytes: int
) -> None:
    once = merge_hint(text, second, max_bytes=max_bytes)
    assert merge_hint(once, second, max_bytes=max_bytes) == once
    assert merge_hint(merge_hint(text, first), second, max_bytes=max_bytes) == once
    assert len(TOKEN_RE.findall(once)) <= 1


@given(text=user_texts, hint=hints, max_bytes=budgets)
def test_merged_comment_fits_and_reads_back(text: str, hint: SlurmHint, max_bytes: int) -> None:
    merged = merge_hint(text, hint, max_bytes=max_bytes)
    if len(text.encode()) <= max_bytes:
        assert len(merged.encode()) <= max_bytes
    back = parse_hint_token(merged)
    if back is not None:
        assert back.predicted_runtime_s == round(hint.predicted_runtime_s)
    else:
        assert merged == text
    if len(text.encode()) + 1 + len(format_hint_token(hint)) <= max_bytes:
        assert back is not None
        assert back.recommended_parallelism == hint.recommended_parallelism


# ----------------------------------------------------------------------------- time limit


def test_policy_p90_times_1_2_plus_10_min_rounded_up() -> None:
    hint = SlurmHint(predicted_runtime_s=3000, runtime_p90_s=3601)
    # 3601 * 1.2 + 600 = 4921.2 s = 82.02 min -> 83
    assert policy_time_limit_min(hint) == 83
    assert propose_time_limit_min(hint, current_limit_s=None, elapsed_s=0) == 83
    assert propose_time_limit_min(hint, current_limit_s=24 * 3600, elapsed_s=0) == 83
    no_p90 = SlurmHint(predicted_runtime_s=3000)  # 3000 * 1.2 + 600 = 4200 s = 70 min
    assert propose_time_limit_min(no_p90, current_limit_s=None, elapsed_s=0) == 70


def test_policy_only_lowers_and_keeps_headroom() -> None:
    hint = SlurmHint(predicted_runtime_s=3000, runtime_p90_s=3600)  # policy: 82 min
    assert propose_time_limit_min(hint, current_limit_s=60 * 60, elapsed_s=0) is None
    assert propose_time_limit_min(hint, current_limit_s=85 * 60, elapsed_s=0) is None  # < 5 min
    assert propose_time_limit_min(hint, current_limit_s=87 * 60, elapsed_s=0) == 82
    # running for 59 min: at least 59 + 10 = 69 < 82, the policy wins
    assert propose_time_limit_min(hint, current_limit_s=None, elapsed_s=59 * 60) == 82
    # refuted: ran longer than the p90 already -> leave the limit alone
    assert propose_time_limit_min(hint, current_limit_s=None, elapsed_s=3600) is None
    tight = TimeLimitPolicy(runtime_factor=1.0, pad_s=0, min_headroom_s=1200)
    assert propose_time_limit_min(hint, current_limit_s=None, elapsed_s=3000, policy=tight) == 70


@given(
    hint=hints,
    current_min=st.none() | st.integers(1, 10**6),
    elapsed_s=st.floats(0, 1e8),
)
def test_policy_invariants(hint: SlurmHint, current_min: int | None, elapsed_s: float) -> None:
    policy = TimeLimitPolicy()
    current_s = None if current_min is None else current_min * 60.0
    new = propose_time_limit_min(
        hint, current_limit_s=current_s, elapsed_s=elapsed_s, policy=policy
    )
    if new is None:
        return
    assert new * 60 >= elapsed_s + policy.min_headroom_s
    assert new * 60 >= hint.limit_basis_s * policy.runtime_factor + policy.pad_s - 1e-6
    assert elapsed_s < hint.limit_basis_s
    if current_min is not None:
        assert new <= current_min - 5
    # applying it once is enough: the next cycle proposes nothing
    assert propose_time_limit_min(hint, current_limit_s=new * 60.0, elapsed_s=elapsed_s) is None


def test_policy_rejects_bad_settings() -> None:
    with pytest.raises(SpecError, match="runtime_factor"):
        TimeLimitPolicy(runtime_factor=0.9)
    with pytest.raises(SpecError, match="pad_s"):
        TimeLimitPolicy(pad_s=-1)


# ----------------------------------------------------------------------------- hints file


def test_hints_file_is_written_atomically_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "hints.tsv"
    path.write_text("old\n")
    hints = {
        scenario_key("alice", "/data/runs/../runs/gpt.yaml"): FULL,
        job_key("alice", "pretrain 7b"): SlurmHint(predicted_runtime_s=600),
    }
    write_hints_file(path, hints)
    text = path.read_text()
    assert text.splitlines() == [
        HINTS_FILE_HEADER,
        "job:alice/pretrain 7b\t22\trt:600",
        "scenario:alice:/data/runs/gpt.yaml\t290\trt:12345;eta:1795000000;p90:14000;gpus:16;"
        "par:tp=8,pp=2,dp=1",
    ]
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert read_hints_file(path) == {
        "job:alice/pretrain 7b": (22, "rt:600"),
        "scenario:alice:/data/runs/gpt.yaml": (290, text.splitlines()[2].split("\t")[2]),
    }
    assert sorted(os.listdir(tmp_path)) == ["hints.tsv"]


def test_hints_file_bad_key_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "hints.tsv"
    write_hints_file(path, {job_key("bob", "x"): FULL})
    before = path.read_text()
    with pytest.raises(SpecError):
        write_hints_file(path, {"job:bob/a\tb": FULL})
    with pytest.raises(SpecError):
        write_hints_file(path, {"free-text": FULL})
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["hints.tsv"]


def test_keys_are_checked() -> None:
    with pytest.raises(SpecError):
        scenario_key("alice", "relative.yaml")
    with pytest.raises(SpecError):
        scenario_key("a:b", "/x.yaml")
    with pytest.raises(SpecError):
        scenario_key("", "/x.yaml")
    with pytest.raises(SpecError):
        job_key("a/b", "x")
    with pytest.raises(SpecError):
        job_key("alice", "")
    assert format_hints_file({}) == HINTS_FILE_HEADER + "\n"


def test_scenario_keys_are_per_user() -> None:
    # A probe found that jobs of two users naming the same scenario file shared one key.
    assert scenario_key("alice", "/shared/gpt.yaml") != scenario_key("bob", "/shared/gpt.yaml")


# ----------------------------------------------------------------------------- writer


def squeue_job(job_id: int, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": job_id,
        "name": "train",
        "user_name": "alice",
        "job_state": "RUNNING",
        "state_reason": "None",
        "nodes": "node1",
        "node_count": 1,
        "partition": "debug",
        "batch_flag": False,
        "submit_time": 1_800_000_000,
        "start_time": 1_800_000_000,
        "end_time": 1_800_003_600,
        "time_limit": 24 * 60,
        "comment": "",
        "array_job_id": 0,
        "array_task_id": None,
        "het_job_id": 0,
        "tres_req_str": "cpu=1,mem=1G,node=1,billing=1",
        "tres_alloc_str": "cpu=1,mem=1G,node=1,billing=1",
        "cluster": "dev",
    }
    base.update(kw)
    return base


class FakeSlurm:
    """Answers squeue --json from a job table and applies scontrol updates to it."""

    def __init__(self, *jobs: dict[str, Any]) -> None:
        self.jobs = {str(j["job_id"]): j for j in jobs}
        self.calls: list[list[str]] = []
        self.update_answer: CommandResult | Exception | None = None

    def __call__(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str]
    ) -> CommandResult:
        self.calls.append(list(argv))
        cmd = os.path.basename(argv[0])
        if cmd == "squeue":
            return CommandResult(0, json.dumps({"errors": [], "jobs": [*self.jobs.values()]}), "")
        assert cmd == "scontrol"
        assert argv[1] == "update"
        if isinstance(self.update_answer, Exception):
            raise self.update_answer
        if self.update_answer is not None:
            return self.update_answer
        job_id = argv[2].removeprefix("JobId=")
        if job_id not in self.jobs:
            return CommandResult(1, "", f"Invalid job id specified for job {job_id}\n")
        key, _, value = argv[3].partition("=")
        if key == "Comment":
            self.jobs[job_id]["comment"] = value
        elif key == "TimeLimit":
            self.jobs[job_id]["time_limit"] = int(value)
        else:
            raise AssertionError(f"unexpected update {argv}")
        return CommandResult(0, "", "")

    def updates(self) -> list[list[str]]:
        return [c[2:] for c in self.calls if c[1] == "update"]


def writer(fake: FakeSlurm, **kw: Any) -> SlurmHintWriter:
    return SlurmHintWriter(runner=fake, clock=lambda: 1_800_000_600.0, bin_dir="/opt/slurm", **kw)


def test_writer_updates_comment_once() -> None:
    fake = FakeSlurm(squeue_job(7, comment="mine planner:scenario=/x.yaml"))
    w = writer(fake)
    first = w.write("7", FULL)
    assert first.comment_changed
    assert first.comment == f"mine planner:scenario=/x.yaml {format_hint_token(FULL)}"
    assert fake.updates() == [["JobId=7", f"Comment={first.comment}"]]
    assert fake.calls[0][:2] == ["/opt/slurm/squeue", "--json"]
    second = w.write(7, FULL)
    assert not second.comment_changed
    assert second.time_limit_min is None
    assert len(fake.updates()) == 1  # nothing new to write


def test_writer_enforcing_lowers_the_limit_once() -> None:
    fake = FakeSlurm(squeue_job(8, time_limit=24 * 60))
    w = writer(fake, enforce_time_limit=True)
    hint = SlurmHint(predicted_runtime_s=3000, runtime_p90_s=3600)
    assert w.write("8", hint).time_limit_min == 82
    assert ["JobId=8", "TimeLimit=82"] in fake.updates()
    assert fake.jobs["8"]["time_limit"] == 82
    assert w.write("8", hint).time_limit_min is None
    assert sum(1 for u in fake.updates() if u[1].startswith("TimeLimit")) == 1


def test_writer_comments_only_by_default() -> None:
    fake = FakeSlurm(squeue_job(8, time_limit=None))
    writer(fake).write("8", SlurmHint(predicted_runtime_s=60))
    assert not any(u[1].startswith("TimeLimit") for u in fake.updates())
    assert not any("AdminComment" in " ".join(c) for c in fake.calls)


def test_writer_unknown_and_ended_jobs() -> None:
    fake = FakeSlurm(squeue_job(9, job_state="COMPLETED"))
    w = writer(fake)
    with pytest.raises(UnknownJobError, match="job 99 not found"):
        w.write("99", FULL)
    ended = w.write("9", FULL)
    assert (ended.comment_changed, ended.skipped) == (False, "job completed")
    with pytest.raises(SpecError):
        w.write("12; rm -rf /", FULL)
    assert fake.updates() == []


def test_write_many_isolates_failures() -> None:
    fake = FakeSlurm(squeue_job(1), squeue_job(2))
    results = writer(fake).write_many(
        {"1": FULL, "404": FULL, "bad id": FULL, "2": SlurmHint(predicted_runtime_s=5)}
    )
    assert results["1"].comment_changed
    assert results["2"].comment == "planner:hint=rt:5"
    assert isinstance(results["404"].error, UnknownJobError)
    assert isinstance(results["bad id"].error, SourcePermanentError)
    assert sum(1 for c in fake.calls if "squeue" in c[0]) == 1


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (CommandResult(1, "", "Access/permission denied for job 7\n"), SourcePermanentError),
        (CommandResult(1, "", "Invalid job id specified for job 7\n"), UnknownJobError),
        (CommandResult(1, "", "Job/step already completing or completed\n"), SourcePermanentError),
        (
            CommandResult(1, "", "slurm_update error: Unable to contact slurm controller\n"),
            SourceTemporaryError,
        ),
        (TimeoutError(), SourceTemporaryError),
        (FileNotFoundError(), SourcePermanentError),
    ],
)
def test_update_errors_are_classified(
    answer: CommandResult | Exception, error: type[Exception]
) -> None:
    fake = FakeSlurm(squeue_job(7))
    fake.update_answer = answer
    with pytest.raises(error):
        writer(fake).write("7", FULL)


def test_queue_unreadable_raises() -> None:
    def runner(argv: Sequence[str], timeout_s: float, env: Mapping[str, str]) -> CommandResult:
        return CommandResult(1, "", "squeue: error: Unable to contact slurm controller")

    with pytest.raises(SourceTemporaryError):
        SlurmHintWriter(runner=runner).write_many({"1": FULL})
    assert SlurmHintWriter(runner=runner).write_many({}) == {}


def test_hint_prefix_is_the_documented_namespace() -> None:
    assert HINT_PREFIX == "planner:hint="
