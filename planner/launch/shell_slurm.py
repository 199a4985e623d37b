"""``#SBATCH`` lines -> the allocation a batch job gets and the ``SLURM_*`` variables its script
sees.

sbatch reads ``#SBATCH`` options from the top of the script up to its first command (sbatch(1),
"The batch script may contain options preceded with #SBATCH before any executable commands");
an option given twice keeps its first value here, as the command line of sbatch (not visible
to the planner) would win over them both. GPU counts: ``--gpus-per-node=[type:]N``,
``--gres=gpu[:type]:N`` (per node), ``--gpus/-G=[type:]N`` (the whole job),
``--gpus-per-task=N`` times the tasks of a node (``--ntasks-per-node``, or ``--ntasks`` /
``--nodes``). Without ``--nodes`` the job has 1 node (Slurm's default minimum).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field

from planner.launch.types import Facts, Launch

__all__ = ["SCHEDULER_SOURCE", "SlurmRequest"]

SCHEDULER_SOURCE = "launch: the scheduler's allocation"
_SHORT = {"-N": "nodes", "-n": "ntasks", "-G": "gpus", "-c": "cpus-per-task", "-J": "job-name",
          "-p": "partition"}  # fmt: skip
_KEPT = frozenset({
    "nodes", "ntasks", "gpus", "gpus-per-node", "gres", "gpus-per-task", "ntasks-per-node",
    "cpus-per-task", "job-name", "partition",
})  # fmt: skip
_SBATCH = re.compile(r"^#SBATCH\s+(.*)$")
_LINE = re.compile(r"[^\s(),]+:\d+")


def _count(text: str) -> int | None:
    """``8``, ``h100:8``, ``gpu:h100:8(S:0-1)`` -> 8; ``gpu`` -> 1."""
    text = re.sub(r"\(.*\)", "", text).strip()
    last = text.rpartition(":")[2]
    if last.isdigit():
        return int(last)
    return 1 if text == "gpu" or (text.startswith("gpu:") and not last.isdigit()) else None


@dataclass(slots=True)
class SlurmRequest:
    """The ``#SBATCH`` options read so far: canonical long name -> (value, ``file:line``)."""

    options: dict[str, tuple[str, str]] = field(default_factory=dict)

    def read(self, text: str, source: str, notes: list[str]) -> None:
        """Add the ``#SBATCH`` options at the top of ``text`` (a script named ``source``);
        options already known keep their value."""
        for number, line in enumerate(text.splitlines()[:2000], start=1):
            stripped = line.strip()
            if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
                continue
            match = _SBATCH.match(stripped)
            if match is None:
                break
            try:
                words = shlex.split(match.group(1), comments=True)
            except ValueError:
                notes.append(f"{source}:{number}: #SBATCH line not understood")
                continue
            self._add(words, f"{source}:{number}")

    def _add(self, words: list[str], where: str) -> None:
        index = 0
        while index < len(words):
            word = words[index]
            index += 1
            if word.startswith("--"):
                name, equals, value = word[2:].partition("=")
                if not equals and index < len(words) and not words[index].startswith("-"):
                    value = words[index]
                    index += 1
            elif word.startswith("-") and len(word) >= 2:
                name = _SHORT.get(word[:2], word[1:2])
                value = word[2:].lstrip("=")
                if not value and index < len(words) and not words[index].startswith("-"):
                    value = words[index]
                    index += 1
            else:
                continue
            if name in _KEPT and name not in self.options:
                self.options[name] = (value, where)

    def _int(self, name: str) -> tuple[int, str] | None:
        found = self.options.get(name)
        if found is None:
            return None
        value, where = found
        head = value.partition("-")[0].strip()
        return (int(head), where) if head.isdigit() else None

    def _gpus_per_node(self, tasks_per_node: tuple[int, str] | None) -> tuple[int, str] | None:
        found = self.options.get("gpus-per-node")
        if found is not None and (count := _count(found[0])) is not None:
            return count, found[1]
        gres = self.options.get("gres")
        if gres is not None:
            for item in gres[0].split(","):
                if item.strip().startswith("gpu") and (count := _count(item)) is not None:
                    return count, gres[1]
        per_task = self._int("gpus-per-task")
        if per_task is not None and tasks_per_node is not None:
            return (
                per_task[0] * tasks_per_node[0],
                f"derived: --gpus-per-task x tasks per node ({per_task[1]}, {tasks_per_node[1]})",
            )
        return None

    def _tasks_per_node(self, nodes: tuple[int, str] | None) -> tuple[int, str] | None:
        per_node = self._int("ntasks-per-node")
        if per_node is not None:
            return per_node
        tasks = self._int("ntasks")
        count = nodes[0] if nodes is not None else 1
        if tasks is not None and tasks[0] % count == 0:
            return tasks[0] // count, tasks[1]
        return None

    def allocation(self, launch: Launch) -> Facts:
        """``launch.num_nodes``, ``hardware.gpus_per_node``, ``hardware.num_gpus``: the
        scheduler's values where ``launch`` has them, else from the options."""
        facts = Facts()
        if launch.num_nodes > 0:
            facts.set("launch.num_nodes", launch.num_nodes, SCHEDULER_SOURCE)
        if launch.gpus_per_node > 0:
            facts.set("hardware.gpus_per_node", launch.gpus_per_node, SCHEDULER_SOURCE)
        if launch.num_gpus > 0:
            facts.set("hardware.num_gpus", launch.num_gpus, SCHEDULER_SOURCE)
        nodes = self._int("nodes")
        tasks = self._int("ntasks")
        if nodes is None and tasks is not None and self._int("ntasks-per-node") is not None:
            per = self._int("ntasks-per-node")
            assert per is not None
            if per[0] > 0:
                rule = f"derived: --ntasks / --ntasks-per-node ({tasks[1]}, {per[1]})"
                nodes = (math.ceil(tasks[0] / per[0]), rule)
        if nodes is not None and not facts.has("launch.num_nodes"):
            facts.set("launch.num_nodes", nodes[0], nodes[1])
        per_node = self._gpus_per_node(self._tasks_per_node(nodes))
        if per_node is not None and not facts.has("hardware.gpus_per_node"):
            facts.set("hardware.gpus_per_node", per_node[0], per_node[1])
        total = self.options.get("gpus")
        if not facts.has("hardware.num_gpus"):
            node_count = facts.int("launch.num_nodes")
            gpn = facts.int("hardware.gpus_per_node")
            if total is not None and (count := _count(total[0])) is not None:
                facts.set("hardware.num_gpus", count, total[1])
            elif gpn is not None and node_count is not None:
                wheres = _LINE.findall(
                    facts.values["launch.num_nodes"].source
                    + " "
                    + facts.values["hardware.gpus_per_node"].source
                )
                facts.set(
                    "hardware.num_gpus",
                    gpn * node_count,
                    f"derived: nodes x GPUs per node ({', '.join(dict.fromkeys(wheres))})",
                )
            elif gpn is not None:
                facts.set("hardware.num_gpus", gpn, facts.values["hardware.gpus_per_node"].source)
        gpn = facts.int("hardware.gpus_per_node")
        num = facts.int("hardware.num_gpus")
        node_count = facts.int("launch.num_nodes") or 1
        if gpn is None and num is not None and num % node_count == 0:
            facts.set(
                "hardware.gpus_per_node",
                num // node_count,
                f"derived: GPUs / nodes ({facts.values['hardware.num_gpus'].source})",
            )
        return facts

    def environment(self, allocation: Facts, work_dir: str | None) -> dict[str, str]:
        """The ``SLURM_*`` variables of the batch script's environment (node 0, task 0)."""
        env: dict[str, str] = {"SLURM_PROCID": "0", "SLURM_NODEID": "0", "SLURM_LOCALID": "0"}
        nodes = allocation.int("launch.num_nodes") or 1
        env["SLURM_NNODES"] = env["SLURM_JOB_NUM_NODES"] = str(nodes)
        gpn = allocation.int("hardware.gpus_per_node")
        if gpn is not None:
            env["SLURM_GPUS_ON_NODE"] = str(gpn)
            if "gpus-per-node" in self.options:
                env["SLURM_GPUS_PER_NODE"] = str(gpn)
        per_node = self._tasks_per_node((nodes, ""))
        tasks = self._int("ntasks")
        total = tasks[0] if tasks is not None else (per_node[0] * nodes if per_node else nodes)
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(total)
        if per_node is not None:
            env["SLURM_NTASKS_PER_NODE"] = env["SLURM_TASKS_PER_NODE"] = str(per_node[0])
        cpus = self._int("cpus-per-task")
        if cpus is not None:
            env["SLURM_CPUS_PER_TASK"] = str(cpus[0])
        for name, variable in (
            ("job-name", "SLURM_JOB_NAME"),
            ("partition", "SLURM_JOB_PARTITION"),
        ):
            if name in self.options:
                env[variable] = self.options[name][0]
        if work_dir:
            env["SLURM_SUBMIT_DIR"] = work_dir
        return env

    def tasks(self, allocation: Facts) -> int | None:
        """Processes a plain ``srun`` starts: ``--ntasks``, else tasks per node x nodes, else
        one per node; None when nothing requests tasks."""
        nodes = allocation.int("launch.num_nodes") or 1
        tasks = self._int("ntasks")
        if tasks is not None:
            return tasks[0]
        per_node = self._int("ntasks-per-node")
        if per_node is not None:
            return per_node[0] * nodes
        return None
