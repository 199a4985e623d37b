"""How many real launches the planner recognises, and how many of their values it gets right.

Runs :func:`planner.launch.describe.describe_launch` on every case of the launch corpus
(``../shared/data/launch-corpus/cases/<id>/``: a Slurm batch script ``job.sbatch`` or a Kubernetes
manifest ``job.yaml``, every config file it reads, and ``expected.json`` with the answer and its
derivation) and reports, per framework and overall, the cases described and the share of
expected values matched exactly, with every mismatch; and the time per ``describe`` (wall and
CPU, median and max over the cases, ``--repeat`` runs each).

    python -m benchmarks.describe                      # the table and the mismatches
    python -m benchmarks.describe --case tt-llama3-8b-cp2-64k --verbose
    python -m benchmarks.describe --write              # also writes results/describe.md

Graded fields (``expected.json`` -> description): ``model`` {num_layers, hidden_size,
num_attention_heads, num_query_groups, ffn_hidden_size, vocab_size, seq_length, num_experts,
moe_router_topk, moe_ffn_hidden_size, padded_vocab_size -> launch.padded_vocab_size},
``parallelism`` {tensor_parallel, pipeline_parallel, context_parallel, expert_parallel,
data_parallel, fsdp_shard -> launch.fsdp_shard, micro_batch_size (-> pipeline_batch_size where
the launch runs its pipeline schedule once per local batch, else micro_batch_size),
global_batch_size, precision, zero_stage, gradient_accumulation -> launch.gradient_accumulation},
``training`` {mode, train_iters, lora_rank}, ``hardware`` {num_gpus, gpus_per_node,
num_nodes -> launch.num_nodes}.
A field absent from ``expected.json`` is not graded (the corpus leaves out what a launch does not
determine). The corpus's other keys are facts its schema cannot grade (its README).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from planner.errors import SourceError
from planner.launch.describe import LaunchDescription, describe_launch
from planner.launch.types import Launch

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "launch-corpus" / "cases"
RESULT = Path(__file__).resolve().parent / "results" / "describe.md"

GRADED: dict[str, tuple[tuple[str, str], ...]] = {
    "model": (
        ("num_layers", "model.num_layers"),
        ("hidden_size", "model.hidden_size"),
        ("num_attention_heads", "model.num_attention_heads"),
        ("num_query_groups", "model.num_query_groups"),
        ("ffn_hidden_size", "model.ffn_hidden_size"),
        ("vocab_size", "model.vocab_size"),
        ("seq_length", "model.seq_length"),
        ("num_experts", "model.num_experts"),
        ("moe_router_topk", "model.moe_router_topk"),
        ("moe_ffn_hidden_size", "model.moe_ffn_hidden_size"),
        ("padded_vocab_size", "launch.padded_vocab_size"),
    ),
    "parallelism": (
        ("tensor_parallel", "parallelism.tensor_parallel"),
        ("pipeline_parallel", "parallelism.pipeline_parallel"),
        ("context_parallel", "parallelism.context_parallel"),
        ("expert_parallel", "parallelism.expert_parallel"),
        ("data_parallel", "parallelism.data_parallel"),
        ("fsdp_shard", "launch.fsdp_shard"),
        ("micro_batch_size", "parallelism.step_batch_size"),
        ("global_batch_size", "parallelism.global_batch_size"),
        ("precision", "parallelism.precision"),
        ("zero_stage", "parallelism.zero_stage"),
        ("gradient_accumulation", "launch.gradient_accumulation"),
    ),
    "training": (
        ("mode", "training.mode"),
        ("train_iters", "training.train_iters"),
        ("lora_rank", "training.lora_rank"),
    ),
    "hardware": (
        ("num_gpus", "hardware.num_gpus"),
        ("gpus_per_node", "hardware.gpus_per_node"),
        ("num_nodes", "launch.num_nodes"),
    ),
}


class CaseFiles:
    """The case directory as the job's tree: absolute paths under it are read, others refused
    (upstream container paths such as ``/workspace`` are not part of the corpus)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, path: str) -> Path:
        candidate = Path(path).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise SourceError(path, "outside the job's directory")
        return candidate

    def read_text(self, path: str) -> str:
        candidate = self._path(path)
        if not candidate.is_file():
            raise SourceError(path, "no such file")
        return candidate.read_text(encoding="utf-8")

    def exists(self, path: str) -> bool:
        try:
            return self._path(path).is_file()
        except SourceError:
            return False


def launch_of(case: Path) -> Launch:
    """The case's launch: its batch script, or its manifest's documents."""
    script = case / "job.sbatch"
    if script.is_file():
        return Launch(batch_script=script.read_text(encoding="utf-8"), work_dir=str(case))
    documents = [d for d in yaml.safe_load_all((case / "job.yaml").read_text()) if d]
    return Launch(manifest=tuple(documents), work_dir=str(case))


def value_of(description: LaunchDescription, dotted: str) -> object:
    """The description's value of ``dotted`` (scenario sections, or ``launch.*``)."""
    section, _, key = dotted.partition(".")
    if section == "launch":
        return description.launch.get(key)
    values = description.scenario.get(section)
    if not isinstance(values, dict):
        return None
    if dotted == "parallelism.step_batch_size":
        # The corpus's micro_batch_size is the samples one pipeline schedule run takes per
        # data-parallel rank: torchtitan's local batch under pipeline parallelism, which it
        # splits into pipeline microbatches (case tt-llama3-405b-3d, expected.json "notes");
        # the description states that as pipeline_batch_size.
        return values.get("pipeline_batch_size") or values.get("micro_batch_size")
    return values.get(key)


def _same(expected: object, got: object) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected == got
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return float(expected) == float(got)
    return expected == got


@dataclass
class CaseResult:
    """One case: framework, whether it was described, matched/graded counts, mismatches,
    describe times (wall, CPU seconds)."""

    case: str
    framework: str
    described_by: str
    matched: int = 0
    graded: int = 0
    mismatches: list[str] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    error: str | None = None


def run_case(case: Path, repeat: int = 1) -> CaseResult:
    """Describe one case ``repeat`` times and grade the last description."""
    expected = json.loads((case / "expected.json").read_text())
    launch = launch_of(case)
    files = CaseFiles(case)
    walls: list[float] = []
    cpus: list[float] = []
    description = None
    for _ in range(repeat):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        description = describe_launch(launch, files, predict=True)
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - cpu0)
    assert description is not None
    result = CaseResult(
        case=case.name,
        framework=str(expected.get("framework", "?")),
        described_by=description.described_by,
        wall_s=walls,
        cpu_s=cpus,
        error=description.error,
    )
    for section, fields in GRADED.items():
        for name, dotted in fields:
            if name not in expected.get(section, {}):
                continue
            want = expected[section][name]
            got = value_of(description, dotted) if description.recognised else None
            result.graded += 1
            if _same(want, got):
                result.matched += 1
            else:
                source = description.provenance.get(dotted, "-")
                result.mismatches.append(
                    f"{section}.{name}: expected {want!r}, got {got!r} ({source})"
                )
    return result


def _table(results: list[CaseResult]) -> list[str]:
    by_framework: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        by_framework[result.framework].append(result)
    lines = [
        "| framework | cases | described | values matched | share |",
        "| --- | --- | --- | --- | --- |",
    ]
    for framework in sorted(by_framework):
        group = by_framework[framework]
        matched = sum(r.matched for r in group)
        graded = sum(r.graded for r in group)
        described = sum(r.described_by != "none" for r in group)
        lines.append(
            f"| {framework} | {len(group)} | {described} | {matched}/{graded} | "
            f"{100 * matched / max(graded, 1):.1f} % |"
        )
    matched = sum(r.matched for r in results)
    graded = sum(r.graded for r in results)
    described = sum(r.described_by != "none" for r in results)
    lines.append(
        f"| **all** | {len(results)} | {described} | {matched}/{graded} | "
        f"{100 * matched / max(graded, 1):.1f} % |"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--case", action="append", default=[], help="run only these case ids")
    parser.add_argument("--repeat", type=int, default=1, help="describe each case N times")
    parser.add_argument("--verbose", action="store_true", help="print each description")
    parser.add_argument("--write", action="store_true", help="write results/describe.md")
    args = parser.parse_args(argv)
    cases = sorted(p for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []
    if args.case:
        cases = [c for c in cases if c.name in set(args.case)]
    if not cases:
        print(f"no cases found under {CORPUS}", file=sys.stderr)
        return 2
    results: list[CaseResult] = []
    for case in cases:
        result = run_case(case, args.repeat)
        results.append(result)
        if args.verbose:
            description = describe_launch(launch_of(case), CaseFiles(case))
            print(json.dumps(description.to_json(), indent=1, default=str))
    lines = [*_table(results), ""]
    walls = [w for r in results for w in r.wall_s]
    cpus = [c for r in results for c in r.cpu_s]
    lines.append(
        f"describe time per launch: wall median {1000 * statistics.median(walls):.1f} ms, "
        f"max {1000 * max(walls):.1f} ms; CPU median {1000 * statistics.median(cpus):.1f} ms, "
        f"max {1000 * max(cpus):.1f} ms ({len(walls)} runs)"
    )
    lines += ["", "## Mismatches", ""]
    mark = len(lines)
    for result in results:
        if result.described_by == "none" or result.error:
            lines.append(
                f"- `{result.case}` ({result.framework}): described_by {result.described_by}"
                + (f"; error: {result.error}" if result.error else "")
            )
        for mismatch in result.mismatches:
            lines.append(f"- `{result.case}` ({result.described_by}): {mismatch}")
    if len(lines) == mark:
        lines.append("None: every case described, every expected value matched.")
    text = "\n".join(lines)
    print(text)
    if args.write:
        RESULT.write_text(
            "# Launch descriptions against the launch corpus\n\n"
            "`python -m benchmarks.describe --repeat 5 --write`\n\n" + text + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
