"""SC21 Table 2 (DeepSpeed ZeRO-3 of 2021) replayed step by step as DeepSpeed 0.3.13 runs it.

A diagnostic, not part of the planner: it shows how far the published ZeRO-3 rows sit from what
the code of the time does, with the planner's own operator and collective costs. It walks one
training step (the rows run one microbatch per step) through the forward, the recomputed
forward and the backward of every layer, submodule by submodule, with the rules of
``deepspeed/runtime/zero/stage3.py`` and ``partition_parameters.py`` of DeepSpeed 0.3.13 (March
2021, the ZeRO-3 release; 0.3.15 has the same structure):

* **Lock step.** ``fetch_sub_module`` gathers the submodule's missing parameters and, when any
  was gathered or is in flight, ``_synchronize_communication`` waits for every in-flight gather
  and calls ``torch.cuda.synchronize()``; ``_allgather_param`` calls ``torch.cuda.synchronize()``
  before every parameter's all-gather. Collectives therefore overlap compute only while one
  submodule runs.
* **Prefetch** (``prefetch_next_sub_modules`` / ``get_params_to_prefetch``): after the fetch,
  and only when no gather is in flight and fewer than ``stage3_max_live_parameters`` (1e9)
  gathered elements are live, whole parameters of the next submodules of the recorded trace
  are gathered until ``stage3_prefetch_bucket_size`` (5e7) elements are reached; each waits
  for the previous one (the synchronize above), so only the last overlaps the current
  submodule's compute.
* **Release** (``release_sub_module``): after its forward or backward a submodule's parameters
  are partitioned again unless their next use lies within ``stage3_max_reuse_distance`` (1e9)
  elements of the trace (the recomputed forward's last submodules stay gathered into their
  backward).
* **Persistent parameters** (``stage3_param_persistence_threshold`` 1e5): tensors with fewer
  elements (biases, layer norms) are never released between submodules; they are partitioned
  after the backward (``_partition_all_parameters``) and gathered again once per step in
  ``_post_step`` by the synchronous ``_allgather_params``, which copies every (parameter, rank)
  piece with its own ``copy_``.
* **Gradients**: every parameter's gradient is reduce-scattered on its own
  (``_reduce_scatter_gradients``) on the reduction stream; the next fetch's synchronize waits
  for it, so it is exposed.
* Collectives over lists of per-rank tensors pay one device copy per rank
  (``planner.perf.data``, ``zero3_list_collectives``), which the host launches itself in the
  calling thread (``ProcessGroupNCCL::collective``, torch 1.8-1.10): a prefetched gather,
  issued from the submodule's pre-forward hook, overlaps the submodule's compute with its NCCL
  kernel only, since the compute is launched after the copies (``host_copies``).

Each rule can be switched off (``--rules``) to see what it moves; ``host_loops`` (not on by
default) also charges DeepSpeed's Python loop over the ranks that builds the per-rank views
before each collective (``_allgather_param``, ``_reduce_scatter_gradient``: a ``narrow`` per
rank) at one ``kernel_min_time_s`` per rank, a host cost no source sizes. Every collective is
timed at its own tensor's size.

Costs: each submodule's compute is the planner's layer forward / backward split by FLOPs
(QKV 6, attention core ``4s/h``, output projection 2, each MLP GEMM 8, layer norms 0, in units
of ``2·b·s·h²``); the rest of the planner's compute (embedding, LM head, loss) runs once, apart;
each collective is ``planner.perf.collectives`` on the scenario's network, with
``--bandwidth-factor`` scaling the bus bandwidths (a diagnostic sweep: what bandwidth would fit).

    .venv/bin/python -m benchmarks.zero3_deepspeed_2021 [--bandwidth-factor 1 0.25 ...]
        [--rules prefetch reuse live persist host_copies host_loops]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from benchmarks.accuracy.convert import build_dataset
from planner.perf import collectives as coll
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.engine import link_of
from planner.perf.operators import layer_times, operator_times
from planner.perf.step import predict
from planner.scenario import parse_scenario

PREFETCH_ELEMENTS = 5e7
"""``stage3_prefetch_bucket_size`` default (DeepSpeed 0.3.13 ``runtime/zero/constants.py``)."""
MAX_LIVE_ELEMENTS = 1e9
"""``stage3_max_live_parameters`` default."""
MAX_REUSE_ELEMENTS = 1e9
"""``stage3_max_reuse_distance`` default."""
PERSISTENCE_ELEMENTS = 1e5
"""``stage3_param_persistence_threshold`` default."""


@dataclass(frozen=True, slots=True)
class _Step:
    """One submodule invocation of the trace: phase ``f`` (forward, no grad), ``r`` (the
    forward recomputed in the backward) or ``b`` (backward)."""

    phase: str
    layer: int
    name: str
    params: tuple[float, ...]
    compute_s: float


def _submodules(h: float, ffn: float, s: float) -> list[tuple[str, tuple[float, ...], float]]:
    """A GPT layer's submodules with parameters (element counts) and forward FLOP shares."""
    return [
        ("ln1", (h, h), 0.0),
        ("qkv", (3 * h * h, 3 * h), 6.0),
        ("core", (), 4.0 * s / h),
        ("dense", (h * h, h), 2.0),
        ("ln2", (h, h), 0.0),
        ("fc1", (ffn * h, ffn), 4.0 * 2.0 * ffn / (4 * h)),
        ("fc2", (ffn * h, h), 4.0 * 2.0 * ffn / (4 * h)),
    ]


RULES = frozenset({"prefetch", "reuse", "live", "persist", "host_copies"})
"""The rules the replay applies by default (module docstring); ``host_loops`` is optional."""


def replay(
    case_document: dict[str, object],
    bandwidth_factor: float,
    copy_per_rank_s: float | None = None,
    rules: frozenset[str] = RULES,
) -> tuple[float, float]:
    """Seconds of one step replayed as DeepSpeed 0.3.13 runs it, and the planner's compute;
    ``copy_per_rank_s`` overrides the cost of one per-rank copy (``kernel_min_time_s``);
    ``rules`` switches the rules on: ``prefetch`` (without it every gather is fetched when its
    submodule runs), ``reuse`` (release by reuse distance), ``live`` (the live-parameter cap),
    ``persist`` (small tensors gathered once per step), ``host_copies`` (the per-rank copies are
    launched by the calling thread before the next submodule's compute: a prefetched gather
    overlaps that compute with its NCCL kernel only), ``host_loops`` (DeepSpeed's Python loop
    over the ranks before each collective, one per-rank copy's time per rank)."""
    scenario = parse_scenario(case_document)
    eff = DefaultEfficiency()
    a = ScenarioArrays.from_scenarios([scenario])
    # both tiers' bus bandwidths times the factor: the NCCL fractions the link is built from
    fractions = ("nvlink_busbw_fraction", "network_busbw_fraction")
    scaled = {name: eff.constants[name] * bandwidth_factor for name in fractions}
    link = link_of(a, DefaultEfficiency.from_constants(scaled))
    layer = layer_times(operator_times(a, eff), a)
    n = float(a.dense_data_parallel_size[0])
    num_layers = int(a.num_layers[0])
    h, ffn, s = float(a.hidden_size[0]), float(a.ffn_hidden_size[0]), float(a.seq_length[0])
    forward = float(layer.forward_s[0])
    backward = float(layer.backward_s[0]) - forward  # full recompute: backward_s holds it
    compute = predict(scenario).breakdown.compute_s
    other = compute - num_layers * (2 * forward + backward)
    subs = _submodules(h, ffn, s)
    total_share = sum(share for _, _, share in subs)
    copy_s = n * (eff.kernel_min_time_s if copy_per_rank_s is None else copy_per_rank_s)

    # host_loops: DeepSpeed's Python loop over the ranks before each collective
    loop_s = copy_s if "host_loops" in rules else 0.0

    def nccl_gather_s(elements: float) -> float:
        size = a.full(2.0 * elements)
        return float(coll.all_gather_time_s(size, a.full(n), a.full(1.0), link)[0])

    def gather_s(elements: float) -> float:
        return nccl_gather_s(elements) + copy_s + loop_s

    def reduce_scatter_s(elements: float) -> float:
        size = a.full(float(a.grad_bytes_per_param[0]) * elements)
        rs = float(coll.reduce_scatter_time_s(size, a.full(n), a.full(1.0), link)[0])
        return rs + copy_s + loop_s

    trace: list[_Step] = []
    for i in range(num_layers):
        trace += [_Step("f", i, nm, p, forward * c / total_share) for nm, p, c in subs]
    for i in reversed(range(num_layers)):
        trace += [_Step("r", i, nm, p, forward * c / total_share) for nm, p, c in subs]
        trace += [_Step("b", i, nm, p, backward * c / total_share) for nm, p, c in reversed(subs)]
    persistent = {
        (st.layer, st.name, j)
        for st in trace
        for j, e in enumerate(st.params)
        if e < PERSISTENCE_ELEMENTS and "persist" in rules
    }
    status: dict[tuple[int, str, int], str] = {}  # absent: partitioned; "in_flight"; "available"
    live = 0.0
    clock = 0.0
    in_flight_until = 0.0
    in_flight = False
    for k, st in enumerate(trace):
        keys = [(st.layer, st.name, j) for j in range(len(st.params))]
        missing = [j for j, key in enumerate(keys) if key not in persistent and key not in status]
        waiting = any(status.get(key) == "in_flight" for key in keys)
        if missing or waiting:  # fetch_sub_module: gather, then synchronize everything
            clock = max(clock, in_flight_until)
            for j in missing:
                clock += gather_s(st.params[j])
                live += st.params[j]
            for key in keys:
                if key not in persistent:
                    status[key] = "available"
            in_flight = False
        live_ok = live < MAX_LIVE_ELEMENTS or "live" not in rules
        if "prefetch" in rules and not in_flight and live_ok:  # prefetch_next_sub_modules
            chosen: list[tuple[tuple[int, str, int], float]] = []
            total = 0.0
            for nxt in trace[k:]:
                for j, e in enumerate(nxt.params):
                    key = (nxt.layer, nxt.name, j)
                    if key in persistent or key in status or any(key == c for c, _ in chosen):
                        continue
                    chosen.append((key, e))
                    total += e
                    if total >= PREFETCH_ELEMENTS:
                        break
                if total >= PREFETCH_ELEMENTS:
                    break
            for q, (key, e) in enumerate(chosen):
                status[key] = "in_flight"
                live += e
                if q < len(chosen) - 1:
                    clock += gather_s(e)  # the next _allgather_param synchronizes first
                elif "host_copies" in rules:  # the calling thread launches the copies first
                    clock += copy_s + loop_s
                    in_flight_until, in_flight = clock + nccl_gather_s(e), True
                else:
                    in_flight_until, in_flight = clock + gather_s(e), True
        clock += st.compute_s
        if st.phase == "b":  # each gradient reduce-scattered, waited for by the next fetch
            clock += sum(reduce_scatter_s(e) for e in st.params)
        keep = False
        # release_sub_module: kept when reused within 1e9 elements
        if st.phase == "r" and "reuse" in rules:
            distance = 0.0
            for nxt in trace[k + 1 :]:
                if nxt.phase == "b" and (nxt.layer, nxt.name) == (st.layer, st.name):
                    break
                distance += sum(nxt.params)
            keep = distance < MAX_REUSE_ELEMENTS
        if not keep:
            for key, e in zip(keys, st.params, strict=True):
                if status.pop(key, None) is not None:
                    live -= e
    clock = max(clock, in_flight_until if in_flight else 0.0)
    small = [e for st in trace if st.phase == "f" for e in st.params if e < PERSISTENCE_ELEMENTS]
    post_step = 0.0
    if "persist" in rules:  # _post_step: one copy_ per piece
        post_step = gather_s(sum(small)) + len(small) * copy_s
    return clock + other + post_step, compute


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bandwidth-factor", type=float, nargs="+", default=[1.0])
    parser.add_argument("--copy-per-rank-s", type=float, default=None)
    parser.add_argument(
        "--rules",
        nargs="*",
        default=sorted(RULES),
        help="rules to apply (prefetch reuse live persist host_copies host_loops; "
        "default: all but host_loops)",
    )
    args = parser.parse_args(argv)
    rules = frozenset(args.rules)
    print(f"rules: {' '.join(sorted(rules)) or 'none (lock step only)'}")
    cases = [c for c in build_dataset(["sc21"]).cases if "_t2_" in c.config_id]
    for factor in args.bandwidth_factor:
        print(f"bus bandwidth x {factor:g}")
        print("| row | subset | measured s | planner s | replay s | planner % | replay % |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        held: list[tuple[float, float]] = []
        for case in sorted(cases, key=lambda c: c.config_id):
            shipped = predict(parse_scenario(case.document)).iteration_time_s
            replayed, _ = replay(case.document, factor, args.copy_per_rank_s, rules)
            measured = case.measured_iteration_time_s
            e_ship = 100 * (shipped - measured) / measured
            e_rep = 100 * (replayed - measured) / measured
            subset = "calib." if case.calibration else "held-out"
            if not case.calibration:
                held.append((abs(e_ship), abs(e_rep)))
            print(
                f"| {case.config_id} | {subset} | {measured:.2f} | {shipped:.2f} | "
                f"{replayed:.2f} | {e_ship:+.1f} | {e_rep:+.1f} |"
            )
        ship = sum(x for x, _ in held) / len(held)
        rep = sum(y for _, y in held) / len(held)
        print(f"held-out mean APE: planner {ship:.1f} %, replay {rep:.1f} %\n")


if __name__ == "__main__":
    main()
