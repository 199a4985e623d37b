"""Speed and answer quality of design-space exploration.

    .venv/bin/python -m benchmarks.explore            # prints the markdown report
    .venv/bin/python -m benchmarks.explore --write    # also writes benchmarks/results/explore.md
    .venv/bin/python -m benchmarks.explore --skip-huge   # without the 10^8-candidate sweep

1. Bounded memory: a sweep of >= 10^8 candidates (GPT-3 over 8 GPU counts x 16 global
   batches), peak RSS before and after (run first, so the peak is its own).
2. GPT-3 175B (96 layers, hidden 12288, 96 heads, seq 2048) on 1,024 ``a100-80gb``, global
   batch 1536, every knob open: wall time of ``planner explore`` in-process
   (``explore_document``: parse, sweep, top-10 and Pareto entries, JSON object), candidate
   counts, configurations per second.
3. One engine: the best configuration's ``iteration_time_s`` from the sweep equals
   ``planner predict --json`` for it (in-process and as a subprocess); on 1,000 random valid
   candidates the vectorized and the one-at-a-time (``predict_documents`` per scenario) paths
   agree to 1e-9 relative (iteration time and memory).
4. Quality: for each Megatron SC21 Table 1 run (``benchmarks.accuracy`` conversion), the best
   predicted configuration (knobs open; precision fp16, no flash attention as in 2021) versus
   the published configuration's prediction, and the published configuration's rank.

Cost of the benchmark spaces (``SPACES``: GPT-3 175B on 1,024 A100, Mixtral 8x7B and
Qwen3-30B-A3B on 256 H100, DeepSeek-V3 on 2,048 H100, every knob open), each explored
(``explore_document``, one worker) in a fresh process: CPU seconds of the explore and the
process's peak RSS, for this checkout or several side by side in one window::

    .venv/bin/python -m benchmarks.explore --spaces deepseek-v3-h100-2048 gpt3-175b-a100-1024
    .venv/bin/python -m benchmarks.explore --spaces all --compare /tmp/before . --rounds 3
    .venv/bin/python -m benchmarks.explore --spaces deepseek-v3-h100-2048 --without-uneven-splits

Published layouts among the candidates (``--ranking [SOURCE ...]``, with ``--write`` into
``benchmarks/results/explore_ranking.md``): for every accepted run of every ground-truth source
(``benchmarks.accuracy``), its published layout's predicted and measured iteration time, its
rank among the candidates explore times for its model, GPU count and global batch (every
layout knob open, the rest as published) and the best candidate::

    .venv/bin/python -m benchmarks.explore --ranking --write
    .venv/bin/python -m benchmarks.explore --ranking sc21 moe_h100_2025

``--compare`` runs each space in each checkout directory (a tree with ``planner/``, e.g. a
``git archive`` export of another commit) in turn, ``--rounds`` times, alternating, with this
checkout's interpreter; it prints per space and checkout the least CPU seconds, the largest
peak RSS, the candidate counts and the best layout (or why that checkout cannot explore the
space: ``82228ff`` has no DeepSeek-V3 preset).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.accuracy.convert import Case, build_dataset
from benchmarks.accuracy.runs import available_sources
from planner.perf.candidates import candidate_arrays
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.engine import evaluate
from planner.scenario import predict_documents
from planner.scenario.plans import explore_document, parse_space, scenario_document
from planner.scenario.space import PREDICT_ONLY, layout_json
from planner.search import sweep
from planner.search.space import KNOBS

RESULTS = Path(__file__).parent / "results" / "explore.md"
RANKING = Path(__file__).parent / "results" / "explore_ranking.md"
REPO = Path(__file__).resolve().parents[1]

GPT3: dict[str, Any] = {
    "name": "gpt3-175b-a100-1024",
    "model": {
        "num_layers": 96,
        "hidden_size": 12288,
        "num_attention_heads": 96,
        "seq_length": 2048,
        "vocab_size": 51200,
    },
    "hardware": {"gpu": "a100-80gb", "num_gpus": 1024},
    "parallelism": {"global_batch_size": 1536},
}
WORKERS = os.cpu_count() or 1


def _preset_space(preset: str, gpu: str, num_gpus: int, global_batch_size: int) -> dict[str, Any]:
    return {
        "name": f"{preset}-{gpu.split('-', maxsplit=1)[0]}-{num_gpus}",
        "model": {"preset": preset},
        "hardware": {"gpu": gpu, "num_gpus": num_gpus},
        "parallelism": {"global_batch_size": global_batch_size},
    }


SPACES: dict[str, dict[str, Any]] = {
    "gpt3-175b-a100-1024": GPT3,
    "mixtral-8x7b-h100-256": _preset_space("mixtral-8x7b", "h100-sxm", 256, 1024),
    "qwen3-30b-a3b-h100-256": _preset_space("qwen3-30b-a3b", "h100-sxm", 256, 1024),
    "deepseek-v3-h100-2048": {
        **_preset_space("deepseek-v3", "h100-sxm", 2048, 8192),
        "model": {"preset": "deepseek-v3", "moe_token_dispatcher_type": "flex"},
    },
}
"""The benchmark spaces, every knob open: the dense reference (GPT-3 175B, the SC21 size) and
three MoE models (Mixtral 8x7B, Qwen3-30B-A3B, DeepSeek-V3: 2.7-11.6 M candidates each).

DeepSeek-V3 exchanges its tokens as its published runs do: DeepEP's node-deduplicated
dispatcher (``flex``; DeepSeek-AI 2024, DeepSeek-V3 technical report §3.2.2: each token
crosses InfiniBand once per destination node and is forwarded over NVLink there; NeMo Automodel
``deepseek_v3_te_deepep.yaml`` ``enable_deepep: true``, Megatron-Bridge's DeepSeek-V3 recipes,
``benchmarks/accuracy/bridge.py``), not the preset's default NCCL all-to-all of every (token,
expert) pair, which no published DeepSeek-V3 run uses at expert parallel > 8 (eight copies of
each token over the NIC: 15 s of a 27 s step at expert parallel 64)."""

_CHILD = """
import json, resource, sys, time
try:
    from planner.scenario.plans import explore_document
except ImportError:  # checkouts before the scenario package held the plans (e.g. 82228ff)
    from planner.search.explore import explore_document
doc = json.loads(sys.argv[1])
start_cpu, start_wall = time.process_time(), time.perf_counter()
result = explore_document(doc, workers=1)
if "error" in result:
    print(json.dumps({"error": result["error"]}))
    sys.exit(0)
cpu_s, wall_s = time.process_time() - start_cpu, time.perf_counter() - start_wall
best = result["top"][0]
print(json.dumps({
    "cpu_s": cpu_s,
    "wall_s": wall_s,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    "enumerated": result["counts"]["enumerated"],
    "evaluated": result["counts"]["evaluated"],
    "best": best["parallelism"],
    "best_s": best["prediction"]["iteration_time_s"],
    "top_pipeline": sorted({e["parallelism"]["pipeline_parallel"] for e in result["top"]}),
}))
"""
"""What each measured process runs: one explore of one document, one worker, then its CPU
seconds (``time.process_time``), wall seconds and peak RSS (``ru_maxrss``)."""


def measure_space(doc: dict[str, Any], checkout: Path) -> dict[str, Any]:
    """One explore of ``doc`` by the ``planner`` of ``checkout``, in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(doc)],
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout,
    )
    measured: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return measured


def _best_text(p: dict[str, Any]) -> str:
    split = ""
    if p.get("decoder_first_pipeline_num_layers") or p.get("decoder_last_pipeline_num_layers"):
        first = p.get("decoder_first_pipeline_num_layers", "-")
        split = f" (first {first}, last {p.get('decoder_last_pipeline_num_layers', '-')})"
    elif p.get("account_for_embedding_in_pipeline_split") or p.get(
        "account_for_loss_in_pipeline_split"
    ):
        split = " (E/L slots)"
    return (
        f"tp {p['tensor_parallel']}, pp {p['pipeline_parallel']}{split}, cp "
        f"{p['context_parallel']}, ep {p['expert_parallel']}, etp "
        f"{p.get('expert_tensor_parallel', '-')}, dp {p['data_parallel']}, vp "
        f"{p['virtual_pipeline']}, mbs {p['micro_batch_size']}, {p['recompute']}, ZeRO "
        f"{p['zero_stage']}"
    )


def without_uneven_splits(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with Megatron-Core's uneven first / last ranks left out of the search (the
    checkout must know the ``decoder_first/last_pipeline_num_layers`` knobs)."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    out["parallelism"]["decoder_first_pipeline_num_layers"] = [None]
    out["parallelism"]["decoder_last_pipeline_num_layers"] = [None]
    return out


def compare(
    names: list[str], checkouts: list[Path], rounds: int, *, uneven: bool = True
) -> list[str]:
    """The cost table of ``names`` (``SPACES`` keys) explored by each checkout, ``rounds``
    alternating rounds (space by space, checkout after checkout); ``uneven=False``: without
    the uneven first / last ranks (``without_uneven_splits``)."""
    runs: dict[tuple[str, Path], list[dict[str, Any]]] = {}
    for _ in range(rounds):
        for name in names:
            doc = SPACES[name] if uneven else without_uneven_splits(SPACES[name])
            for checkout in checkouts:
                runs.setdefault((name, checkout), []).append(measure_space(doc, checkout))
    lines = [
        f"{rounds} alternating rounds, one worker, each explore in a fresh process; CPU s = "
        "least of the rounds, peak RSS = largest.\n",
        "| space | checkout | CPU s | peak RSS MiB | enumerated | timed | best (pred. s) | "
        "pipeline degrees in the top 10 |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for name in names:
        for checkout in checkouts:
            r = runs[(name, checkout)]
            last = r[-1]
            if "error" in last:
                lines.append(
                    f"| {name} | {checkout} | - | - | - | - | cannot explore this space: "
                    f"{last['error'][:160]} | - |"
                )
                continue
            lines.append(
                f"| {name} | {checkout} | {min(x['cpu_s'] for x in r):.2f} | "
                f"{max(x['peak_rss_mib'] for x in r):.0f} | {last['enumerated']:,} | "
                f"{last['evaluated']:,} | {_best_text(last['best'])} ({last['best_s']:.3f}) | "
                f"{', '.join(str(p) for p in last['top_pipeline'])} |"
            )
    lines.append("")
    return lines


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def gpt3_speed(lines: list[str]) -> dict[str, Any]:
    """Section 1; returns the best entry for section 2."""
    lines.append("## GPT-3 175B on 1,024 A100-80GB, global batch 1536, every knob open\n")
    lines.append("| workers | wall time (parse + sweep + entries) | enumerated/s | evaluated/s |")
    lines.append("| ---: | ---: | ---: | ---: |")
    best_entry: dict[str, Any] = {}
    counts: dict[str, Any] = {}
    result: dict[str, Any] = {}
    for workers in sorted({1, WORKERS}):
        walls = []
        for _ in range(3):
            start = time.perf_counter()
            result = explore_document(GPT3, workers=workers)
            walls.append(time.perf_counter() - start)
        wall = min(walls)
        counts = result["counts"]
        best_entry = result["top"][0]
        lines.append(
            f"| {workers} | {wall:.2f} s | {counts['enumerated'] / wall:,.0f} | "
            f"{counts['evaluated'] / wall:,.0f} |"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpt3.json"
        path.write_text(json.dumps(GPT3), encoding="utf-8")
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "planner", "explore", str(path), "--json"],
            capture_output=True,
            check=True,
            cwd=REPO,
        )
        cli_wall = time.perf_counter() - start
    lines.append(
        f"| {WORKERS} (`planner explore --json` as a new process, start-up included) | "
        f"{cli_wall:.2f} s | {counts['enumerated'] / cli_wall:,.0f} | "
        f"{counts['evaluated'] / cli_wall:,.0f} |"
    )
    lines.append("")
    valid = counts["evaluated"] + counts["rejected"]["out_of_memory"]
    lines.append(
        f"Candidates: **{counts['enumerated']:,} enumerated** (product of the per-knob value "
        f"lists), {valid:,} valid layouts, **{counts['evaluated']:,} fit in memory and were "
        f"timed**; Pareto front {len(result['pareto'])} layouts. Rejected:\n"
    )
    for reason, n in counts["rejected"].items():
        if n:
            lines.append(f"- {reason}: {n:,}")
    p, pred = best_entry["parallelism"], best_entry["prediction"]
    lines.append(
        f"\nBest: tp {p['tensor_parallel']}, pp {p['pipeline_parallel']}, cp "
        f"{p['context_parallel']}, dp {p['data_parallel']}, vp {p['virtual_pipeline']}, sp "
        f"{p['sequence_parallel']}, micro-batch {p['micro_batch_size']}, recompute "
        f"{p['recompute']}, ZeRO {p['zero_stage']}: {pred['iteration_time_s']:.3f} s per "
        f"iteration, MFU {100 * pred['mfu']:.1f} %, {pred['memory_per_gpu_bytes'] / 2**30:.1f} "
        "GiB/GPU.\n"
    )
    return best_entry


def one_engine(lines: list[str], best: dict[str, Any]) -> None:
    """Section 2."""
    lines.append("## One engine: explorer = `planner predict`\n")
    space = parse_space(GPT3)
    outcome = sweep(space, top_k=1, workers=WORKERS)
    doc = scenario_document(GPT3, best["parallelism"], best["num_gpus"])
    in_process = predict_documents([doc])[0]["iteration_time_s"]
    cli = subprocess.run(
        [sys.executable, "-m", "planner", "predict", "--json", "-"],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    from_cli = json.loads(cli.stdout)["iteration_time_s"]
    swept = float(outcome.top_objective[0])
    lines.append(
        f"- best configuration: sweep {swept!r} s, `predict_documents` {in_process!r} s, "
        f"`planner predict --json` (subprocess) {from_cli!r} s: relative difference "
        f"{abs(swept / from_cli - 1):.1e}."
    )
    (sub,) = space.subspaces
    index = np.random.default_rng(0).choice(sub.size, 20_000, replace=False)
    cols, reason = sub.decode_at(index)  # a random sample; the valid ones are ~15 %
    cand = cols.take(np.flatnonzero(reason < 0)[:1000])
    start = time.perf_counter()
    result = evaluate(candidate_arrays(sub.base_arrays, cand), DefaultEfficiency())
    vec_s = time.perf_counter() - start
    docs = [
        scenario_document(GPT3, layout_json(space.scenario(cand, i).parallelism, {}), 1024)
        for i in range(cand.n)
    ]
    start = time.perf_counter()
    single = [predict_documents([d])[0] for d in docs]
    one_s = time.perf_counter() - start
    it = np.array([s["iteration_time_s"] for s in single])
    mem = np.array([s["memory_per_gpu_bytes"] for s in single])
    d_it = float(np.max(np.abs(it / result.iteration_time_s - 1)))
    d_mem = float(np.max(np.abs(mem / result.memory.total - 1)))
    lines.append(
        f"- 1,000 random valid candidates: max relative difference {d_it:.1e} (iteration time), "
        f"{d_mem:.1e} (memory) between the vectorized pass ({1e3 * vec_s:.0f} ms) and one "
        f"`predict_documents` call per scenario ({one_s:.2f} s). Target 1e-9: "
        f"{'met' if max(d_it, d_mem) <= 1e-9 else 'NOT met'}.\n"
    )


def huge(lines: list[str]) -> None:
    """Section 3."""
    doc = json.loads(json.dumps(GPT3))
    doc["hardware"]["num_gpus"] = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
    # 16 global batches: the pipeline digit holds only the (pipeline, virtual
    # pipeline) pairs that split the layers, so 8 batches no longer make 10^8 candidates
    doc["parallelism"]["global_batch_size"] = [
        *(256, 384, 512, 640, 768, 1024, 1280, 1536),
        *(2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192),
    ]
    # open tensor parallelism stays inside the 8-GPU NVLink domain; listing the degrees across
    # domains keeps the space it was before that rule (above 10^8 candidates)
    doc["parallelism"]["tensor_parallel"] = [1, 2, 4, 8, 16, 32]
    space = parse_space(doc)
    rss_before = _rss_mib()
    start = time.perf_counter()
    outcome = sweep(space, workers=WORKERS)
    wall = time.perf_counter() - start
    rss_after = _rss_mib()
    lines.append("## Bounded memory: a 10^8-candidate space\n")
    lines.append(
        f"GPT-3 175B over 8 GPU counts (256-32,768) x 16 global batches (256-8192): "
        f"**{outcome.enumerated:,} candidates** enumerated lazily in chunks of 131,072, "
        f"{outcome.evaluated:,} timed, in {wall:.1f} s ({outcome.enumerated / wall:,.0f} "
        f"enumerated/s) on {WORKERS} threads. Peak RSS {rss_before:.0f} MiB before, "
        f"{rss_after:.0f} MiB after (the product as int64 columns would need "
        f"{outcome.enumerated * 12 * 8 / 2**30:.0f} GiB).\n"
    )


def _sc21_cases() -> list[Case]:
    return [c for c in build_dataset(sources=["sc21"]).cases if c.config_id.startswith("sc21_t1_")]


SC21_FEATURES_2021 = {
    "sequence_parallel": False,
    "zero_stage": 0,
    "context_parallel": 1,
    "recompute": ["none", "full"],
    "account_for_embedding_in_pipeline_split": False,
    "account_for_loss_in_pipeline_split": False,
    "decoder_first_pipeline_num_layers": [None],
    "decoder_last_pipeline_num_layers": [None],
}
"""Megatron-LM as of SC21 (2021): no sequence parallelism or selective recompute (2022), no
distributed optimizer, no context parallelism, no uneven pipeline stages (2024)."""


def _layout_text(cols: Any, i: int = 0) -> str:
    slots = "".join(
        letter
        for letter, name in (
            ("E", "account_for_embedding_in_pipeline_split"),
            ("L", "account_for_loss_in_pipeline_split"),
        )
        if getattr(cols, name, None) is not None and getattr(cols, name)[i]
    )
    return (
        f"tp {cols.tensor_parallel[i]}, pp {cols.pipeline_parallel[i]}, cp "
        f"{cols.context_parallel[i]}, vp {cols.virtual_pipeline[i]}, mbs "
        f"{cols.micro_batch_size[i]}, {('none', 'selective', 'full')[cols.recompute[i]]}, "
        f"ZeRO {cols.zero_stage[i]}, sp {'y' if cols.sequence_parallel[i] else 'n'}"
        + (f", split +{slots}" if slots else "")
    )


def sc21(lines: list[str]) -> None:
    """Section 4."""
    lines.append("## Quality: Megatron SC21 Table 1 (published configuration vs our best)\n")
    lines.append(
        "Model, GPU count, global batch, fp16 and no flash attention as published (converted by "
        "`benchmarks.accuracy`). Two searches: **2021 set** = the knobs Megatron-LM had then "
        "(tp, pp, vp, micro-batch, recompute none/full; no sequence parallel, no distributed "
        "optimizer, no context parallel), **all knobs** = everything open. All times are "
        "predictions of the same model; rank 1 = our best; ratio = best / published.\n"
    )
    lines.append(
        "| run | GPUs | published tp, pp, mbs, recompute | published s (pred.) | "
        "2021 set: ratio, published rank / timed | 2021 set best | all knobs: ratio, "
        "published rank / timed | all knobs best | sweeps s |"
    )
    lines.append("| --- | ---: | --- | ---: | --- | --- | --- | --- | ---: |")
    ratios: dict[str, list[float]] = {"2021": [], "all": []}
    for case in _sc21_cases():
        doc = case.document
        published = doc["parallelism"]
        pub_pred = predict_documents([doc])[0]
        fits = bool(pub_pred["fits_in_memory"])
        base = {
            "global_batch_size": published["global_batch_size"],
            "precision": published["precision"],
            "flash_attention": published["flash_attention"],
        }
        cells: list[str] = []
        start = time.perf_counter()
        for key, extra in (("2021", SC21_FEATURES_2021), ("all", {})):
            space = parse_space({**doc, "parallelism": {**base, **extra}})
            outcome = sweep(
                space,
                workers=WORKERS,
                count_below=pub_pred["iteration_time_s"] if fits else None,
            )
            ratio = float(outcome.top_objective[0]) / pub_pred["iteration_time_s"]
            ratios[key].append(ratio)
            rank = (
                f"{outcome.num_below + 1:,} / {outcome.evaluated:,}"
                if fits
                else f"n/a (needs {pub_pred['memory_per_gpu_bytes'] / 2**30:.0f} GiB)"
            )
            cells += [f"{ratio:.3f}, {rank}", _layout_text(outcome.top)]
        wall = time.perf_counter() - start
        lines.append(
            f"| {case.config_id.removeprefix('sc21_t1_')} | {doc['hardware']['num_gpus']} | "
            f"{published['tensor_parallel']}, {published['pipeline_parallel']}, "
            f"{published['micro_batch_size']}, {published['recompute']} | "
            f"{pub_pred['iteration_time_s']:.2f} | {' | '.join(cells)} | {wall:.1f} |"
        )
    for key, label in (("2021", "2021 set"), ("all", "all knobs")):
        r = ratios[key]
        lines.append(
            f"\n{label}: best at least as fast as the published configuration (predicted) in "
            f"{sum(x <= 1.0 for x in r)} of {len(r)} runs; best/published "
            f"{min(r):.3f}-{max(r):.3f}."
        )
    lines.append("")


LAYOUT_KEYS = (*KNOBS, "data_parallel", "pipeline_layout")
"""The parallelism keys a ranking opens (the layout); the rest of a published run's
parallelism (global batch, precision, FP8 recipe and FP8 weights, flash attention, gradient
reduction and overlap settings) stays as published, but for the fields explore does not take
(``rank_case``)."""


def _layout_cell(p: dict[str, Any]) -> str:
    return (
        f"tp {p.get('tensor_parallel', 1)}, pp {p.get('pipeline_parallel', 1)}, cp "
        f"{p.get('context_parallel', 1)}, ep {p.get('expert_parallel', 1)}, vp "
        f"{p.get('virtual_pipeline', 1)}, mbs {p.get('micro_batch_size', 1)}, "
        f"{p.get('recompute', 'none')}, ZeRO {p.get('zero_stage', 0)}"
    )


def rank_case(case: Case) -> dict[str, Any]:
    """Where the published layout of ``case`` ranks among explore's candidates for its model,
    GPU count and global batch (every layout knob open, the rest as published): its predicted
    and measured iteration time, the best candidate's, the rank (1 + candidates predicted
    strictly faster) among the timed candidates."""
    doc = case.document
    pub = predict_documents([doc])[0]
    published = doc["parallelism"]
    opened = {k: v for k, v in published.items() if k not in LAYOUT_KEYS}
    # explore takes one value per scalar field: a list-valued one (recompute_modules) is left
    # to its default; a field explore refuses (PREDICT_ONLY: activation offloading, partial
    # recompute, several pipeline schedules per iteration) is left out of the space, and the
    # table names it beside the run
    dropped = sorted(k for k, v in opened.items() if isinstance(v, list) or k in PREDICT_ONLY)
    opened = {k: v for k, v in opened.items() if k not in dropped}
    space = parse_space({**doc, "parallelism": opened})
    fits = bool(pub["fits_in_memory"])
    start = time.process_time()
    outcome = sweep(space, workers=1, count_below=pub["iteration_time_s"] if fits else None)
    cpu_s = time.process_time() - start
    best = float(outcome.top_objective[0]) if outcome.evaluated else math.nan
    top_layout = (
        layout_json(space.scenario(outcome.top, 0).parallelism, {}) if outcome.evaluated else {}
    )
    return {
        "case": case,
        "published": published,
        "predicted_s": float(pub["iteration_time_s"]),
        "measured_s": case.measured_iteration_time_s,
        "fits": fits,
        "memory_gib": float(pub["memory_per_gpu_bytes"]) / 2**30,
        "rank": outcome.num_below + 1 if fits else None,
        "timed": outcome.evaluated,
        "best_s": best,
        "best": top_layout,
        "cpu_s": cpu_s,
        "dropped": dropped,
    }


def ranking(lines: list[str], sources: list[str] | None = None) -> None:
    """The published-layout ranking table, one section per ground-truth source."""
    chosen = sources or list(available_sources())
    dataset = build_dataset(sources=chosen)
    lines.append("## Published layouts among explore's candidates\n")
    lines.append(
        "Every accepted run of every ground-truth source (`benchmarks.accuracy` conversion: "
        "model, GPUs, global batch, precision and framework as published). The space opens "
        "every layout knob (tensor, pipeline with its splits, context, expert and expert "
        "tensor parallel, virtual pipeline, micro-batch, sequence parallel, recompute, ZeRO) "
        "and keeps the rest as published, but for the fields explore does not take (named "
        'beside the run: "explore without"). **rank** = 1 + the candidates predicted strictly '
        "faster than the published layout, among those timed (fit in memory); **pred / meas** "
        "= the published layout's predicted over its measured iteration time (> 1: the model "
        "is slower than the run); **best / pub** = the best candidate's predicted time over "
        "the published layout's.\n"
    )
    by_source: dict[str, list[dict[str, Any]]] = {}
    for case in dataset.cases:
        by_source.setdefault(case.source, []).append(rank_case(case))
    summary = [
        "| source | runs | published layout ranked 1 | in the top 10 | median best / pub | "
        "runs with pred / meas off by > 15 % | CPU s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    detail: list[str] = []
    for source, rows in by_source.items():
        ranks = [r["rank"] for r in rows if r["rank"] is not None]
        ratios = sorted(r["best_s"] / r["predicted_s"] for r in rows if r["fits"])
        gaps = [r for r in rows if abs(r["predicted_s"] / r["measured_s"] - 1) > 0.15]
        median = ratios[len(ratios) // 2] if ratios else math.nan
        summary.append(
            f"| {source} | {len(rows)} | {sum(x == 1 for x in ranks)} | "
            f"{sum(x <= 10 for x in ranks)} | {median:.3f} | {len(gaps)} | "
            f"{sum(r['cpu_s'] for r in rows):.1f} |"
        )
        detail.append(f"### {source}\n")
        detail.append(
            "| run | GPUs | published layout | meas. s | pred. s | pred / meas | rank / timed "
            "| best / pub | best layout |"
        )
        detail.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
        for r in rows:
            case, fits = r["case"], r["fits"]
            rank = (
                f"{r['rank']:,} / {r['timed']:,}"
                if fits
                else f"n/a (needs {r['memory_gib']:.0f} GiB) / {r['timed']:,}"
            )
            ratio = f"{r['best_s'] / r['predicted_s']:.3f}" if fits else "-"
            note = f" (explore without {', '.join(r['dropped'])})" if r["dropped"] else ""
            detail.append(
                f"| {case.config_id}{note} | {case.document['hardware']['num_gpus']} | "
                f"{_layout_cell(r['published'])} | {r['measured_s']:.3g} | "
                f"{r['predicted_s']:.3g} | {r['predicted_s'] / r['measured_s']:.2f} | {rank} | "
                f"{ratio} | {_layout_cell(r['best']) if r['best'] else '-'} |"
            )
        detail.append("")
    lines.extend(summary)
    lines.append("")
    lines.extend(detail)


def main(argv: list[str] | None = None) -> None:
    """Run the sections and print (``--write``: also save) the markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS}")
    parser.add_argument("--skip-huge", action="store_true", help="skip the 10^8 sweep")
    parser.add_argument(
        "--spaces",
        nargs="+",
        metavar="NAME",
        help=f"only the cost of these spaces ({', '.join(SPACES)} or all)",
    )
    parser.add_argument(
        "--compare",
        nargs="+",
        type=Path,
        metavar="DIR",
        default=[REPO],
        help="checkouts to measure --spaces with (default: this one)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of --spaces")
    parser.add_argument(
        "--without-uneven-splits",
        action="store_true",
        help="--spaces without the uneven first / last ranks (checkouts that search them)",
    )
    parser.add_argument(
        "--ranking",
        nargs="*",
        metavar="SOURCE",
        help="only the published-layout ranking (of these ground-truth sources; none: all); "
        f"with --write, into {RANKING}",
    )
    args = parser.parse_args(argv)
    if args.ranking is not None:
        lines = [
            "# Design-space exploration: published layouts among the candidates\n",
            f"Recorded with `.venv/bin/python -m benchmarks.explore --ranking --write` on "
            f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"numpy {np.__version__}; causes of the gaps in `benchmarks/results/explore.md`.\n",
        ]
        ranking(lines, args.ranking)
        text = "\n".join(lines)
        print(text)
        if args.write:
            RANKING.write_text(text + "\n", encoding="utf-8")
        return
    if args.spaces:
        names = list(SPACES) if args.spaces == ["all"] else args.spaces
        unknown = [n for n in names if n not in SPACES]
        if unknown:
            parser.error(f"unknown space {unknown[0]!r}; choose from {', '.join(SPACES)}")
        checkouts = [c.resolve() for c in args.compare]
        uneven = not args.without_uneven_splits
        print("\n".join(compare(names, checkouts, args.rounds, uneven=uneven)))
        return
    lines = [
        "# Design-space exploration: speed and answer quality (issue 4)\n",
        f"Recorded with `.venv/bin/python -m benchmarks.explore --write` on "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"numpy {np.__version__}.\n",
    ]
    if not args.skip_huge:  # first, so that its peak RSS is its own
        huge(lines)
    best = gpt3_speed(lines)
    one_engine(lines, best)
    sc21(lines)
    text = "\n".join(lines)
    print(text)
    if args.write:
        RESULTS.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
