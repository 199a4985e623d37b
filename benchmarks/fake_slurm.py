"""A fake Slurm 22.05 at the scale of a large training cluster, for the load benchmark
(``benchmarks/load.py``) and its test.

It is a cluster model (nodes, a queue of running and pending jobs, job arrays, many users, the
jobs' batch scripts, scenario files and growing training logs) that writes what Slurm's commands
would print for it, and four real executables that print it: ``squeue``, ``sinfo``, ``sacct``
and ``scontrol`` (``/bin/sh`` scripts in ``ROOT/bin``; point ``slurm.bin_dir`` at it or put it
first on ``PATH``). They ignore their arguments except ``scontrol write batch_script ID -`` and
``scontrol show config``, and print files the model rewrites atomically after each change, so a
command always prints one whole state.

**Real 22.05 JSON.** Every record is a copy of a record a real Slurm 22.05.8 printed
(``tests/data/slurm``: ``squeue.json`` job 4 running with GRES, job 8 pending, job 2
completed; ``sinfo.json`` node1; ``sacct_ended.json`` job 17), with the fields that describe
this cluster's job or node replaced (ids, names, users, states, times, nodes and their hostlist,
``job_resources``, GRES detail and TRES strings, comment, command, output pattern). The keys and
their types are Slurm's; the indentation is Python's (2 spaces) and ``/`` is escaped as Slurm
escapes it.

**The cluster** (defaults: 2,000 nodes, 10,000 active jobs): partitions ``h100`` (70 % of the
nodes, ``gpu:h100:8``), ``a100`` (20 %, ``gpu:a100:8``) and ``dev`` (10 %, ``gpu:a100:4``);
1 % of the nodes drained. Running jobs fill the GPUs (1-256 GPUs each, whole nodes from 8
GPUs); the pending jobs ask for what is left of ``gpus`` (default 100,000: the queue's GPUs,
running and pending), partly as job arrays still pending as one record. 400 users in 40
accounts. A third of the jobs name a scenario file in their comment (``planner:scenario=``;
in the user's home, the job's working directory tree, or in ``ROOT/shared``, which the
benchmark configures as ``slurm.allowed_file_roots``), a third carry Megatron-LM arguments in
their batch script, the rest launch in one of the other styles the planner's launch readers
describe (torchtitan TOML, HF Trainer with accelerate/DeepSpeed, NeMo 2.0, torchtune,
Megatron-DeepSpeed wrapper, Axolotl, LLaMA-Factory: ``benchmarks/fake_launches.py``, config
files in the job's working directory) or in a plain style no reader recognises, an eighth of
that third each (``Job.style``). 70 % of the running jobs print Megatron-LM progress lines
(the format of ``tests/data/logs/tiny_gpt_megatron_900it.log``) to their ``--output`` file at
their own pace (a line per log interval: step times 1-20 s, log-uniform; log intervals 20, 50,
100 or 200 iterations; a line every 20 s to 67 min, each job's at its own pace).

**Churn** (:meth:`FakeSlurm.advance`, called between the service's cycles): logs grow at each
job's pace; ``churn`` (default 1 %) of the jobs change state per call: a quarter of that end
(completed, failed, cancelled or timed out: they stay in squeue for MinJobAge, 300 s, and in
sacct), a quarter start (pending jobs that fit the free GPUs of their partition; array tasks
get their own ids), a quarter are submitted (a fifth of them arrays), a quarter of the pending
jobs get a new reason or backfill estimate; a running job that reached its last iteration
completes. A node drains or returns now and then.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import random
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostlist
import yaml

from adapters.slurm.squeue import expand_stdout_path
from benchmarks.fake_launches import STYLES, JobLaunch, launch_lines

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "tests" / "data" / "slurm"
CLUSTER = "loadcluster"
#: Partitions: (name, share of the nodes, node name prefix, GRES type, GPUs per node).
PARTITIONS = (
    ("h100", 0.7, "hgx", "h100", 8),
    ("a100", 0.2, "dgx", "a100", 8),
    ("dev", 0.1, "dev", "a100", 4),
)
CATALOG_GPU = {"h100": "h100-sxm", "a100": "a100-80gb"}
MIN_JOB_AGE_S = 300.0
SACCT_WINDOW_S = 3600.0
FIRST_JOB_ID = 4_000_000
#: Models the jobs train: (name, preset or explicit shape, tensor parallel, pipeline parallel).
MODELS: tuple[tuple[str, dict[str, Any], int, int], ...] = (
    (
        "gpt-1.3b",
        {
            "num_layers": 24,
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "ffn_hidden_size": 8192,
            "vocab_size": 50304,
            "seq_length": 2048,
        },
        1,
        1,
    ),
    ("llama3-8b", {"preset": "llama3-8b"}, 1, 1),
    ("llama2-13b", {"preset": "llama2-13b"}, 2, 1),
    ("llama3-70b", {"preset": "llama3-70b"}, 8, 2),
    ("gpt3-175b", {"preset": "gpt3-175b"}, 8, 8),
)
JOB_KINDS = ("pretrain", "sft", "eval", "ablation", "long-ctx", "dpo")
#: A Megatron-LM ``training_log`` line (as in tests/data/logs/tiny_gpt_megatron_900it.log).
LOG_LINE = (
    " [{stamp}] iteration {it:8d}/{total:8d} | consumed samples: {samples:12d} | elapsed time per "
    "iteration (ms): {ms:.1f} | learning rate: 3.000000E-04 | global batch size: {gbs:5d} | lm "
    "loss: {loss:.6E} | loss scale: 1.0 | grad norm: 0.917 | number of skipped iterations:   0 | "
    "number of nan iterations:   0 |\n"
)


def _recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / name).read_text())
    return data


def _templates() -> dict[str, Any]:
    squeue = _recorded("squeue.json")
    by_id = {j["job_id"]: j for j in squeue["jobs"]}
    sacct = _recorded("sacct_ended.json")
    return {
        "squeue_meta": squeue["meta"],
        "sacct_meta": sacct["meta"],
        "running": by_id[4],
        "pending": by_id[8],
        "ended": by_id[2],
        "node": _recorded("sinfo.json")["nodes"][0],
        "sacct": next(j for j in sacct["jobs"] if j["job_id"] == 17),
    }


def _dump(value: Any, indent: int = 0) -> str:
    """JSON as Slurm prints it (``/`` escaped), indented by ``indent`` spaces."""
    text = json.dumps(value, indent=2).replace("/", "\\/")
    if indent:
        pad = " " * indent
        text = "\n".join(pad + line for line in text.splitlines())
    return text


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@dataclass
class Node:
    """One GPU node: name, partition, GRES type, GPUs, which are in use, drained or not."""

    name: str
    partition: str
    gpu_type: str
    num_gpus: int
    used: list[bool] = field(default_factory=list)
    drained: bool = False

    @property
    def free(self) -> int:
        return 0 if self.drained else self.used.count(False)


@dataclass
class Job:
    """One record of the queue (a job, an array task, or an array still pending as one)."""

    job_id: int
    name: str
    user: str
    account: str
    partition: str
    gpus: int
    submit_s: int
    time_limit_min: int
    comment: str
    script: str
    work_dir: str
    style: str = "plain"  # scenario_file, megatron or a key of fake_launches.STYLES
    state: str = "PENDING"
    reason: str = "Priority"
    expected_start_s: int = 0
    array_job_id: int = 0
    array_task_id: int | None = None
    pending_tasks: list[int] = field(default_factory=list)
    array_size: int = 0
    start_s: int = 0
    end_s: int = 0
    allocation: list[tuple[str, list[int]]] = field(default_factory=list)  # (node, GPU indices)
    # progress (running jobs that print Megatron-LM lines)
    logs: bool = False
    train_iters: int = 0
    iteration: int = 0
    step_s: float = 1.0
    log_interval: int = 10
    gbs: int = 512
    last_line_s: float = 0.0
    record: str | None = None  # cached squeue record text


class FakeSlurm:
    """The cluster model and its fake Slurm commands under ``root`` (module docstring).

    ``jobs``: active job records (running + pending, arrays pending as one record count one);
    ``nodes``: GPU nodes; ``gpus``: GPUs the active jobs hold or ask for, together; ``users``;
    ``churn``: share of the jobs that change state per :meth:`advance`; ``seed``: the random
    draws; ``clock``: epoch seconds (the times in the output and in the logs).
    """

    def __init__(
        self,
        root: Path,
        *,
        jobs: int = 10_000,
        nodes: int = 2_000,
        gpus: int = 100_000,
        users: int = 400,
        churn: float = 0.01,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(root)
        self.bin_dir = self.root / "bin"
        self.out = self.root / "out"
        self.shared = self.root / "shared"
        self.home = self.root / "home"
        self.target_jobs = jobs
        self.target_gpus = gpus
        self.churn = churn
        self.rng = random.Random(seed)
        self.clock = clock
        self.templates = _templates()
        self.users = [f"u{i:03d}" for i in range(users)]
        self.accounts = {u: f"proj{i % 40:02d}" for i, u in enumerate(self.users)}
        self.nodes: list[Node] = []
        self.by_name: dict[str, Node] = {}
        self.jobs: dict[int, Job] = {}  # active records by job id
        self.ended: list[Job] = []  # ended jobs still in squeue (MinJobAge) or sacct's window
        self.next_id = FIRST_JOB_ID
        self.counts: dict[str, int] = {}
        self._make_nodes(nodes)

    # ------------------------------------------------------------------ building

    def _make_nodes(self, count: int) -> None:
        made = 0
        for i, (partition, share, prefix, gres, per_node) in enumerate(PARTITIONS):
            n = count - made if i == len(PARTITIONS) - 1 else round(count * share)
            width = max(3, len(str(n)))
            for k in range(1, n + 1):
                self.nodes.append(
                    Node(f"{prefix}{k:0{width}d}", partition, gres, per_node, [False] * per_node)
                )
            made += n
        self.by_name = {n.name: n for n in self.nodes}
        for node in self.rng.sample(self.nodes, max(1, count // 100)):
            node.drained = True

    def populate(self) -> None:
        """Fill the cluster: running jobs up to the free GPUs, pending jobs up to ``jobs``
        records and ``gpus`` GPUs, ended jobs of the last hour; write everything."""
        for path in (self.bin_dir, self.out / "scripts", self.shared, self.home):
            path.mkdir(parents=True, exist_ok=True)
        now = self.clock()
        for _ in range(max(3, self.target_jobs // 30)):  # ended within the last hour (sacct)
            job = self._new_job(now - self.rng.uniform(3600, 30 * 3600), arrays=False)
            if self._start(job, now - self._elapsed(job, now) - SACCT_WINDOW_S):
                self._end(job, int(now - self.rng.uniform(0, SACCT_WINDOW_S)))
            else:
                self._forget(job)
        capacity = sum(n.num_gpus for n in self.nodes if not n.drained)
        held, misses = 0, 0
        while held < capacity * 0.97 and misses < 200:
            job = self._new_job(now - self.rng.uniform(600, 48 * 3600), mean_gpus=5.0, arrays=False)
            if self._start(job, now - self._elapsed(job, now)):
                held += job.gpus
            else:
                self._forget(job)
                misses += 1
        asked = held
        while len(self.jobs) < self.target_jobs:
            left = self.target_jobs - len(self.jobs)
            job = self._new_job(
                now - self.rng.uniform(0, 48 * 3600),
                mean_gpus=max(1.0, (self.target_gpus - asked) / left),
            )
            asked += job.gpus * max(1, len(job.pending_tasks))
        self.install()
        self.write()

    def _elapsed(self, job: Job, now: float) -> float:
        """How long a job running now has run: within its iterations, its limit stretched to
        cover it (a running job is never past its limit)."""
        elapsed = self.rng.uniform(60, min(24 * 3600, 0.95 * job.train_iters * job.step_s))
        job.time_limit_min = max(job.time_limit_min, math.ceil(elapsed / 60) + 60)
        return elapsed

    def _forget(self, job: Job) -> None:
        self.jobs.pop(job.job_id, None)
        (self.out / "scripts" / f"{job.job_id}.sh").unlink(missing_ok=True)

    def _gpus(self, mean: float) -> int:
        """A job size: a power of two from 1 to 512, log-normal around a centre chosen so
        that the sizes average ``mean``."""
        weights = _size_weights(round(mean, 1))
        return self.rng.choices(SIZES, weights)[0]

    def _new_job(self, submit_s: float, *, mean_gpus: float = 6.0, arrays: bool = True) -> Job:
        """A new pending job (a tenth of them arrays of 4-32 tasks of at most 8 GPUs each when
        ``arrays``), its batch script and scenario file."""
        user = self.rng.choice(self.users)
        partition = self.rng.choices([p[0] for p in PARTITIONS], [0.7, 0.22, 0.08])[0]
        array_size = self.rng.choice([4, 8, 16, 32]) if arrays and self.rng.random() < 0.1 else 0
        gpus = self._gpus(mean_gpus)
        if array_size:
            gpus = min(gpus, 8)
        if partition == "dev":
            gpus = min(gpus, 4)
        model, shape, tp, pp = self._model(gpus)
        kind = self.rng.choice(JOB_KINDS)
        name = f"{model}-{kind}"
        job_id = self.next_id
        self.next_id += 1
        work_dir = str(self.home / user)
        train_iters = self.rng.choice([2000, 5000, 10000, 50000, 100000, 250000])
        dp = max(1, gpus // (tp * pp))
        gbs = dp * self.rng.choice([8, 16, 32])
        describe = self.rng.random()
        comment = ""
        args = ""
        launch = ""
        per_node = next(p[4] for p in PARTITIONS if p[0] == partition)
        if describe < 1 / 3:
            style = "scenario_file"
            comment = "planner:scenario=" + self._scenario_file(
                user=user,
                model=model,
                shape=shape,
                tp=tp,
                pp=pp,
                gpus=gpus,
                partition=partition,
                train_iters=train_iters,
                gbs=gbs,
            )
        elif describe < 2 / 3:
            style = "megatron"
            args = (
                f"--num-layers {shape.get('num_layers', 32)} --hidden-size "
                f"{shape.get('hidden_size', 4096)} --num-attention-heads "
                f"{shape.get('num_attention_heads', 32)} --seq-length 4096 "
                f"--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size {gbs} "
                f"--train-iters {train_iters} --lr 3e-4 --bf16 --tensor-model-parallel-size {tp} "
                f"--pipeline-model-parallel-size {pp}"
            )
        else:
            style = self.rng.choice(list(STYLES))
            launch = launch_lines(
                style,
                JobLaunch(
                    name=name,
                    model=model,
                    tp=tp,
                    pp=pp,
                    gpus=gpus,
                    per_node=per_node,
                    train_iters=train_iters,
                    gbs=gbs,
                    work_dir=Path(work_dir),
                ),
                self.rng,
            )
        script = (
            "#!/bin/bash\n"
            f"#SBATCH --job-name={name}\n#SBATCH --partition={partition}\n"
            f"#SBATCH --nodes={max(1, math.ceil(gpus / per_node))}\n"
            f"#SBATCH --gres=gpu:{min(gpus, per_node)}\n#SBATCH --output=logs/%x-%j.out\n"
            + (f"#SBATCH --comment={comment}\n" if comment else "")
            + (
                f"srun python pretrain_gpt.py {args} --log-interval 10\n"
                if args
                else launch or f"srun python train.py --config configs/{name}.yaml\n"
            )
        )
        job = Job(
            job_id=job_id,
            name=name,
            user=user,
            account=self.accounts[user],
            partition=partition,
            gpus=gpus,
            submit_s=int(submit_s),
            time_limit_min=self.rng.choice([240, 720, 1440, 2880, 4320]),
            comment=comment,
            script=script,
            work_dir=work_dir,
            style=style,
            train_iters=train_iters,
            step_s=math.exp(self.rng.uniform(math.log(1.0), math.log(20.0))),
            log_interval=self.rng.choice([20, 50, 100, 200]),
            gbs=gbs,
        )
        if array_size:  # a job array still pending as one record
            job.array_job_id = job_id
            job.array_size = array_size
            job.pending_tasks = list(range(array_size))
        self._reason(job)
        self.jobs[job_id] = job
        _write_atomic(self.out / "scripts" / f"{job_id}.sh", script)
        return job

    def _model(self, gpus: int) -> tuple[str, dict[str, Any], int, int]:
        fits = [m for m in MODELS if m[2] * m[3] <= gpus and (m[2] * m[3] > 1 or gpus <= 64)]
        return self.rng.choice(fits or MODELS[:2])

    def _scenario_file(
        self,
        *,
        user: str,
        model: str,
        shape: dict[str, Any],
        tp: int,
        pp: int,
        gpus: int,
        partition: str,
        train_iters: int,
        gbs: int,
    ) -> str:
        gres = next(p[3] for p in PARTITIONS if p[0] == partition)
        shared = self.rng.random() < 0.5
        base = self.shared / self.accounts[user] if shared else self.home / user / "scenarios"
        path = base / f"{model}-{gpus}gpu-{gres}-{train_iters}.yaml"
        if not path.exists():
            base.mkdir(parents=True, exist_ok=True)
            document = {
                "name": path.stem,
                "model": shape,
                "hardware": {"gpu": CATALOG_GPU[gres], "num_gpus": gpus},
                "parallelism": {
                    "tensor_parallel": tp,
                    "pipeline_parallel": pp,
                    "micro_batch_size": 1,
                    "global_batch_size": gbs,
                },
                "training": {"framework": "megatron", "train_iters": train_iters},
            }
            _write_atomic(path, yaml.safe_dump(document, sort_keys=False))
            path.chmod(0o644)
        return str(path)

    def _reason(self, job: Job) -> None:
        roll = self.rng.random()
        now = int(self.clock())
        if roll < 0.55:
            job.reason, job.expected_start_s = "Priority", 0
        elif roll < 0.85:
            job.reason = "Resources"
            job.expected_start_s = now + int(self.rng.uniform(600, 5 * 86400))
        elif roll < 0.95:
            job.reason, job.expected_start_s = "QOSMaxGRESPerUser", 0
        else:
            job.reason, job.expected_start_s = "Dependency", 0
        job.record = None

    # ------------------------------------------------------------------ state changes

    def _place(self, job: Job) -> list[tuple[str, list[int]]] | None:
        """GPUs for ``job`` in its partition: whole nodes from 8 GPUs, else one node."""
        nodes = [n for n in self.nodes if n.partition == job.partition and not n.drained]
        if job.gpus >= 8 and nodes and job.gpus % nodes[0].num_gpus == 0:
            free = [n for n in nodes if n.free == n.num_gpus]
            need = job.gpus // nodes[0].num_gpus
            if len(free) < need:
                return None
            return [(n.name, list(range(n.num_gpus))) for n in free[:need]]
        for n in nodes:
            if n.free >= job.gpus:
                idx = [i for i, used in enumerate(n.used) if not used][: job.gpus]
                return [(n.name, idx)]
        return None

    def _start(self, job: Job, start_s: float) -> bool:
        """Start ``job`` (an array's next task as its own record) when its GPUs are free."""
        placed = self._place(job)
        if placed is None:
            return False
        if job.pending_tasks:  # an array task starts: its own job id, the rest stays pending
            task = job.pending_tasks.pop(0)
            if job.pending_tasks:
                record = copy.copy(job)
                record.job_id = self.next_id
                self.next_id += 1
                record.pending_tasks = []
                _write_atomic(self.out / "scripts" / f"{record.job_id}.sh", job.script)
                job.record = None
                job = record
                self.jobs[job.job_id] = job
            job.array_task_id = task
        for name, idx in placed:
            for i in idx:
                self.by_name[name].used[i] = True
        job.allocation = placed
        job.state, job.reason, job.expected_start_s = "RUNNING", "None", 0
        job.start_s = int(start_s)
        job.logs = self.rng.random() < 0.7
        elapsed = max(0.0, self.clock() - job.start_s)
        job.iteration = min(job.train_iters - 1, int(elapsed / job.step_s))
        job.iteration -= job.iteration % job.log_interval
        job.last_line_s = job.start_s + job.iteration * job.step_s
        if job.logs:
            self._write_log_head(job)
        job.record = None
        return True

    def _end(self, job: Job, end_s: int, state: str = "COMPLETED") -> None:
        for name, idx in job.allocation:
            for i in idx:
                self.by_name[name].used[i] = False
        job.state, job.end_s = state, end_s
        job.reason = {"FAILED": "NonZeroExitCode", "TIMEOUT": "TimeLimit"}.get(state, "None")
        job.record = None
        self.jobs.pop(job.job_id, None)
        self.ended.append(job)

    def advance(self) -> dict[str, int]:
        """One step of churn (module docstring) up to now; writes the new state. Returns what
        changed: ``ended``, ``started``, ``submitted``, ``requeued`` (reason or estimate),
        ``progressed`` (jobs that printed lines), ``nodes`` (drained or returned)."""
        now = self.clock()
        counts = dict.fromkeys(
            ("ended", "started", "submitted", "rescheduled", "progressed", "nodes"), 0
        )
        quarter = max(1 if self.churn > 0 else 0, round(self.churn * self.target_jobs / 4))
        running = [j for j in self.jobs.values() if j.state == "RUNNING"]
        for job in running:
            if job.logs and self._progress(job, now):
                counts["progressed"] += 1
            if job.iteration >= job.train_iters:
                self._end(job, int(now))
                counts["ended"] += 1
        running = [j for j in self.jobs.values() if j.state == "RUNNING"]
        for job in self.rng.sample(running, min(len(running), quarter)):
            state = self.rng.choices(["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"], [5, 2, 2, 1])
            self._end(job, int(now), state[0])
            counts["ended"] += 1
        pending = [j for j in self.jobs.values() if j.state == "PENDING"]
        self.rng.shuffle(pending)
        for job in pending:
            if counts["started"] >= quarter:
                break
            if self._start(job, now):
                counts["started"] += 1
        while len(self.jobs) < self.target_jobs or counts["submitted"] < quarter:
            self._new_job(now, mean_gpus=8.0)
            counts["submitted"] += 1
        pending = [j for j in self.jobs.values() if j.state == "PENDING"]
        for job in self.rng.sample(pending, min(len(pending), quarter)):
            self._reason(job)
            counts["rescheduled"] += 1
        if self.rng.random() < 0.3:
            node = self.rng.choice(self.nodes)
            if node.free == node.num_gpus or node.drained:
                node.drained = not node.drained
                counts["nodes"] += 1
        self.ended = [j for j in self.ended if now - j.end_s <= max(MIN_JOB_AGE_S, SACCT_WINDOW_S)]
        self.write()
        self.counts = counts
        return counts

    def fetched(self) -> set[int]:
        """Job ids whose batch script ``scontrol write batch_script`` printed so far."""
        path = self.out / "fetched.log"
        if not path.exists():
            return set()
        return {int(line) for line in path.read_text().split() if line.isdigit()}

    def styles(self) -> dict[str, tuple[str, int]]:
        """The launch style and Slurm job id (whose batch script ``scontrol`` prints) of every
        job record Slurm shows or accounts for now, by the job id the planner lists it under
        (``123``, ``123_4``, ``123_[0-31]`` for a pending array)."""
        out = {self.display_id(j): (j.style, j.job_id) for j in self.ended}
        for job in self.jobs.values():
            shown = self.display_id(job)
            if job.pending_tasks:
                shown = f"{job.job_id}_[{_idx(job.pending_tasks)}]"
            out[shown] = (job.style, job.job_id)
        return out

    # ------------------------------------------------------------------ logs

    @staticmethod
    def display_id(job: Job) -> str:
        """The job id Slurm shows (``123_4`` for an array task)."""
        if job.array_job_id and job.array_task_id is not None:
            return f"{job.array_job_id}_{job.array_task_id}"
        return str(job.job_id)

    def log_path(self, job: Job) -> str:
        """The job's output file as slurmd names it (``logs/%x-%j.out`` in its work dir)."""
        return expand_stdout_path(
            "logs/%x-%j.out",
            job_id=job.job_id,
            job_name=job.name,
            user=job.user,
            work_dir=job.work_dir,
            array_job_id=job.array_job_id or None,
            array_task_id=job.array_task_id,
        )

    def _line(self, job: Job, at_s: float) -> str:
        return LOG_LINE.format(
            stamp=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at_s)),
            it=job.iteration,
            total=job.train_iters,
            samples=job.iteration * job.gbs,
            ms=job.step_s * 1000.0 * self.rng.uniform(0.97, 1.03),
            gbs=job.gbs,
            loss=2.0 + 8.0 / math.sqrt(1.0 + job.iteration),
        )

    def _write_log_head(self, job: Job) -> None:
        path = Path(self.log_path(job))
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["training ...\n"]
        last = job.iteration
        first = max(job.log_interval, last - 30 * job.log_interval)
        for it in range(first, last + 1, job.log_interval):
            job.iteration = it
            lines.append(self._line(job, job.start_s + it * job.step_s))
        job.iteration = last
        path.write_text("".join(lines))

    def _progress(self, job: Job, now: float) -> bool:
        """Print the lines the job reached since its last one; True when it printed any."""
        due = int((now - job.last_line_s) / (job.step_s * job.log_interval))
        if due <= 0:
            return False
        lines = []
        for _ in range(due):
            job.iteration = min(job.train_iters, job.iteration + job.log_interval)
            job.last_line_s += job.step_s * job.log_interval
            lines.append(self._line(job, job.last_line_s))
            if job.iteration >= job.train_iters:
                break
        with open(self.log_path(job), "a") as f:
            f.write("".join(lines))
        return True

    # ------------------------------------------------------------------ output

    def _display_nodes(self, job: Job) -> str:
        return str(hostlist.collect_hostlist([n for n, _ in job.allocation]))

    def _squeue_record(self, job: Job) -> dict[str, Any]:
        t = self.templates
        active = job.state in ("RUNNING", "PENDING")
        base = t["pending"] if job.state == "PENDING" else t["running"] if active else t["ended"]
        rec: dict[str, Any] = copy.deepcopy(base)
        per_node = next(p[4] for p in PARTITIONS if p[0] == job.partition)
        gres = next(p[3] for p in PARTITIONS if p[0] == job.partition)
        num_nodes = max(1, math.ceil(job.gpus / per_node))
        uid = 10_000 + self.users.index(job.user)
        ran = bool(job.allocation)
        nodes = self._display_nodes(job) if ran else ""
        tres = f"cpu={8 * job.gpus},mem={64 * job.gpus}G,node={num_nodes},billing={8 * job.gpus}"
        tres += f",gres/gpu={job.gpus}"
        rec.update(
            account=job.account,
            accrue_time=job.submit_s,
            array_job_id=job.array_job_id,
            array_task_id=job.array_task_id,
            array_max_tasks=0,
            array_task_string=_idx(job.pending_tasks) if job.pending_tasks else "",  # 0-31
            batch_flag=True,
            batch_host=job.allocation[0][0] if ran else "",
            cluster=CLUSTER,
            command=f"{job.work_dir}/{job.name}.sbatch",
            comment=job.comment,
            current_working_directory=job.work_dir,
            eligible_time=job.submit_s,
            end_time=(
                job.end_s if not active else job.start_s + 60 * job.time_limit_min if ran else 0
            ),
            gres_detail=[f"gpu:{gres}:{len(i)}(IDX:{_idx(i)})" for _, i in job.allocation],
            group_id=uid,
            group_name=job.account,
            job_id=job.job_id,
            job_state=job.state,
            last_sched_evaluation=int(self.clock()),
            name=job.name,
            nodes=nodes,
            node_count=num_nodes,
            cpus=8 * job.gpus,
            tasks=job.gpus,
            tasks_per_node=min(job.gpus, per_node),
            partition=job.partition,
            priority=4294901760 - (job.job_id - FIRST_JOB_ID),
            standard_output=f"{job.work_dir}/logs/%x-%j.out",
            start_time=job.start_s if ran else job.expected_start_s,
            state_reason=job.reason,
            submit_time=job.submit_s,
            time_limit=job.time_limit_min,
            tres_per_node=f"gres:gpu:{gres}:{min(job.gpus, per_node)}",
            tres_per_job="",
            tres_req_str=tres,
            tres_alloc_str=tres if ran else "",
            user_id=uid,
            user_name=job.user,
        )
        if ran:
            rec["job_resources"] = {
                "nodes": nodes,
                "allocated_cores": 8 * job.gpus,
                "allocated_hosts": len(job.allocation),
                "allocated_nodes": [
                    {
                        "sockets": {
                            "0": {"cores": {str(c): "allocated" for c in range(8 * len(i))}}
                        },
                        "nodename": name,
                        "cpus_used": 0,
                        "memory_used": 0,
                        "memory_allocated": 65536 * len(i),
                    }
                    for name, i in job.allocation
                ],
            }
        return rec

    def _sinfo_record(self, node: Node) -> dict[str, Any]:
        rec: dict[str, Any] = copy.deepcopy(self.templates["node"])
        used = [i for i, u in enumerate(node.used) if u]
        state = "idle" if not used else "allocated" if len(used) == node.num_gpus else "mixed"
        rec.update(
            name=node.name,
            hostname=node.name,
            address=node.name,
            cpus=128,
            cores=64,
            real_memory=2_048_000,
            alloc_cpus=16 * len(used),
            idle_cpus=128 - 16 * len(used),
            alloc_memory=65536 * len(used),
            gres=f"gpu:{node.gpu_type}:{node.num_gpus}",
            gres_used=f"gpu:{node.gpu_type}:{len(used)}(IDX:{_idx(used) or 'N/A'})",
            partitions=[node.partition],
            state=state,
            state_flags=["DRAIN"] if node.drained else [],
            reason="nvidia-smi: GPU has fallen off the bus" if node.drained else "",
            tres=f"cpu=128,mem=2000G,billing=128,gres/gpu={node.num_gpus}",
            tres_used=f"cpu={16 * len(used)},mem={64 * len(used)}G,gres/gpu={len(used)}",
        )
        return rec

    def _sacct_record(self, job: Job) -> dict[str, Any]:
        rec: dict[str, Any] = copy.deepcopy(self.templates["sacct"])
        rec["comment"]["job"] = job.comment
        rec["array"]["job_id"] = job.array_job_id
        rec["array"]["task_id"] = job.array_task_id
        rec["association"].update(account=job.account, cluster=CLUSTER, user=job.user)
        rec["time"].update(
            elapsed=job.end_s - job.start_s,
            eligible=job.submit_s,
            end=job.end_s,
            start=job.start_s,
            submission=job.submit_s,
            limit=job.time_limit_min,
        )
        rec["state"] = {"current": job.state, "reason": job.reason}
        for side in ("allocated", "requested"):
            for entry in rec["tres"][side]:
                if entry["type"] == "gres":
                    entry["count"] = job.gpus
                elif entry["type"] == "node":
                    entry["count"] = len(job.allocation)
        rec.update(
            account=job.account,
            allocation_nodes=len(job.allocation),
            cluster=CLUSTER,
            group=job.account,
            job_id=job.job_id,
            name=job.name,
            nodes=self._display_nodes(job),
            partition=job.partition,
            user=job.user,
            working_directory=job.work_dir,
        )
        return rec

    def write(self) -> None:
        """Write what squeue, sinfo and sacct print now (atomically)."""
        now = self.clock()
        t = self.templates
        records = []
        shown = list(self.jobs.values()) + [j for j in self.ended if now - j.end_s <= MIN_JOB_AGE_S]
        for job in sorted(shown, key=lambda j: j.job_id):
            if job.record is None:
                job.record = _dump(self._squeue_record(job), 4)
            records.append(job.record)
        head = _dump({"meta": t["squeue_meta"], "errors": []})[:-2]
        _write_atomic(
            self.out / "squeue.json", head + ',\n  "jobs": [\n' + ",\n".join(records) + "\n  ]\n}\n"
        )
        nodes = [self._sinfo_record(n) for n in self.nodes]
        _write_atomic(
            self.out / "sinfo.json",
            _dump({"meta": t["squeue_meta"], "errors": [], "nodes": nodes}) + "\n",
        )
        ended = [self._sacct_record(j) for j in self.ended if now - j.end_s <= SACCT_WINDOW_S]
        _write_atomic(
            self.out / "sacct.json",
            _dump({"meta": t["sacct_meta"], "errors": [], "jobs": ended}) + "\n",
        )

    def install(self) -> None:
        """The fake commands in ``bin_dir`` (``/bin/sh`` scripts printing ``out``)."""
        out = shlex.quote(str(self.out))
        commands = {
            "squeue": f"exec cat {out}/squeue.json\n",
            "sinfo": f"exec cat {out}/sinfo.json\n",
            "sacct": f"exec cat {out}/sacct.json\n",
            "scontrol": (
                'case "$1 $2" in\n'
                f'  "write batch_script") f={out}/scripts/"$3".sh\n'
                f'    echo "$3" >> {out}/fetched.log\n'
                '    if [ -f "$f" ]; then exec cat "$f"; fi\n'
                '    echo "job script retrieval failed: Invalid job id specified" >&2 ;;\n'
                f'  "show config") echo "ClusterName             = {CLUSTER}" ;;\n'
                '  *) echo "scontrol (fake): not supported: $*" >&2; exit 1 ;;\n'
                "esac\n"
            ),
        }
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        for name, body in commands.items():
            path = self.bin_dir / name
            path.write_text(
                f"#!/bin/sh\n# fake Slurm 22.05 {name} (benchmarks/fake_slurm.py)\n{body}"
            )
            path.chmod(0o755)

    def summary(self) -> dict[str, Any]:
        """Counts of the cluster now (for the benchmark's report)."""
        running = [j for j in self.jobs.values() if j.state == "RUNNING"]
        pending = [j for j in self.jobs.values() if j.state == "PENDING"]
        return {
            "nodes": len(self.nodes),
            "gpus_installed": sum(n.num_gpus for n in self.nodes),
            "jobs": len(self.jobs),
            "running": len(running),
            "pending": len(pending),
            "pending_arrays": sum(1 for j in pending if j.pending_tasks),
            "gpus_queued": sum(j.gpus * max(1, len(j.pending_tasks)) for j in self.jobs.values()),
            "logging": sum(1 for j in running if j.logs),
            "with_scenario": sum(1 for j in self.jobs.values() if j.comment),
            "styles": {
                style: sum(1 for j in self.jobs.values() if j.style == style)
                for style in ("scenario_file", "megatron", *STYLES)
            },
            "users": len({j.user for j in self.jobs.values()}),
            "squeue_bytes": (self.out / "squeue.json").stat().st_size,
        }


SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@functools.cache
def _size_weights(mean: float) -> tuple[float, ...]:
    """Weights of :data:`SIZES` (log-normal, sd 1.5 doublings) whose mean is ``mean``."""

    def weights(centre: float) -> list[float]:
        return [math.exp(-0.5 * ((math.log2(s) - centre) / 1.5) ** 2) for s in SIZES]

    low, high = -8.0, 12.0
    for _ in range(60):
        centre = (low + high) / 2
        w = weights(centre)
        if sum(s * x for s, x in zip(SIZES, w, strict=True)) / sum(w) < mean:
            low = centre
        else:
            high = centre
    return tuple(weights((low + high) / 2))


def _idx(indices: list[int]) -> str:
    """GRES indices as Slurm prints them (``0-3,6``)."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
