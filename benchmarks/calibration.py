"""Calibration evidence on this machine: sample the CPU, fit, quote held-out errors, and predict
the step time of the end-to-end test's tiny DDP job with and without calibration.

    .venv/bin/python benchmarks/calibration.py                 # samples anew (about 1 minute)
    .venv/bin/python benchmarks/calibration.py --samples DIR   # reuses a recorded run

Writes ``benchmarks/results/calibration.md``. The job (``deploy/dev/tiny_gpt/``: 2 layers,
hidden 128, 4 heads, seq 128, vocab 1024, micro-batch 4, global batch 8, 2 ranks of gloo DDP
on 2 CPU cores, fp32, one thread per rank) is never sampled as a whole; its measured step time
is the mean "elapsed time per iteration" of ``tests/data/logs/tiny_gpt_megatron_900it.log``
(the first two logging intervals, warm-up, left out).

Three predictions:

* analytic: ``planner.perf.predict`` with ``DefaultEfficiency`` on a device description of
  this CPU built from the samples (``planner.calibration.device_spec``: measured GEMM peak,
  streaming bandwidth, gloo bus bandwidth);
* calibrated engine: the same with ``CalibratedEfficiency`` (operator models behind the
  engine's ``EfficiencyModel`` Protocol);
* calibrated operator sum: the job's operators (the engine's decomposition, at the job's exact
  shapes) timed by their own fitted models and summed, plus the gloo all-reduce from its
  alpha-beta fit, unhidden (the job all-reduces after the backward pass): what the engine
  would predict if the Protocol let it ask each operator's model (see the results' notes).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.sampling.files import read_sample_run  # noqa: E402
from adapters.sampling.run import run_sampling  # noqa: E402
from planner.calibration import (  # noqa: E402
    CalibratedEfficiency,
    Calibration,
    Collective,
    device_spec,
    fit_calibration,
)
from planner.perf import predict  # noqa: E402
from planner.perf.constants import default_constants  # noqa: E402
from planner.scenario import parse_scenario  # noqa: E402
from planner.specs import Scenario  # noqa: E402

LOG = ROOT / "tests" / "data" / "logs" / "tiny_gpt_megatron_900it.log"
SCENARIO = ROOT / "deploy" / "dev" / "tiny_gpt" / "scenario.yaml"
RESULT = ROOT / "benchmarks" / "results" / "calibration.md"
KEY = "cpu-local"
NUM_PARAMS = 544_256  # the job's log: "number of parameters ... 544256"


def measured_step_s() -> tuple[float, float, float, int]:
    """(mean, p10, p90, intervals) of the log's per-interval step times, warm-up left out."""
    text = LOG.read_text(encoding="utf-8")
    ms = [float(v) for v in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", text)]
    steady = np.asarray(ms[2:]) / 1e3
    return (
        float(steady.mean()),
        float(np.percentile(steady, 10)),
        float(np.percentile(steady, 90)),
        len(steady),
    )


def cpu_scenario(cal: Calibration) -> Scenario:
    sc = parse_scenario(yaml.safe_load(SCENARIO.read_text(encoding="utf-8")))
    spec = device_spec(cal, key=KEY)
    hw = dataclasses.replace(sc.hardware, gpu=spec, gpus_per_node=2, nvlink_domain_size=2)
    return dataclasses.replace(sc, hardware=hw)


def operator_sum(cal: Calibration) -> tuple[float, dict[str, float], list[str]]:
    """The job's operators timed by their fitted models (module docstring); returns
    (seconds, per-group seconds, operators outside their sampled domain)."""
    b, s, h, f, vocab, layers, heads = 4, 128, 128, 512, 1024, 2, 4
    tok = b * s
    outside: list[str] = []

    def t(name: str, **dims: float) -> float:
        op = cal.operator(name)
        assert op is not None, name
        x = op.features({k: np.asarray([float(v)]) for k, v in dims.items()}, 4.0)
        if not op.in_domain(x)[0]:
            outside.append(f"{name}{dims}")
        return float(op.predict_time_s(x)[0])

    groups: dict[str, float] = {}

    def add(group: str, seconds: float) -> None:
        groups[group] = groups.get(group, 0.0) + seconds

    def gemm_fwd_bwd(m: int, n: int, k: int, count: int) -> float:
        # forward (m x k)(k x n), data gradient (m x n)(n x k), weight gradient (k x m)(m x n)
        return count * (
            t("gemm/fwd", m=m, n=n, k=k)
            + t("gemm/fwd", m=m, n=k, k=n)
            + t("gemm/fwd", m=k, n=n, k=m)
        )

    for m, n, k in ((tok, 3 * h, h), (tok, h, h), (tok, f, h), (tok, h, f)):
        add("GEMMs (projections, MLP)", gemm_fwd_bwd(m, n, k, layers))
    add("GEMMs (LM head, tied)", gemm_fwd_bwd(tok, vocab, h, 1))
    attn = {"batch": b, "heads": heads, "seq": s, "head_dim": h // heads}
    add(
        "attention (SDPA, causal)",
        layers * (t("attention/fwd", **attn) + t("attention/bwd", **attn)),
    )
    ln = {"tokens": tok, "width": h}
    add("layer norms", (2 * layers + 1) * (t("layer_norm/fwd", **ln) + t("layer_norm/bwd", **ln)))
    act = {"tokens": tok, "width": f}
    add("GeLU", layers * (t("gelu/fwd", **act) + t("gelu/bwd", **act)))
    add("residual adds", (2 * layers + 1) * t("add/fwd", tokens=tok, width=h))
    emb = {"tokens": tok, "width": h, "vocab": vocab}
    add("embedding", t("embedding/fwd", **emb) + t("embedding/bwd", **emb))
    ce = {"tokens": tok, "vocab": vocab}
    add("cross-entropy", t("cross_entropy/fwd", **ce) + t("cross_entropy/bwd", **ce))
    add("AdamW step", t("adam/step", num_params=NUM_PARAMS))
    ar = cal.collective(Collective.ALL_REDUCE, num_ranks=2)
    if ar is not None:
        add("gloo all-reduce of the gradients (2.2 MB)", float(ar.time_s(4.0 * NUM_PARAMS)))
    return sum(groups.values()), groups, outside


def in_model_times_s() -> tuple[float, float]:
    """Diagnostic, not a prediction: the job's model timed in this process (1 thread, no DDP):
    (forward + backward of one micro-batch, clip_grad_norm_ + AdamW step), medians of 20."""
    import torch  # noqa: PLC0415 (benchmark-only diagnostic)

    sys.path.insert(0, str(ROOT / "deploy" / "dev" / "tiny_gpt"))
    import train  # type: ignore[import-not-found]  # noqa: PLC0415

    torch.set_num_threads(1)
    targs = train.parse_args([])
    model = train.TinyGPT(targs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = train.synthetic_tokens(8, 128, 1024, 0)[:4]

    def fwd_bwd() -> None:
        model(batch[:, :-1], batch[:, 1:]).backward()

    def step() -> None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    out = []
    for call in (fwd_bwd, step):
        for _ in range(5):
            call()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out.append(float(np.median(times)))
    return out[0], out[1]


def pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f} %"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", help="a recorded sampling run (default: sample anew)")
    args = parser.parse_args()
    if args.samples:
        run = read_sample_run(args.samples)
        where = args.samples
    else:
        tmp = tempfile.mkdtemp(prefix="planner-calibration-")
        run, _ = run_sampling(tmp, device="cpu", num_threads=1)
        where = f"{tmp} (fresh run)"
    meta: dict[str, Any] = dict(run.metadata)
    t0 = time.perf_counter()
    cal = fit_calibration(run.ops, run.collectives, metadata=meta)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    Calibration.from_json(cal.to_json())
    load_s = time.perf_counter() - t0

    mean, p10, p90, n_int = measured_step_s()
    sc = cpu_scenario(cal)
    analytic = predict(sc).iteration_time_s
    eff = CalibratedEfficiency(cal, device_key=KEY, attention_batch_heads=16)
    calibrated_pred = predict(sc, eff)
    calibrated = calibrated_pred.iteration_time_s
    opsum, groups, outside = operator_sum(cal)
    describe = eff.describe()
    fb_s, step_s = in_model_times_s()
    compute_groups = sum(v for k, v in groups.items() if not k.startswith(("AdamW", "gloo")))

    lines = [
        "# Calibration on this machine (issue 6)",
        "",
        f"Recorded {time.strftime('%Y-%m-%d')} with `.venv/bin/python benchmarks/calibration.py"
        + (f" --samples {args.samples}`" if args.samples else "`")
        + ". No GPU was available to this work (the session's device tool was not lent to this "
        "task), so nothing here was measured on an H100/H200: the GPU half of the issue's "
        "evidence is still open.",
        "",
        "## Sampling run",
        "",
        f"- samples: `{where}`",
        f"- device: {meta.get('device_name')} ({meta.get('cpu_count')} vCPUs, "
        f"{meta.get('platform')}), torch {meta.get('torch_version')}, "
        f"{meta.get('num_threads')} thread (as each rank of the DDP job), dtypes "
        f"{meta.get('dtypes')}",
        f"- design: scrambled Sobol over log-shapes, {meta.get('design', {}).get('num_points')} "
        f"shapes -> {meta.get('num_op_samples')} operator timings (forward and backward), "
        f"{meta.get('num_collective_samples')} collective timings ({meta.get('collectives')})",
        f"- **duration of the full sampling run: {meta.get('duration_s')} s** "
        f"(operators {meta.get('op_sampling_duration_s')} s), target < 600 s; "
        f"{meta.get('started_at')} - {meta.get('finished_at')}",
        f"- fit (model selection by 5-fold CV among 4 candidates per operator, held-out split, "
        f"refit): {fit_s:.1f} s; loading the JSON (deterministic refit + check): {load_s:.2f} s",
        "",
        "## Operator models: error on held-out samples",
        "",
        "A quarter of each operator's samples (seeded) is held out; the model is chosen by CV on "
        "the rest, fitted there, and predicts the held-out times. APE = |predicted - measured| / "
        "measured time.",
        "",
        "| operator | samples | chosen model | held-out MAPE | median APE | max APE "
        "| CV RMSE (ln) of the candidates |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for name, op in cal.operators.items():
        hop = op.held_out
        cv = ", ".join(f"{k} {v:.2f}" for k, v in op.regressor.cv_rmse_.items())
        lines.append(
            f"| `{name}` | {len(op.rows)} | {op.regressor.selected_} | {pct(hop.mape)} | "
            f"{pct(hop.median_ape)} | {pct(hop.max_ape)} | {cv} |"
        )
    lines += [
        "",
        f"Measured device: GEMM peak {cal.measured['peak_flop_per_s'] / 1e9:.1f} GFLOP/s (fp32, 1 "
        f"thread), streaming bandwidth beyond the caches "
        f"{cal.measured['memory_bandwidth_bytes_per_s'] / 1e9:.2f} GB/s, fastest op call "
        f"{cal.measured['kernel_min_time_s'] * 1e6:.1f} us.",
        "",
        "## Collectives: alpha-beta fits (gloo, 2 local processes)",
        "",
        "| collective | ranks | tier | alpha | bus bandwidth "
        "| held-out MAPE (5-fold over sizes) | max APE |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for c in cal.collectives:
        lines.append(
            f"| {c.collective} | {c.num_ranks} | {c.tier} | {c.alpha_s * 1e6:.0f} us | "
            f"{c.bus_bandwidth_bytes_per_s / 1e9:.2f} GB/s | {pct(c.held_out_mape)} | "
            f"{pct(c.held_out_max_ape)} |"
        )
    err = {k: v / mean - 1.0 for k, v in (("a", analytic), ("c", calibrated), ("o", opsum))}
    lines += [
        "",
        "The nccl-tests parser and fit are tested on constructed tables "
        "(`tests/data/calibration/nccl/`, format samples, not measurements).",
        "",
        "## End to end: the tiny DDP job, predicted before it runs",
        "",
        f"Measured: **{mean * 1e3:.1f} ms** per step (mean of {n_int} logging intervals of 5 "
        f"iterations; p10-p90 {p10 * 1e3:.1f}-{p90 * 1e3:.1f} ms), `{LOG.relative_to(ROOT)}`.",
        "",
        "| prediction | step time | error |",
        "| --- | ---: | ---: |",
        f"| analytic engine (`DefaultEfficiency`, device spec from measured peaks) | "
        f"{analytic * 1e3:.1f} ms | {100 * err['a']:+.1f} % |",
        f"| calibrated engine (`CalibratedEfficiency` through the Protocol) | "
        f"{calibrated * 1e3:.1f} ms | {100 * err['c']:+.1f} % |",
        f"| calibrated operator sum (each op's own model, all-reduce unhidden) | "
        f"{opsum * 1e3:.1f} ms | {100 * err['o']:+.1f} % |",
        "",
        "Calibrated engine breakdown (ms): "
        + ", ".join(
            f"{k} {v * 1e3:.2f}" for k, v in calibrated_pred.breakdown.as_dict().items() if v
        )
        + ".",
        "",
        "Operator sum (ms): " + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in groups.items()) + ".",
        f"Outside the sampled domain: {', '.join(outside) if outside else 'none'}.",
        "",
        "Provenance of the calibrated engine prediction (`CalibratedEfficiency.describe()`): "
        f"calibrated {describe['calibrated']}; fallback {describe['fallback']}; queries "
        f"{describe['queries']}.",
        "",
        "## Where the calibrated prediction loses time (diagnostic)",
        "",
        "Not used by any prediction: the job's own model timed in this process (1 thread, no "
        f"DDP, medians of 20): forward + backward of one micro-batch **{fb_s * 1e3:.1f} ms** "
        f"against {compute_groups * 1e3:.1f} ms for the sum of its operators' models; "
        f"`clip_grad_norm_` + AdamW **{step_s * 1e3:.1f} ms** against "
        f"{groups.get('AdamW step', math.nan) * 1e3:.1f} ms for the sampled AdamW step.",
        "",
        "## Reading the numbers",
        "",
        "- **Calibration made this prediction worse**, "
        f"{100 * err['c']:+.0f} % against {100 * err['a']:+.1f} %. The calibrated figure is "
        "what the job's operators cost when timed one by one. The diagnostic above splits the "
        f"gap: the model in one process already takes {(fb_s + step_s) * 1e3:.1f} ms, "
        f"{(fb_s + step_s - compute_groups - groups.get('AdamW step', 0.0)) * 1e3:.1f} ms more "
        "than its operators' models (autograd and Python dispatch around each op: a profile "
        "shows ~75 views, ~90 transposes and ~28 gradient accumulations per step; "
        "bias-gradient reductions and zero-fills; `nn.Linear`'s `addmm` with transposed "
        "weights instead of the sampled contiguous `matmul`; `clip_grad_norm_`), and the DDP "
        f"step takes {(mean - fb_s - step_s) * 1e3:.1f} ms more than that (the gloo all-reduce, "
        f"{groups.get('gloo all-reduce of the gradients (2.2 MB)', math.nan) * 1e3:.1f} ms by "
        "its fit, gradient flatten/copy, the loss all-reduce, two ranks sharing two cores). "
        "Per-operator calibration needs a per-step overhead term, which the online "
        "recalibration from reported step times (issue 6 item 4, not built here) would learn.",
        "- The analytic figure is nearer for the wrong reasons: its GPU-derived factors (tile and "
        "wave quantisation, `K/(K+64)`, the "
        f"{default_constants()['gemm_peak_fraction_ampere']:.2f} 'ampere' peak fraction) slow "
        "the CPU's GEMMs by about as much as the overhead it does not model.",
        "- The engine path and the operator sum are not the same sum, term by term: the "
        "`EfficiencyModel` Protocol cannot route operators to their own models "
        "(memory-bound work reaches it as bytes, answered by the pooled streaming model whose "
        "held-out error is the worst in the table; cross-entropy, embedding and the optimizer "
        "are timed as bytes; attention gets no batch x heads). The scenario says "
        "`overlap_grad_reduce: false` (the job all-reduces one flat buffer after the backward), "
        "so both engine predictions expose the whole all-reduce, as the operator sum does.",
        "- Sampling ran on a VM shared with other work (load average 1.5-2.4 on 2 cores); the "
        "held-out errors above include that noise.",
    ]
    RESULT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
