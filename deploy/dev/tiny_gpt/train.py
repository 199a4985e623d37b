"""A tiny GPT trained with PyTorch DDP (gloo, CPU): a real job for the planner's end-to-end tests.

Run under Slurm (``srun -n2 python train.py ...``: rank and world size come from SLURM_PROCID,
SLURM_NTASKS, SLURM_LOCALID), under ``torchrun`` (RANK, WORLD_SIZE, LOCAL_RANK) or as a single
process. The arguments carry Megatron-LM's names (``--num-layers``, ``--hidden-size``,
``--micro-batch-size``, ``--global-batch-size``, ``--train-iters``, ``--log-interval``, ...) so
that the planner can read the job's shape from its command line, and rank 0 prints one
Megatron-LM style line every ``--log-interval`` iterations, e.g.::

     [2026-01-01 10:00:00] iteration        5/     300 | consumed samples:           40 |
     elapsed time per iteration (ms): 131.2 | learning rate: 1.000000E-03 | global batch size:
     8 | lm loss: 6.812345E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped
     iterations:   0 | number of nan iterations:   0 |

(on one line). As in Megatron-LM, the elapsed time is the mean wall time per iteration since the
previous log line, and the loss is the mean over the iterations of the interval, averaged over
the data-parallel ranks.

The data are synthetic: sequences drawn from a fixed random sparse Markov chain over the
vocabulary (each token has four possible successors), so the loss falls from about ln(vocab) to
about ln(4) and the run shows a real learning curve. Global batch = micro-batch x data-parallel
size x gradient-accumulation steps. Gradients are all-reduced once per iteration after the
local forward and backward passes of all micro-batches (Megatron-LM's data parallelism without
``--overlap-grad-reduce``), so each rank can time its own compute apart from the wait for its
peers.

Every rank also prints, once per logging interval, a ``rank_step`` JSON line for the planner's
live straggler detection::

    {"event": "rank_step", "iteration": 5, "rank": 1, "world_size": 2, "compute_time_s": 0.041,
     "step_time_s": 0.057, "num_iterations": 5, "node": "node1", "time_s": 1795000000.0}

``--slow-rank R --slow-factor F --slow-from-iteration K`` makes rank R a straggler from
iteration K on: it spends ``F`` times its measured compute time per iteration (the extra as busy
matrix products, ``--slow-mode work``, or as a sleep, ``sleep``), so the other ranks wait at the
gradient all-reduce.

Evaluation pauses, checkpoints (``--save``, ``--load``, ``--exit-interval``), a slower phase
of every rank and Megatron-LM's argument dump come from ``run_events.py`` (its docstring): the
pauses and phases real runs have, for the planner's ETA.

Needs only ``torch`` (CPU build is enough) and ``numpy``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import socket
import sys
import time
from datetime import datetime

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_events

_NUM_SUCCESSORS = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Megatron-LM argument names (megatron/training/arguments.py) for the subset used here."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_argument_group("model")
    g.add_argument("--num-layers", type=int, default=2)
    g.add_argument("--hidden-size", type=int, default=128)
    g.add_argument("--ffn-hidden-size", type=int, default=None, help="default 4 x hidden size")
    g.add_argument("--num-attention-heads", type=int, default=4)
    g.add_argument("--seq-length", type=int, default=128)
    g.add_argument("--max-position-embeddings", type=int, default=128)
    g.add_argument("--vocab-size", type=int, default=1024)
    g = p.add_argument_group("training")
    g.add_argument("--micro-batch-size", type=int, default=4)
    g.add_argument("--global-batch-size", type=int, default=8)
    g.add_argument("--train-iters", type=int, default=900)
    g.add_argument("--log-interval", type=int, default=5)
    g.add_argument("--log-throughput", action="store_true")
    g.add_argument("--lr", type=float, default=1.0e-3)
    g.add_argument("--min-lr", type=float, default=1.0e-4)
    g.add_argument("--lr-warmup-iters", type=int, default=10)
    g.add_argument("--lr-decay-style", choices=("constant", "linear", "cosine"), default="cosine")
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--adam-beta1", type=float, default=0.9)
    g.add_argument("--adam-beta2", type=float, default=0.95)
    g.add_argument("--clip-grad", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=1234)
    g.add_argument(
        "--tensor-model-parallel-size", type=int, default=1, help="accepted; only 1 is supported"
    )
    g.add_argument(
        "--pipeline-model-parallel-size", type=int, default=1, help="accepted; only 1 is supported"
    )
    g.add_argument("--num-samples", type=int, default=4096, help="synthetic data set size")
    g.add_argument("--slow-rank", type=int, default=-1, help="rank made a straggler (-1: none)")
    g.add_argument("--slow-factor", type=float, default=1.0, help="its compute-time multiplier")
    g.add_argument("--slow-from-iteration", type=int, default=1, help="first slowed iteration")
    g.add_argument(
        "--slow-mode",
        choices=("work", "sleep"),
        default="sleep",
        help="the straggler's extra time: busy compute (a slow processor) or a sleep",
    )
    g.add_argument(
        "--no-rank-lines", action="store_true", help="do not print per-rank rank_step lines"
    )
    run_events.add_arguments(p)
    return p.parse_args(argv)


class _Block(nn.Module):
    """Pre-LayerNorm transformer layer: causal self-attention and a GeLU MLP."""

    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    """GPT decoder: learned position embeddings, ``num_layers`` blocks, tied output embedding."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__()
        h = args.hidden_size
        self.tok = nn.Embedding(args.vocab_size, h)
        self.pos = nn.Embedding(args.max_position_embeddings, h)
        ffn = args.ffn_hidden_size or 4 * h
        self.blocks = nn.ModuleList(
            _Block(h, args.num_attention_heads, ffn) for _ in range(args.num_layers)
        )
        self.ln_f = nn.LayerNorm(h)
        for name, param in self.named_parameters():
            if name.endswith("weight") and param.dim() >= 2:
                nn.init.normal_(param, mean=0.0, std=0.02)  # GPT-2 / Megatron init_method_std
            elif name.endswith("bias"):
                nn.init.zeros_(param)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.tok.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def synthetic_tokens(num_samples: int, seq_length: int, vocab: int, seed: int) -> torch.Tensor:
    """``[num_samples, seq_length + 1]`` int64 tokens from a fixed sparse random Markov chain."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, vocab, size=(vocab, _NUM_SUCCESSORS))
    out = np.empty((num_samples, seq_length + 1), dtype=np.int64)
    out[:, 0] = rng.integers(0, vocab, size=num_samples)
    choice = rng.integers(0, _NUM_SUCCESSORS, size=(num_samples, seq_length))
    for t in range(seq_length):
        out[:, t + 1] = successors[out[:, t], choice[:, t]]
    return torch.from_numpy(out)


def learning_rate(args: argparse.Namespace, iteration: int) -> float:
    """Linear warm-up then constant/linear/cosine decay to ``--min-lr`` (Megatron's scheduler)."""
    if args.lr_warmup_iters > 0 and iteration <= args.lr_warmup_iters:
        return args.lr * iteration / args.lr_warmup_iters
    if args.lr_decay_style == "constant":
        return float(args.lr)
    span = max(1, args.train_iters - args.lr_warmup_iters)
    frac = min(1.0, (iteration - args.lr_warmup_iters) / span)
    coeff = 1.0 - frac if args.lr_decay_style == "linear" else 0.5 * (math.cos(math.pi * frac) + 1)
    return float(args.min_lr + coeff * (args.lr - args.min_lr))


def model_flops_per_iteration(args: argparse.Namespace) -> float:
    """Model FLOPs of one iteration (forward + backward, no recompute), GeLU MLP.

    72 B s L h^2 (1 + s/(6h) + V/(12 h L)) for a 4h MLP; Narayanan et al. 2021, eq. (3) without
    the recompute pass; the MLP term is scaled for other ``--ffn-hidden-size`` values.
    """
    b, s, n = args.global_batch_size, args.seq_length, args.num_layers
    h, v = args.hidden_size, args.vocab_size
    ffn = args.ffn_hidden_size or 4 * h
    per_layer = 3 * (2 * b * s * (4 * h * h + 2 * h * ffn) + 4 * b * s * s * h)
    logits = 3 * 2 * b * s * h * v
    return float(n * per_layer + logits)


def _env_int(*names: str, default: int) -> int:
    for name in names:
        value = os.environ.get(name)
        if value:
            return int(value)
    return default


def init_distributed() -> tuple[int, int]:
    """Join the gloo process group; returns (rank, world size). Single process: (0, 1)."""
    rank = _env_int("SLURM_PROCID", "RANK", default=0)
    world = _env_int("SLURM_NTASKS", "WORLD_SIZE", default=1)
    if world == 1:
        return 0, 1
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        job_id = os.environ.get("SLURM_JOB_ID", "")
        port = 20000 + int(job_id) % 20000 if job_id.isdigit() else 29500
        os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    return rank, world


def _straggle(extra_s: float, mode: str) -> None:
    """Spend ``extra_s`` more seconds: busy matrix products (``work``) or a sleep."""
    if mode == "sleep":
        time.sleep(extra_s)
        return
    deadline = time.perf_counter() + extra_s
    a = torch.ones(64, 64)
    while time.perf_counter() < deadline:
        a = torch.tanh(a @ a)


def _log(rank: int, text: str) -> None:
    if rank == 0:
        print(text, flush=True)


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    rank, world = init_distributed()
    if args.tensor_model_parallel_size != 1 or args.pipeline_model_parallel_size != 1:
        _log(rank, "error: only tensor/pipeline model parallel size 1 is supported")
        return 2
    if args.seq_length > args.max_position_embeddings:
        _log(rank, "error: --seq-length must not exceed --max-position-embeddings")
        return 2
    if args.hidden_size % args.num_attention_heads:
        _log(rank, "error: --hidden-size must be divisible by --num-attention-heads")
        return 2
    per_step = args.micro_batch_size * world
    if args.global_batch_size % per_step:
        _log(rank, f"error: --global-batch-size must be a multiple of micro-batch x dp {per_step}")
        return 2
    num_micro = args.global_batch_size // per_step

    _log(
        rank,
        f"using world size: {world}, data-parallel size: {world}, "
        "tensor-model-parallel size: 1, pipeline-model-parallel size: 1",
    )
    _log(rank, f"> gradient accumulation steps (micro-batches per iteration): {num_micro}")
    for line in run_events.argument_dump(args):
        _log(rank, line)
    torch.manual_seed(args.seed)
    data = synthetic_tokens(args.num_samples, args.seq_length, args.vocab_size, args.seed)
    model = TinyGPT(args)
    num_params = sum(p.numel() for p in model.parameters())
    _log(rank, "> building GPT model ...")
    _log(
        rank,
        f" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): {num_params}",
    )
    params = list(model.parameters())
    if world > 1:  # same seed on every rank already; make it explicit, as DDP does
        for p in params:
            dist.broadcast(p.data, src=0)
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(args.adam_beta1, args.adam_beta2),
    )
    flops = model_flops_per_iteration(args)
    first = 1
    consumed = 0
    resumed = run_events.load_checkpoint(args.load)
    if resumed is not None:
        model.load_state_dict(resumed["model"])
        optimizer.load_state_dict(resumed["optimizer"])
        first, consumed = int(resumed["iteration"]) + 1, int(resumed["consumed"])
        _log(
            rank,
            f" successfully loaded checkpoint from {args.load} [ t 1/1, p 1/1 ] at iteration "
            f"{first - 1}",
        )
    extra = max(args.global_batch_size * 4, 64)  # the same chain, sequences not trained on
    held_out = synthetic_tokens(
        args.num_samples + extra, args.seq_length, args.vocab_size, args.seed
    )[args.num_samples :]
    built = "[after model, optimizer, and learning rate scheduler are built]"
    _log(rank, f"{built} datetime: {_now()} ")
    _log(rank, "training ...")
    _log(rank, f"[before the start of training step] datetime: {_now()} ")

    loss_sum = 0.0
    iters_in_interval = 0
    compute_in_interval = 0.0
    interval_start = time.perf_counter()
    for iteration in range(first, args.train_iters + 1):
        lr = learning_rate(args, iteration)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        step_loss = torch.zeros(())
        t_compute = time.perf_counter()
        for micro in range(num_micro):
            # Megatron order: sample index = consumed + (micro * dp + rank) * micro-batch.
            start = (consumed + (micro * world + rank) * args.micro_batch_size) % args.num_samples
            idx = torch.arange(start, start + args.micro_batch_size) % args.num_samples
            batch = data[idx]
            loss = model(batch[:, :-1], batch[:, 1:]) / num_micro
            loss.backward()
            step_loss += loss.detach()
        compute_s = time.perf_counter() - t_compute
        if rank == args.slow_rank and iteration >= args.slow_from_iteration:
            _straggle(max(0.0, args.slow_factor - 1.0) * compute_s, args.slow_mode)
            compute_s = time.perf_counter() - t_compute
        if run_events.in_slow_phase(args, iteration):
            extra_s = max(0.0, args.slow_phase_factor - 1.0) * compute_s
            if args.slow_phase_mode == "stall":
                time.sleep(extra_s)  # waiting for data: outside the measured compute time
            else:
                _straggle(extra_s, args.slow_mode)
                compute_s = time.perf_counter() - t_compute
        compute_in_interval += compute_s
        if world > 1:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            flat /= world
            offset = 0
            for p in params:
                n = p.numel()
                p.grad = flat[offset : offset + n].view_as(p).clone()
                offset += n
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad))
        optimizer.step()
        if world > 1:
            dist.all_reduce(step_loss)
            step_loss /= world
        consumed += args.global_batch_size
        loss_sum += float(step_loss)
        iters_in_interval += 1
        if iteration % args.log_interval == 0 or iteration == args.train_iters:
            elapsed = time.perf_counter() - interval_start
            per_iter = elapsed / iters_in_interval
            line = f" [{_now()}] iteration {iteration:8d}/{args.train_iters:8d} |"
            line += f" consumed samples: {consumed:12d} |"
            line += f" elapsed time per iteration (ms): {per_iter * 1000.0:.1f} |"
            if args.log_throughput:
                tflops = flops / (per_iter * 1e12 * world)
                line += f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |"
            line += f" learning rate: {lr:.6E} |"
            line += f" global batch size: {args.global_batch_size:5d} |"
            line += f" lm loss: {loss_sum / iters_in_interval:.6E} |"
            line += " loss scale: 1.0 |"
            line += f" grad norm: {grad_norm:.3f} |"
            line += " number of skipped iterations:   0 |"
            line += " number of nan iterations:   0 |"
            _log(rank, line)
            if not args.no_rank_lines:
                rank_line = {
                    "event": "rank_step",
                    "iteration": iteration,
                    "rank": rank,
                    "world_size": world,
                    "compute_time_s": round(compute_in_interval / iters_in_interval, 6),
                    "step_time_s": round(per_iter, 6),
                    "num_iterations": iters_in_interval,
                    "node": node,
                    "time_s": round(time.time(), 3),
                }
                print(json.dumps(rank_line), flush=True)
            loss_sum = 0.0
            iters_in_interval = 0
            compute_in_interval = 0.0
            interval_start = time.perf_counter()
        paused = time.perf_counter()  # the timer stops around evaluation and checkpointing
        if args.eval_interval and iteration % args.eval_interval == 0:
            value = run_events.evaluate(model, held_out, args=args, rank=rank, world=world)
            for line in run_events.validation_lines(iteration, value):
                _log(rank, line)
        if args.save and args.save_interval and iteration % args.save_interval == 0:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
            saved = run_events.save_checkpoint(args.save, iteration, consumed, state, rank=rank)
            _log(rank, saved)
        interval_start += time.perf_counter() - paused
        if args.exit_interval and iteration % args.exit_interval == 0:
            _log(rank, f"exiting program at iteration {iteration}")
            break
    _log(rank, f"[after training is done] datetime: {_now()} ")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


def exit_now(code: int) -> None:
    """End the process with ``code`` once its output is flushed, skipping the interpreter's
    teardown: a gloo process group's C++ threads can still be joinable when the interpreter
    frees what holds them, and the process then aborts after training completed (seen once
    in about 100 runs of the torchtitan stand-in's 2 ranks, rank 1: ``terminate called
    without an active exception`` after ``Process group destroyed``; torchrun reported
    SIGABRT and Slurm a failed job)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
