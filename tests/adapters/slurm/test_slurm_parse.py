"""Parsers of Slurm command output, on outputs recorded from a real Slurm 22.05.8 cluster
(tests/data/slurm/README.md says which command produced each file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.slurm.gres import GresItem, gpus_from_gres, gpus_from_tres, parse_gres
from adapters.slurm.hostlist import expand_hostlist
from adapters.slurm.output import parse_time_limit_s, slurm_state_to_status
from adapters.slurm.sacct import is_accounting_disabled, parse_sacct_json
from adapters.slurm.scontrol import (
    batch_script_failed,
    parse_backfill_interval,
    parse_cluster_name,
)
from adapters.slurm.sinfo import parse_sinfo_json
from adapters.slurm.squeue import expand_stdout_path, parse_squeue_json, parse_squeue_records
from planner.errors import SourceError, SourcePermanentError, SourceTemporaryError
from planner.specs.job import JobState, JobStatus

DATA = Path(__file__).parents[2] / "data" / "slurm"
T0 = 1795242902.0  # submit/start time of the first jobs in the recordings


def read(name: str) -> str:
    return (DATA / name).read_text()


def by_id(jobs: list[JobState]) -> dict[str, JobState]:
    return {j.job_id: j for j in jobs}


# --------------------------------------------------------------------------- squeue --json


def test_squeue_running_gres_job_with_comment_and_script_path() -> None:
    job = by_id(parse_squeue_json(read("squeue.json")))["4"]
    assert job.scheduler == "slurm"
    assert job.cluster == "devcluster"
    assert job.name == "gpt-7b"
    assert (job.user, job.account, job.partition) == ("root", "planners", "debug")
    assert job.status is JobStatus.RUNNING
    assert job.state_reason == ""
    assert job.node_list == ("node1",)
    assert job.num_nodes == 1
    assert (job.num_gpus, job.gpu_type, job.gpus_allocated) == (2, "h100", True)
    assert job.start_time_s == T0
    assert job.end_time_s is None  # squeue's end_time of a running job is only its limit
    assert job.time_limit_s is None  # 365 days = Slurm's stand-in for unlimited
    assert job.comment == "planner:scenario=/tmp/planner-rec/x.yaml"
    assert job.command == "/tmp/planner-rec/megatron.sbatch"
    assert job.work_dir == "/tmp/planner-rec"
    # --output=logs/%x-%j.out, relative to the working directory; the file slurmd wrote:
    assert job.stdout_path == "/tmp/planner-rec/logs/gpt-7b-4.out"


def test_squeue_gpus_per_job_takes_type_from_gres_detail() -> None:
    job = by_id(parse_squeue_json(read("squeue.json")))["5"]  # sbatch --gpus=4 -t 120 --wrap
    assert (job.num_gpus, job.gpu_type, job.gpus_allocated) == (4, "h100", True)
    assert job.time_limit_s == 7200.0
    assert job.command is None  # --wrap jobs have an empty command in 22.05


def test_squeue_srun_job_has_command_but_no_stdout_file() -> None:
    job = by_id(parse_squeue_json(read("squeue.json")))["7"]
    assert job.command == "sleep"
    assert job.stdout_path is None
    assert (job.num_gpus, job.gpu_type) == (1, "h100")


def test_squeue_pending_job_has_backfill_estimate_and_requested_gpus() -> None:
    jobs = by_id(parse_squeue_json(read("squeue.json")))
    two = jobs["8"]  # -N2 --gres=gpu:h100:1, cannot fit now
    assert two.status is JobStatus.PENDING
    assert two.state_reason == "Resources"
    assert two.node_list == ()
    assert two.num_nodes == 2
    assert (two.num_gpus, two.gpu_type, two.gpus_allocated) == (2, "h100", False)
    assert two.start_time_s is None
    assert two.expected_start_time_s == 1795250102.0  # when job 5's 2-hour limit ends
    assert two.stdout_path == "/tmp/planner-rec/two-8-0-0.out"
    big = jobs["11"]  # -N2 --gpus-per-node=8, no estimate yet (start_time 0)
    assert (big.num_gpus, big.gpu_type) == (16, None)
    assert big.expected_start_time_s is None
    assert big.state_reason == "Priority"


def test_squeue_array_tasks_use_slurm_display_ids_and_expand_a() -> None:
    jobs = by_id(parse_squeue_json(read("squeue.json")))
    assert {"6_0", "6_1", "6_2"} <= set(jobs)
    assert jobs["6_1"].stdout_path == "/tmp/planner-rec/arr-6_1.out"
    assert jobs["6_2"].node_list == ("node2",)
    records = {r.job.job_id: r for r in parse_squeue_records(read("squeue.json"))}
    assert records["6_2"].slurm_job_id == 6
    assert records["6_0"].slurm_job_id == 9
    assert records["7"].is_batch is False


def test_squeue_records_carry_the_jobs_of_the_plain_parse() -> None:
    """Records and the plain parse read the same jobs, in the same order."""
    records = parse_squeue_records(read("squeue.json"))
    assert len(records) > 3
    assert [r.job for r in records] == parse_squeue_json(read("squeue.json"))


def test_squeue_pending_held_array_is_one_record() -> None:
    job = by_id(parse_squeue_json(read("squeue_held_array.json")))["18_[0-3%2]"]
    assert job.status is JobStatus.PENDING
    assert job.state_reason == "JobHeldUser"
    assert job.num_gpus == 1
    assert job.time_limit_s == 600.0
    assert job.stdout_path is None  # %a not known yet


def test_squeue_ended_jobs_keep_final_state_and_end_time() -> None:
    jobs = by_id(parse_squeue_json(read("squeue_later.json")))
    assert jobs["1"].status is JobStatus.TIMEOUT
    assert jobs["1"].state_reason == "TimeLimit"
    assert jobs["1"].end_time_s == 1795242980.0
    assert jobs["3"].status is JobStatus.FAILED
    assert jobs["2"].status is JobStatus.COMPLETED
    assert jobs["2"].stdout_path == "/tmp/planner-rec/slurm-2.out"  # default name
    assert jobs["16_3"].stdout_path == "/tmp/planner-rec/slurm-16_3.out"  # default array name
    done = jobs["17"]
    assert (done.num_gpus, done.gpus_allocated, done.comment) == (
        3,
        True,
        "planner:scenario=/tmp/planner-rec/x.yaml",
    )
    cancelled_pending = jobs["12"]
    assert cancelled_pending.status is JobStatus.CANCELLED
    assert cancelled_pending.start_time_s is None
    assert cancelled_pending.end_time_s == 1795242918.0
    # %J of the batch step is the job id, %5j zero-pads, %s is "batch", %b stays literal
    assert jobs["15"].stdout_path == "/tmp/planner-rec/pat-15-00015-batch-0-0-%-%b.out"


def test_squeue_cluster_override() -> None:
    jobs = parse_squeue_json(read("squeue.json"), cluster="prod")
    assert {j.cluster for j in jobs} == {"prod"}


def test_squeue_empty_queue() -> None:
    assert parse_squeue_json(read("squeue_empty.json")) == []


def test_squeue_with_controller_down_is_temporary() -> None:
    with pytest.raises(SourceTemporaryError, match="slurm_load_jobs") as err:
        parse_squeue_json(read("squeue_controller_down.stdout"))
    assert err.value.source == "slurm:squeue"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("squeue: error: Invalid user", "not JSON"),
        ("[]", "<top>"),
        ('{"errors": []}', "'jobs': missing"),
        ('{"jobs": {}}', "'jobs': expected a list"),
        ('{"jobs": [1]}', "jobs[0]"),
        ('{"jobs": [{"job_id": "x"}]}', "jobs[0].job_id"),
        ('{"jobs": [{"job_id": 1, "name": 5}]}', "jobs[0].name"),
        ('{"jobs": [{"job_id": 1, "nodes": "n[3-1]"}]}', "jobs[0].nodes"),
        ('{"jobs": [{"job_id": 1, "time_limit": "soon"}]}', "jobs[0].time_limit"),
        ('{"jobs": [{"job_id": 1, "tres_req_str": "gres/gpu=many"}]}', "tres_req_str"),
        ('{"jobs": [{"job_id": 1, "gres_detail": "gpu"}]}', "gres_detail"),
        ('{"jobs": [], "errors": "x"}', "'errors'"),
        ('{"jobs": [], "errors": [{"error": "Invalid job id"}]}', "Invalid job id"),
    ],
)
def test_squeue_garbage_is_permanent_and_names_command_and_field(text: str, needle: str) -> None:
    with pytest.raises(SourcePermanentError) as err:
        parse_squeue_json(text)
    assert err.value.source == "slurm:squeue"
    assert needle in str(err.value)


def test_squeue_tolerates_unknown_and_missing_optional_keys() -> None:
    text = json.dumps({"jobs": [{"job_id": 3, "job_state": "RUNNING", "new_key": {"a": 1}}]})
    (job,) = parse_squeue_json(text)
    assert (job.job_id, job.status, job.num_gpus, job.cluster) == ("3", JobStatus.RUNNING, 0, "")


def test_squeue_accepts_2302_number_objects() -> None:
    text = json.dumps(
        {
            "jobs": [
                {
                    "job_id": 9,
                    "job_state": "PENDING",
                    "time_limit": {"set": True, "infinite": False, "number": 30},
                    "start_time": {"set": True, "infinite": False, "number": 1795250000},
                    "submit_time": {"set": False, "infinite": False, "number": 0},
                }
            ]
        }
    )
    (job,) = parse_squeue_json(text)
    assert job.time_limit_s == 1800.0
    assert job.expected_start_time_s == 1795250000.0
    assert job.submit_time_s is None


# --------------------------------------------------------------------------- sinfo --json


def test_sinfo_nodes_gpus_from_gres_and_gres_used() -> None:
    nodes = {n.name: n for n in parse_sinfo_json(read("sinfo.json"))}
    assert set(nodes) == {"node1", "node2"}
    n1, n2 = nodes["node1"], nodes["node2"]
    assert (n1.num_gpus, n1.gpu_type, n1.num_gpus_allocated) == (8, "h100", 8)
    assert (n2.num_gpus, n2.num_gpus_allocated) == (8, 2)
    assert n1.state == "mixed"
    assert n1.num_cpus == 64
    assert n1.memory_bytes == 512000 * 2**20
    assert n1.partitions == ("debug",)


def test_sinfo_state_flags_and_tres_fallback() -> None:
    text = json.dumps(
        {
            "nodes": [
                {
                    "name": "g1",
                    "state": "IDLE",
                    "state_flags": ["DRAIN"],
                    "gres": "",
                    "tres": "cpu=8,gres/gpu=4",
                    "tres_used": "gres/gpu=1",
                }
            ]
        }
    )
    (node,) = parse_sinfo_json(text)
    assert (node.state, node.num_gpus, node.num_gpus_allocated) == ("idle+drain", 4, 1)


def test_sinfo_with_controller_down_is_temporary() -> None:
    with pytest.raises(SourceTemporaryError) as err:
        parse_sinfo_json(read("sinfo_controller_down.stdout"))
    assert err.value.source == "slurm:sinfo"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "not JSON"),
        ('{"jobs": []}', "'nodes': missing"),
        ('{"nodes": [{"name": "n", "cpus": "many"}]}', "nodes[0].cpus"),
        ('{"nodes": [{"state": "idle"}]}', "nodes[0].name"),
        ('{"nodes": [{"name": "n", "gres": "gpu:h100:x"}]}', "nodes[0].gres"),
    ],
)
def test_sinfo_garbage_is_permanent(text: str, needle: str) -> None:
    with pytest.raises(SourcePermanentError) as err:
        parse_sinfo_json(text)
    assert err.value.source == "slurm:sinfo"
    assert needle in str(err.value)


# --------------------------------------------------------------------------- sacct --json


def test_sacct_ended_jobs_final_states_gpus_and_comment() -> None:
    jobs = by_id(parse_sacct_json(read("sacct_ended.json")))
    assert {j.status for j in jobs.values()} == {
        JobStatus.TIMEOUT,
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
    }
    assert jobs["1"].status is JobStatus.TIMEOUT
    assert jobs["1"].end_time_s == 1795242980.0
    assert jobs["1"].time_limit_s == 60.0
    gpu = jobs["17"]
    assert (gpu.num_gpus, gpu.gpus_allocated, gpu.gpu_type) == (3, True, None)
    assert gpu.comment == "planner:scenario=/tmp/planner-rec/x.yaml"
    assert gpu.node_list == ("node2",)
    assert gpu.work_dir == "/tmp/planner-rec"
    assert gpu.stdout_path is None
    srun = jobs["7"]
    assert (srun.status, srun.num_gpus, srun.end_time_s) == (
        JobStatus.CANCELLED,
        1,
        1795243000.0,
    )
    never_ran = jobs["12"]
    assert (never_ran.node_list, never_ran.start_time_s) == ((), None)
    assert jobs["16_3"].name == "pat2"


def test_sacct_all_skips_active_jobs_unless_asked() -> None:
    text = read("sacct_all.json")
    ended = parse_sacct_json(text)
    everything = parse_sacct_json(text, include_active=True)
    assert all(not j.status.is_active for j in ended)
    running = by_id(everything)["4"]
    assert running.status is JobStatus.RUNNING
    assert (running.num_gpus, running.end_time_s) == (2, None)
    pending = by_id(everything)["8"]
    assert (pending.status, pending.gpus_allocated, pending.num_gpus) == (
        JobStatus.PENDING,
        False,
        2,
    )


@pytest.mark.parametrize("older_first", [True, False])
def test_sacct_reused_job_id_keeps_the_job_submitted_last(older_first: bool) -> None:
    # After a job id reset slurmdbd holds two jobs 17; sacct prints both (no --jobs filter).
    doc = json.loads(read("sacct_ended.json"))
    (newer,) = [j for j in doc["jobs"] if j["job_id"] == 17]
    older = json.loads(json.dumps(newer))
    older["time"]["submission"] -= 86400
    older["state"]["current"] = "FAILED"
    older["name"] = "before-the-reset"
    doc["jobs"].remove(newer)
    doc["jobs"] += [older, newer] if older_first else [newer, older]
    jobs = parse_sacct_json(json.dumps(doc))
    assert [j.job_id for j in jobs].count("17") == 1
    kept = by_id(jobs)["17"]
    assert (kept.status, kept.name) == (JobStatus.COMPLETED, newer["name"])
    assert len(jobs) == len(parse_sacct_json(read("sacct_ended.json")))


def test_sacct_nothing_found_is_an_empty_list() -> None:
    # 22.05 reports an empty window as error 9003 "Nothing found" with exit status 0
    assert parse_sacct_json(read("sacct_nothing_found.json")) == []


def test_sacct_accounting_disabled_is_permanent() -> None:
    text = read("sacct_accounting_disabled.stderr")
    assert is_accounting_disabled(text)
    with pytest.raises(SourcePermanentError, match="accounting storage is disabled"):
        parse_sacct_json(text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("not json", "not JSON"),
        ('{"jobs": [{"job_id": 1, "state": "RUNNING"}]}', "jobs[0].state"),
        ('{"jobs": [{"job_id": 1, "time": {"end": "x"}}]}', "jobs[0].time.end"),
        ('{"jobs": [{"job_id": 1, "tres": {"allocated": [3]}}]}', "jobs[0].tres[0]"),
    ],
)
def test_sacct_garbage_is_permanent(text: str, needle: str) -> None:
    with pytest.raises(SourcePermanentError) as err:
        parse_sacct_json(text)
    assert err.value.source == "slurm:sacct"
    assert needle in str(err.value)


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ("RUNNING", JobStatus.RUNNING),
        ("PENDING", JobStatus.PENDING),
        ("COMPLETING", JobStatus.COMPLETING),
        ("COMPLETED", JobStatus.COMPLETED),
        ("FAILED", JobStatus.FAILED),
        ("CANCELLED", JobStatus.CANCELLED),
        ("CANCELLED by 0", JobStatus.CANCELLED),
        ("CANCELLED+", JobStatus.CANCELLED),
        ("TIMEOUT", JobStatus.TIMEOUT),
        ("NODE_FAIL", JobStatus.FAILED),
        ("OUT_OF_MEMORY", JobStatus.FAILED),
        ("OOM", JobStatus.FAILED),
        ("PREEMPTED", JobStatus.CANCELLED),
        ("SUSPENDED", JobStatus.SUSPENDED),
        ("STOPPED", JobStatus.SUSPENDED),
        ("CONFIGURING", JobStatus.RUNNING),
        ("REQUEUED", JobStatus.PENDING),
        ("BOOT_FAIL", JobStatus.FAILED),
        ("DEADLINE", JobStatus.TIMEOUT),
        ("RUNNING,COMPLETING", JobStatus.COMPLETING),
        ("pd", JobStatus.PENDING),
        ("", JobStatus.UNKNOWN),
        ("SOMETHING_NEW", JobStatus.UNKNOWN),
    ],
)
def test_slurm_state_to_status(state: str, status: JobStatus) -> None:
    assert slurm_state_to_status(state) is status


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (30, 1800.0),
        (0, 0.0),
        (525600, None),
        (4294967295, None),
        ("UNLIMITED", None),
        ("Partition_Limit", None),
        ("45", 2700.0),
        ("10:30", 630.0),
        ("02:00:00", 7200.0),
        ("1-00:00:00", 86400.0),
        ("2-12", 216000.0),
        ("1-01:30", 91800.0),
        ({"set": True, "infinite": True, "number": 0}, None),
        ({"set": False, "infinite": False, "number": 0}, None),
    ],
)
def test_parse_time_limit_s(value: object, seconds: float | None) -> None:
    assert parse_time_limit_s(value) == seconds


@pytest.mark.parametrize("value", ["soon", "1:2:3:4", [1]])
def test_parse_time_limit_s_rejects_garbage(value: object) -> None:
    with pytest.raises(ValueError, match="time limit"):
        parse_time_limit_s(value)


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("gpu:h100:8", [GresItem("gpu", "h100", 8)]),
        ("gpu:8", [GresItem("gpu", None, 8)]),
        ("gpu", [GresItem("gpu", None, 1)]),
        ("gpu:h100:2(IDX:0-1)", [GresItem("gpu", "h100", 2)]),
        ("gpu:h100:2(IDX:0,3)", [GresItem("gpu", "h100", 2)]),
        ("gpu:h100:8(S:0-1)", [GresItem("gpu", "h100", 8)]),
        ("gres:gpu:h100:2", [GresItem("gpu", "h100", 2)]),
        ("gres/gpu:4", [GresItem("gpu", None, 4)]),
        ("gpu:h100", [GresItem("gpu", "h100", 1)]),
        (
            "gpu:a100:4(IDX:0-3),nvme:1",
            [GresItem("gpu", "a100", 4), GresItem("nvme", None, 1)],
        ),
        ("shard:1K", [GresItem("shard", None, 1024)]),
        ("N/A", []),
        ("(null)", []),
        ("", []),
    ],
)
def test_parse_gres(text: str, items: list[GresItem]) -> None:
    assert parse_gres(text) == items


def test_gpus_from_gres_and_tres() -> None:
    assert gpus_from_gres("gpu:h100:4(IDX:0-3),gpu:h100:2") == (6, "h100")
    assert gpus_from_gres("gpu:h100:4,gpu:a100:2") == (6, None)
    assert gpus_from_gres("gpu:h100:0(IDX:N/A)") == (0, "h100")
    assert gpus_from_tres("cpu=1,mem=1G,node=1,billing=1,gres/gpu=2") == (2, None)
    assert gpus_from_tres("gres/gpu=2,gres/gpu:h100=2") == (2, "h100")
    assert gpus_from_tres("gres/gpu:h100=2,gres/gpu:a100=1") == (3, None)
    assert gpus_from_tres("cpu=4,mem=16G") == (0, None)
    assert gpus_from_tres("") == (0, None)


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node1", ("node1",)),
        ("node[1-3,5]", ("node1", "node2", "node3", "node5")),
        ("gpu[08-10]", ("gpu08", "gpu09", "gpu10")),
        ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
        ("a[1-2],b3", ("a1", "a2", "b3")),
        ("", ()),
        ("None assigned", ()),
    ],
)
def test_expand_hostlist(text: str, hosts: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["node[1-", "node1]", "node[3-1]", "node[a-b]"])
def test_expand_hostlist_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="hostlist"):
        expand_hostlist(text)


@given(st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=20, unique=True))
def test_expand_hostlist_inverts_a_bracket_list(numbers: list[int]) -> None:
    text = "n[" + ",".join(str(n) for n in numbers) + "]"
    assert expand_hostlist(text) == tuple(f"n{n}" for n in numbers)


def test_expand_stdout_path_patterns() -> None:
    def expand(pattern: str, **kw: object) -> str:
        args: dict[str, object] = {
            "job_id": 42,
            "job_name": "train",
            "user": "alice",
            "work_dir": "/home/alice/run",
            "node": "gpu07",
        }
        args.update(kw)
        return expand_stdout_path(pattern, **args)  # type: ignore[arg-type]

    assert expand("%x-%j.out") == "/home/alice/run/train-42.out"
    assert expand("/logs/%u/%J.%N.log") == "/logs/alice/42.gpu07.log"
    assert expand("/l/%A_%a.out", array_job_id=40, array_task_id=2) == "/l/40_2.out"
    assert expand("/l/%A_%a.out") == "/l/42_4294967294.out"
    assert expand("/l/%8j-%%-%n-%t-%s") == "/l/00000042-%-0-0-batch"
    assert expand("/l/%b-%q.out") == "/l/%b-%q.out"
    assert expand("/l/a\\%j.out") == "/l/a%j.out"
    assert expand("rel.out", work_dir=None) == "rel.out"


def test_cluster_name_and_batch_script_helpers() -> None:
    assert parse_cluster_name(read("scontrol_show_config.txt")) == "devcluster"
    assert parse_cluster_name("Foo = bar\n") is None
    assert batch_script_failed("job script retrieval failed: Job script not specified\n")
    assert not batch_script_failed("")
    assert read("batch_script_4.sh").startswith("#!/bin/bash\n#SBATCH --job-name=gpt-7b")


def test_scontrol_show_job_agrees_with_squeue_on_stdout() -> None:
    """``scontrol -o show job`` prints the expanded StdOut; our expansion matches it."""
    expanded: dict[str, str] = {}
    for line in read("scontrol_show_job.txt").splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("BatchFlag") == "1" and "ArrayTaskId" not in fields:
            expanded[fields["JobId"]] = fields["StdOut"]
    jobs = by_id(parse_squeue_json(read("squeue.json")))
    checked = 0
    for job_id, path in expanded.items():
        if "%" in path or job_id == "5":  # scontrol leaves %n/%t; %N: README (fake nodes)
            continue
        assert jobs[job_id].stdout_path == path, job_id
        checked += 1
    assert checked >= 5


def test_expand_hostlist_keeps_suffixes_order_and_duplicates_as_written() -> None:
    assert expand_hostlist("gpu[2,1]-ib") == ("gpu2-ib", "gpu1-ib")
    assert expand_hostlist("n[1,1]") == ("n1", "n1")
    with pytest.raises(ValueError, match=r"'n\[3-1\]' is not a Slurm hostlist .*node\[01-04,07\]"):
        expand_hostlist("n[3-1]")


# Crashes the fuzz tests (tests/fuzz/test_fuzz_slurm.py) found: each is a SourceError now.
@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,  # RecursionError
        '{"jobs": [], "x": ' + "9" * 5000 + "}",  # more than 4,300 digits: ValueError
        '{"nodes": [{"name": "n1", "real_memory": Infinity}]}',  # OverflowError in int()
        '{"nodes": [{"name": "n1", "real_memory": ' + "9" * 400 + "}]}",  # OverflowError
    ],
    ids=["deep", "digits", "infinity", "huge"],
)
def test_absurd_json_is_a_source_error(text: str) -> None:
    with pytest.raises(SourceError):
        parse_sinfo_json(text)


def test_backfill_interval_from_scontrol_show_config() -> None:
    recorded = read("scontrol_show_config.txt")  # the dev Slurm: bf_interval=5
    assert parse_backfill_interval(recorded) == 5.0
    unset = recorded.replace("bf_interval=5", "(null)")
    assert parse_backfill_interval(unset) == 30.0  # Slurm's default
    among = recorded.replace("bf_interval=5", "bf_continue,bf_interval=120,bf_max_job_test=500")
    assert parse_backfill_interval(among) == 120.0
    assert parse_backfill_interval(recorded.replace("bf_interval=5", "bf_interval=-1")) is None
    assert parse_backfill_interval(recorded.replace("sched/backfill", "sched/builtin")) is None
    assert parse_backfill_interval(recorded.replace("bf_interval=5", "bf_interval=soon")) is None
    assert parse_backfill_interval("Foo = bar\n") is None
