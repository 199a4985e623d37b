"""Slurm hints against real Slurm 22.05: ``SlurmHintWriter`` on the dev cluster, and
``deploy/slurm/job_submit.lua`` loaded by a second, private slurmctld (``JobSubmitPlugins=lua``)
so the shared dev cluster's configuration is never touched."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm import (
    COMMENT_MAX_BYTES,
    SlurmHint,
    SlurmHintWriter,
    UnknownJobError,
    job_key,
    parse_hint_token,
    scenario_key,
    write_hints_file,
)
from adapters.slurm.hints import format_hint_token
from tests.slurm_stack import REPO, SlurmStack

pytestmark = pytest.mark.integration

HINT = SlurmHint(
    predicted_runtime_s=3000,
    runtime_p90_s=3600,
    eta_s=1_900_000_000,
    recommended_gpus=16,
    recommended_parallelism="tp=8,pp=2,dp=1",
)
LUA_PLUGIN = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/job_submit_lua.so")


def squeue_job(stack: SlurmStack, job_id: str) -> dict[str, Any]:
    jobs = json.loads(stack.run("squeue", "--json").stdout)["jobs"]
    return next(j for j in jobs if str(j["job_id"]) == job_id)


def scontrol_comment(stack: SlurmStack, job_id: str) -> str:
    line = stack.run("scontrol", "-o", "show", "job", job_id).stdout
    match = re.search(r" Comment=(.*?) +StdErr=", line)  # scontrol -o: "Comment=X  StdErr="
    assert match is not None, line
    return match.group(1)


@pytest.fixture
def job(slurm_stack: SlurmStack, tmp_path: Path) -> Iterator[str]:
    tmp_path.chmod(0o755)
    job_id = slurm_stack.sbatch(
        f"--chdir={tmp_path}",
        "--job-name=hinted",
        "--time=600",
        "--comment=my run planner:scenario=/x.yaml other:tool=1",
        "--wrap=sleep 300",
    )
    yield job_id
    slurm_stack.scancel(job_id)


def test_comment_hint_round_trip_and_enforced_limit(slurm_stack: SlurmStack, job: str) -> None:
    user_text = "my run planner:scenario=/x.yaml other:tool=1"
    writer = SlurmHintWriter(env=slurm_stack.env, timeout_s=10)
    first = writer.write(job, HINT)
    assert first.comment_changed
    expected = f"{user_text} {format_hint_token(HINT)}"
    assert squeue_job(slurm_stack, job)["comment"] == expected
    assert scontrol_comment(slurm_stack, job) == expected
    assert parse_hint_token(scontrol_comment(slurm_stack, job)) == HINT
    assert squeue_job(slurm_stack, job)["admin_comment"] == ""

    again = writer.write(job, HINT)  # idempotent: nothing to update
    assert (again.comment_changed, again.comment) == (False, expected)
    newer = SlurmHint(predicted_runtime_s=2000, eta_s=1_900_000_500)
    assert writer.write(job, newer).comment_changed
    assert (
        squeue_job(slurm_stack, job)["comment"]
        == f"{user_text} planner:hint=rt:2000;eta:1900000500"
    )

    assert squeue_job(slurm_stack, job)["time_limit"] == 600
    enforcing = SlurmHintWriter(env=slurm_stack.env, enforce_time_limit=True)
    assert enforcing.write(job, HINT).time_limit_min == 82  # 3600 s * 1.2 + 10 min
    assert squeue_job(slurm_stack, job)["time_limit"] == 82
    assert enforcing.write(job, HINT).time_limit_min is None  # never raised, not re-sent
    assert squeue_job(slurm_stack, job)["time_limit"] == 82
    assert squeue_job(slurm_stack, job)["comment"].startswith(user_text + " planner:hint=")


def test_long_user_text_is_kept_and_our_token_shortened(slurm_stack: SlurmStack, job: str) -> None:
    room = len("planner:hint=rt:3000;eta:1900000000")
    user_text = "é" * 100 + "u" * (COMMENT_MAX_BYTES - 200 - 1 - room)
    slurm_stack.run("scontrol", "update", f"JobId={job}", f"Comment={user_text}")
    result = SlurmHintWriter(env=slurm_stack.env).write(job, HINT)
    stored = squeue_job(slurm_stack, job)["comment"]
    assert stored == result.comment == f"{user_text} planner:hint=rt:3000;eta:1900000000"
    assert len(stored.encode()) == COMMENT_MAX_BYTES
    # Slurm itself refuses one byte more: the limit the writer works to is the real one
    with pytest.raises(subprocess.CalledProcessError) as err:
        slurm_stack.run("scontrol", "update", f"JobId={job}", f"Comment={stored}x")
    assert "too long" in err.value.stderr


def test_unknown_job_is_a_clear_error(slurm_stack: SlurmStack) -> None:
    with pytest.raises(UnknownJobError, match="job 999999 not found"):
        SlurmHintWriter(env=slurm_stack.env).write("999999", HINT)


# ----------------------------------------------------------------------------- job_submit.lua


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


LUA_CONF = """\
ClusterName=hinttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmctldDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobSubmitPlugins=lua
MpiDefault=none
MailProg=/bin/true
NodeName=luanode1 NodeAddr=127.0.0.1 NodeHostname={host} Port={node_port} CPUs=4 RealMemory=4000
PartitionName=debug Nodes=luanode1 Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=luanode1 MaxTime=60 State=UP
"""


@pytest.fixture(scope="module")
def lua_ctld(slurm_stack: SlurmStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A private slurmctld (no nodes running, so jobs stay pending) with the sample plugin; it
    shares only the dev cluster's munged."""
    if not LUA_PLUGIN.exists():
        pytest.skip(f"{LUA_PLUGIN} missing: this Slurm build has no job_submit/lua")
    root = tmp_path_factory.mktemp("lua-ctld")
    root.chmod(0o755)
    (root / "state").mkdir()
    (root / "spool").mkdir()
    shutil.copy(REPO / "deploy" / "slurm" / "job_submit.lua", root / "job_submit.lua")
    conf = root / "slurm.conf"
    conf.write_text(
        LUA_CONF.format(
            host=socket.gethostname().split(".")[0],
            ctld_port=free_port(),
            node_port=free_port(),
            munge_socket=slurm_stack.stack_root / "munge" / "munge.socket",
            root=root,
        )
    )
    hints = root / "hints.tsv"
    write_hints_file(hints, {})
    env = {
        **os.environ,
        "SLURM_CONF": str(conf),
        "PLANNER_HINTS_FILE": str(hints),
        "PLANNER_HINTS_SET_TIME_LIMIT": "1",
        "PLANNER_HINTS_RELOAD_S": "0",
    }
    log = (root / "foreground.log").open("w")
    proc = subprocess.Popen(
        ["/usr/sbin/slurmctld", "-D", "-f", str(conf)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stack = SlurmStack(
        stack_root=root,
        slurm_conf=conf,
        cluster="hinttest",
        with_slurmdbd=False,
        env={"SLURM_CONF": str(conf)},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            ping = subprocess.run(
                ["scontrol", "ping"], capture_output=True, text=True, env=env, check=False
            )
            if "is UP" in ping.stdout:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"private slurmctld did not start:\n{(root / 'foreground.log').read_text()}"
                )
            time.sleep(0.2)
        yield stack, hints
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_job_submit_lua_adds_hints_at_submission(lua_ctld: Any) -> None:
    stack, hints_file = lua_ctld
    write_hints_file(
        hints_file,
        {
            scenario_key("root", "/data/gpt.yaml"): HINT,
            scenario_key("bob", "/data/shared.yaml"): HINT,
            job_key("root", "named"): SlurmHint(predicted_runtime_s=600),
        },
    )
    scenario = stack.sbatch(
        "--hold", "--comment=mine planner:scenario=/data/gpt.yaml planner:hint=rt:1", "--wrap=true"
    )
    named = stack.sbatch("--hold", "-J", "named", "--wrap=true")
    own_limit = stack.sbatch("--hold", "-J", "named", "-t", "5", "--wrap=true")
    capped = stack.sbatch(
        "--hold", "-p", "short", "--comment=planner:scenario=/data/gpt.yaml", "--wrap=true"
    )
    unknown = stack.sbatch("--hold", "-J", "other", "--comment=just text", "--wrap=true")
    # bob's hint for a file root's job names too never reaches root's job
    shared = stack.sbatch("--hold", "--comment=planner:scenario=/data/shared.yaml", "--wrap=true")

    jobs = {str(j["job_id"]): j for j in json.loads(stack.run("squeue", "--json").stdout)["jobs"]}
    token = format_hint_token(HINT)
    assert jobs[scenario]["comment"] == f"mine planner:scenario=/data/gpt.yaml {token}"
    assert jobs[scenario]["time_limit"] == 82
    assert (jobs[named]["comment"], jobs[named]["time_limit"]) == ("planner:hint=rt:600", 22)
    assert jobs[own_limit]["time_limit"] == 5  # the user's --time is kept
    assert jobs[capped]["time_limit"] == 60  # capped at the partition's MaxTime
    assert (jobs[unknown]["comment"], jobs[unknown]["time_limit"]) == ("just text", None)
    assert jobs[shared]["comment"] == "planner:scenario=/data/shared.yaml"

    # a new file is picked up; a missing one means no hint, never a rejected job
    write_hints_file(hints_file, {job_key("root", "other"): SlurmHint(predicted_runtime_s=60)})
    other = stack.sbatch("--hold", "-J", "other", "--wrap=true")
    hints_file.unlink()
    plain = stack.sbatch("--hold", "-J", "other", "--wrap=true")
    jobs = {str(j["job_id"]): j for j in json.loads(stack.run("squeue", "--json").stdout)["jobs"]}
    assert jobs[other]["comment"] == "planner:hint=rt:60"
    assert jobs[plain]["comment"] == ""
