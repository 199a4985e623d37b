"""Discrete-event simulator of Megatron-style training steps, for ground-truth straggler tests.

Independent of ``planner.stragglers.graph``: the schedule comes from Megatron-LM's code, not from
timestamps. Per step and per worker ``(dp_rank, stage)`` it runs the program of
``forward_backward_pipelining_without_interleaving`` (1F1B, vpp = 1) or
``forward_backward_pipelining_with_interleaving`` (interleaved 1F1B, vpp > 1; Narayanan et al.,
SC '21, §2.2.2): warm-up forwards, steady 1F1B, cool-down backwards, the chunk of virtual
micro-batch k being ``(k mod (pp * vpp)) // pp`` (mirrored for backwards), preceded by one
``params-all-gather`` per model chunk and followed by one ``grads-reduce-scatter`` per chunk and
the ``optimizer``.

Semantics (seconds, each step starts at 0):

* Every operation is launched ``launch_gap_s`` after the worker's previous one ends (the first
  one ``launch_gap_s`` after 0).
* **Point-to-point: blocking rendezvous.** Megatron's ``_communicate`` issues a batch of
  ``isend``/``irecv`` (``send_forward_recv_backward``, ``send_forward_backward_recv_forward_
  backward``, ...) and waits for all of them. A send of an activation (megabytes, beyond NCCL's
  eager buffers) completes only once the receiver has posted its receive, so each op of a batch
  ends ``p2p_s`` after the later of its two endpoints posted, and the batch ends with its last
  op; every op of the batch is recorded with the batch's start and duration (as in the real
  traces). An op waits for its own peer only: batches chained over several stages do not wait
  for each other transitively. Ops match per (direction, sender, receiver) in issue order.
* **Data-parallel collectives** (one group per stage and chunk): every member ends
  ``dp_collective_s`` after the last member posted.
* **Compute** takes its given duration.

The result has the columns of the real traces (``dp_rank, stage, rank, step, optype, start_ts,
duration, seq_id, mc, gmc, mb_id``; ``rank = stage * dp + dp_rank``, ``gmc = mc * pp + stage``
for compute, -1 otherwise)
and the simulated step times (last end minus first start), the ground truth of the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from planner.specs.trace import OP_TYPES, OpTrace, OpType, TraceLayout

FloatArray = npt.NDArray[np.float64]

_FWD, _BWD = "F", "B"


@dataclass(frozen=True, slots=True)
class _Compute:
    optype: OpType
    chunk: int
    microbatch: int


@dataclass(frozen=True, slots=True)
class _P2P:
    """A batch of point-to-point ops: (direction F/B, is_send, peer stage) each."""

    ops: tuple[tuple[str, bool, int], ...]


@dataclass(frozen=True, slots=True)
class _Collective:
    optype: OpType
    chunk: int


_Item = _Compute | _P2P | _Collective


@dataclass(frozen=True, slots=True, kw_only=True)
class Simulation:
    """Simulated trace: ``columns`` (the real traces' columns, numpy arrays of equal length),
    ``step_time_s`` (steps,) last end minus first start per step, ``layout``; ``transfer_s``
    (N,) the true transfer time of communication rows (NaN for compute)."""

    layout: TraceLayout
    columns: dict[str, npt.NDArray[Any]]
    step_time_s: FloatArray
    transfer_s: FloatArray
    launch_gap_s: FloatArray  # (steps, dp, pp)

    def op_trace(self) -> OpTrace:
        """The columns as an ``OpTrace`` (what ``adapters.traces.read_op_trace`` builds)."""
        c = self.columns
        codes = {op.value: i for i, op in enumerate(OP_TYPES)}
        return OpTrace(
            layout=self.layout,
            dp_rank=c["dp_rank"],
            stage=c["stage"],
            step=c["step"],
            optype=np.array([codes[str(v)] for v in c["optype"]], dtype=np.int64),
            start_s=c["start_ts"],
            duration_s=c["duration"],
            seq_id=c["seq_id"],
            chunk=c["mc"],
            microbatch=c["mb_id"],
        )

    def write(self, directory: Path, name: str = "SIM") -> tuple[Path, Path]:
        """Write ``trace-NAME.parquet`` and ``meta-NAME.yaml`` as the artifact ships them."""
        trace = directory / f"trace-{name}.parquet"
        meta = directory / f"meta-{name}.yaml"
        table = pa.table({k: pa.array(v) for k, v in self.columns.items()})
        table = table.set_column(
            table.column_names.index("optype"),
            "optype",
            table.column("optype").dictionary_encode(),
        )
        pq.write_table(table, trace)
        lay = self.layout
        meta.write_text(
            f"trial_name: {name}\nrun_id: 0\ndp_size: {lay.data_parallel}\ndsp_size: 1\n"
            f"pp_size: {lay.pipeline_parallel}\ntp_size: 1\n"
            f"vpp_size: {lay.virtual_stages}\nworld_size: {lay.world_size}\n",
            encoding="utf-8",
        )
        return trace, meta


def _one_f_one_b(stage: int, pp: int, num_microbatches: int) -> list[_Item]:
    """Megatron's ``forward_backward_pipelining_without_interleaving`` for one stage."""
    first, last = stage == 0, stage == pp - 1
    prog: list[_Item] = []

    def recv_forward() -> None:
        if not first:
            prog.append(_P2P(((_FWD, False, stage - 1),)))

    def send_forward() -> None:
        if not last:
            prog.append(_P2P(((_FWD, True, stage + 1),)))

    def fwd(mb: int) -> None:
        prog.append(_Compute(OpType.FORWARD_COMPUTE, 0, mb))

    def bwd(mb: int) -> None:
        prog.append(_Compute(OpType.BACKWARD_COMPUTE, 0, mb))

    warmup = min(pp - stage - 1, num_microbatches)
    remaining = num_microbatches - warmup
    for mb in range(warmup):
        recv_forward()
        fwd(mb)
        send_forward()
    if remaining > 0:
        recv_forward()
    for i in range(remaining):
        fwd(warmup + i)
        if not last:  # send_forward_recv_backward
            prog.append(_P2P(((_FWD, True, stage + 1), (_BWD, False, stage + 1))))
        bwd(i)
        if i == remaining - 1:
            if not first:  # send_backward
                prog.append(_P2P(((_BWD, True, stage - 1),)))
        elif not first:  # send_backward_recv_forward
            prog.append(_P2P(((_BWD, True, stage - 1), (_FWD, False, stage - 1))))
    for i in range(warmup):
        if not last:  # recv_backward
            prog.append(_P2P(((_BWD, False, stage + 1),)))
        bwd(remaining + i)
        if not first:  # send_backward
            prog.append(_P2P(((_BWD, True, stage - 1),)))
    return prog


def _interleaved(stage: int, pp: int, vpp: int, num_microbatches: int) -> list[_Item]:
    """Megatron's ``forward_backward_pipelining_with_interleaving`` for one stage (batched p2p)."""
    if num_microbatches % pp:
        raise ValueError("the interleaved schedule needs num_microbatches % pp == 0")
    total = num_microbatches * vpp
    group = pp * vpp
    prev, nxt = (stage - 1) % pp, (stage + 1) % pp
    first_stage, last_stage = stage == 0, stage == pp - 1
    prog: list[_Item] = []

    def chunk_of(k: int, forward: bool) -> int:
        c = (k % group) // pp
        return c if forward else vpp - 1 - c

    def microbatch_of(k: int) -> int:
        return (k // group) * pp + k % pp

    def comm(send_f: bool, send_b: bool, recv_f: bool, recv_b: bool) -> None:
        # _batched_p2p_ops order: send prev, recv prev, send next, recv next.
        ops = []
        if send_b:
            ops.append((_BWD, True, prev))
        if recv_f:
            ops.append((_FWD, False, prev))
        if send_f:
            ops.append((_FWD, True, nxt))
        if recv_b:
            ops.append((_BWD, False, nxt))
        if ops:
            prog.append(_P2P(tuple(ops)))

    def forward(k: int) -> bool:
        """Run virtual micro-batch k forward; True when its output goes downstream."""
        c = chunk_of(k, True)
        prog.append(_Compute(OpType.FORWARD_COMPUTE, c, microbatch_of(k)))
        return not (last_stage and c == vpp - 1)

    def backward(k: int) -> bool:
        c = chunk_of(k, False)
        prog.append(_Compute(OpType.BACKWARD_COMPUTE, c, microbatch_of(k)))
        return not (first_stage and c == 0)

    all_warmup = num_microbatches == pp
    warmup = total if all_warmup else min((pp - stage - 1) * 2 + (vpp - 1) * pp, total)
    remaining = total - warmup

    if not first_stage:  # recv_forward for chunk 0
        comm(False, False, True, False)
    for k in range(warmup):
        send = forward(k)
        recv_prev = not (first_stage and chunk_of(k + 1, True) == 0)
        if k == total - 1:
            recv_prev = False
        if k == warmup - 1 and not all_warmup:
            comm(send, False, recv_prev, not last_stage)
        else:
            comm(send, False, recv_prev, False)
    for i in range(remaining):
        fk, bk = i + warmup, i
        send_f = forward(fk)
        send_b = backward(bk)
        recv_prev = True
        if first_stage and chunk_of(fk - (pp - 1), True) == vpp - 1:
            recv_prev = False
        recv_next = True
        if last_stage and chunk_of(bk - (pp - 1), False) == 0:
            recv_next = False
        if i == remaining - 1:
            recv_prev = False
        comm(send_f, send_b, recv_prev, recv_next)
    if all_warmup and not last_stage:
        comm(False, False, False, True)  # recv_backward
    for k in range(remaining, total):
        send_b = backward(k)
        recv_next = not (last_stage and chunk_of(k + 1, False) == vpp - 1)
        if k == total - 1:
            recv_next = False
        comm(False, send_b, False, recv_next)
    return prog


def worker_program(stage: int, pp: int, vpp: int, num_microbatches: int) -> list[_Item]:
    """The operations of one worker in one step, in issue order."""
    body = (
        _one_f_one_b(stage, pp, num_microbatches)
        if vpp == 1
        else _interleaved(stage, pp, vpp, num_microbatches)
    )
    gather = [_Collective(OpType.PARAMS_ALL_GATHER, c) for c in range(vpp)]
    scatter = [_Collective(OpType.GRADS_REDUCE_SCATTER, c) for c in range(vpp)]
    return [*gather, *body, *scatter, _Compute(OpType.OPTIMIZER, -1, -1)]


def simulate(
    *,
    dp: int,
    pp: int,
    vpp: int = 1,
    num_microbatches: int,
    forward_s: npt.ArrayLike = 1.0,
    backward_s: npt.ArrayLike = 2.0,
    p2p_s: float = 0.01,
    dp_collective_s: float = 0.05,
    optimizer_s: npt.ArrayLike = 0.1,
    launch_gap_s: npt.ArrayLike = 0.0,
    num_steps: int = 3,
) -> Simulation:
    """Simulate ``num_steps`` training steps (see the module docstring), seconds.

    ``forward_s`` / ``backward_s`` broadcast to (steps, dp, pp, vpp, microbatches): the duration
    of each compute op; ``optimizer_s`` and ``launch_gap_s`` to (steps, dp, pp). Raises
    ``RuntimeError`` when the schedule deadlocks (it must not).
    """
    shape = (num_steps, dp, pp, vpp, num_microbatches)
    fwd = np.broadcast_to(np.asarray(forward_s, dtype=np.float64), shape)
    bwd = np.broadcast_to(np.asarray(backward_s, dtype=np.float64), shape)
    opt = np.broadcast_to(np.asarray(optimizer_s, dtype=np.float64), shape[:3])
    gap = np.broadcast_to(np.asarray(launch_gap_s, dtype=np.float64), shape[:3])
    programs = [worker_program(s, pp, vpp, num_microbatches) for s in range(pp)]
    rows: list[tuple[Any, ...]] = []
    step_times = np.empty(num_steps)
    for step in range(num_steps):
        first_row = len(rows)
        _run_step(
            step,
            dp,
            pp,
            programs,
            fwd[step],
            bwd[step],
            opt[step],
            gap[step],
            rows,
            p2p_s,
            dp_collective_s,
        )
        mine = rows[first_row:]
        step_times[step] = max(r[5] + r[6] for r in mine) - min(r[5] for r in mine)
    names = (
        "dp_rank",
        "stage",
        "rank",
        "step",
        "optype",
        "start_ts",
        "duration",
        "seq_id",
        "mc",
        "gmc",
        "mb_id",
        "transfer",
    )
    cols = list(zip(*rows, strict=True))
    columns: dict[str, npt.NDArray[Any]] = {}
    for name, values in zip(names, cols, strict=True):
        if name == "optype":
            columns[name] = np.array(values, dtype=object)
        elif name in ("start_ts", "duration", "transfer"):
            columns[name] = np.array(values, dtype=np.float64)
        else:
            columns[name] = np.array(values, dtype=np.int64)
    transfer = columns.pop("transfer")
    return Simulation(
        layout=TraceLayout(data_parallel=dp, pipeline_parallel=pp, virtual_stages=vpp),
        columns=columns,
        step_time_s=step_times,
        transfer_s=transfer,
        launch_gap_s=np.array(gap),
    )


def _run_step(
    step: int,
    dp: int,
    pp: int,
    programs: list[list[_Item]],
    fwd: FloatArray,
    bwd: FloatArray,
    opt: FloatArray,
    gap: FloatArray,
    rows: list[tuple[Any, ...]],
    p2p_s: float,
    coll_s: float,
) -> None:
    """Event loop of one step: advance every worker until it blocks on a peer that has not
    posted yet; append one row per op (trace columns plus the true transfer time)."""
    workers = [(d, s) for d in range(dp) for s in range(pp)]
    worker_index = {w: i for i, w in enumerate(workers)}
    pc = dict.fromkeys(workers, 0)
    clock = dict.fromkeys(workers, 0.0)
    seq: dict[tuple[int, int, str], int] = {}
    channel: dict[tuple[int, int, str, bool, int], int] = {}  # per (w, dir, send, peer) count
    posted: dict[tuple[Any, ...], float] = {}  # p2p endpoint -> post time
    arrived: dict[tuple[Any, ...], tuple[int, float]] = {}  # collective -> (members, latest)
    post_of_item: dict[tuple[int, int], float] = {}
    keys_of_item: dict[tuple[int, int], list[tuple[Any, ...]]] = {}

    def record(
        w: tuple[int, int],
        op: OpType,
        start: float,
        dur: float,
        chunk: int,
        mb: int,
        transfer: float,
    ) -> None:
        d, s = w
        k = (d, s, op.value)
        sid = seq.get(k, 0)
        seq[k] = sid + 1
        compute = op in (OpType.FORWARD_COMPUTE, OpType.BACKWARD_COMPUTE)
        gmc = chunk * pp + s if compute else -1
        rows.append((d, s, s * dp + d, step, op.value, start, dur, sid, chunk, gmc, mb, transfer))

    def p2p_key(w: tuple[int, int], op: tuple[str, bool, int]) -> tuple[Any, ...]:
        """(own endpoint key, peer endpoint key) for one op, numbering ops per channel."""
        d, s = w
        direction, is_send, peer = op
        ck = (d, s, direction, is_send, peer)
        n = channel.get(ck, 0)
        channel[ck] = n + 1
        src, dst = (s, peer) if is_send else (peer, s)
        return (d, direction, src, dst, n, is_send)

    remaining = len(workers)
    done = dict.fromkeys(workers, False)
    while remaining:
        progress = False
        for w in workers:
            d, s = w
            prog = programs[s]
            while pc[w] < len(prog):
                item = prog[pc[w]]
                start = clock[w] + float(gap[d, s])
                ident = (worker_index[w], pc[w])
                if isinstance(item, _Compute):
                    if item.optype is OpType.OPTIMIZER:
                        dur = float(opt[d, s])
                    else:
                        table = fwd if item.optype is OpType.FORWARD_COMPUTE else bwd
                        dur = float(table[d, s, item.chunk, item.microbatch])
                    record(w, item.optype, start, dur, item.chunk, item.microbatch, np.nan)
                    clock[w] = start + dur
                elif isinstance(item, _P2P):
                    if ident not in post_of_item:
                        post_of_item[ident] = start
                        keys_of_item[ident] = [p2p_key(w, op) for op in item.ops]
                        for key in keys_of_item[ident]:
                            posted[key] = start
                        progress = True
                    start = post_of_item[ident]
                    peers = [posted.get((*k[:5], not k[5])) for k in keys_of_item[ident]]
                    if any(p is None for p in peers):
                        break
                    end = max(max(start, float(p)) + p2p_s for p in peers if p is not None)
                    names = {
                        (_FWD, True): OpType.FORWARD_SEND,
                        (_FWD, False): OpType.FORWARD_RECV,
                        (_BWD, True): OpType.BACKWARD_SEND,
                        (_BWD, False): OpType.BACKWARD_RECV,
                    }
                    for direction, is_send, _ in item.ops:
                        record(w, names[direction, is_send], start, end - start, -1, -1, p2p_s)
                    clock[w] = end
                else:
                    group = (item.optype, s, item.chunk)
                    if ident not in post_of_item:
                        post_of_item[ident] = start
                        count, latest = arrived.get(group, (0, 0.0))
                        arrived[group] = (count + 1, max(latest, start))
                        progress = True
                    start = post_of_item[ident]
                    count, latest = arrived[group]
                    if count < dp:
                        break
                    end = latest + coll_s
                    record(w, item.optype, start, end - start, item.chunk, -1, coll_s)
                    clock[w] = end
                pc[w] += 1
                progress = True
            if pc[w] == len(prog) and not done[w]:
                done[w] = True
                remaining -= 1
        if not progress and remaining:
            raise RuntimeError(f"schedule deadlock in step {step}: {pc}")
