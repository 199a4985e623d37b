"""What happens in a real training run besides training steps, for ``train.py``: the argument dump
at start-up, evaluation, checkpoints (save and resume) and a slower phase, printed as Megatron-LM
prints them.

* **Arguments.** Rank 0 prints Megatron-LM's argument dump (``------------------------ arguments
  ------------------------`` then ``  eval_interval ........ 200`` lines), so a log carries its
  evaluation and checkpoint intervals as real Megatron-LM logs do.
* **Evaluation** (``--eval-interval N --eval-iters K``): after every iteration that is a multiple
  of ``N`` (Megatron-LM's rule), ``K`` forward passes over a global batch of held-out sequences on
  every rank, no gradients; the loss is averaged over the ranks and printed as Megatron-LM's
  ``validation loss at iteration`` box. The training timer is stopped around it, as Megatron-LM
  stops ``interval-time``: the printed step time leaves the pause out, the wall clock does not.
* **Checkpoints** (``--save DIR --save-interval N``): rank 0 writes the model, the optimizer and
  the iteration to ``DIR/iter_NNNNNNN.pt`` (``torch.save``, then fsync) and
  ``latest_checkpointed_iteration.txt``, after the evaluation of that iteration;
  ``--load DIR`` resumes from the latest one (the iteration counter resumes, as a requeued or
  continued Megatron-LM job does); ``--exit-interval N`` exits after iteration ``N`` (Megatron-LM's
  option), a way to stop a run that a later job continues.
* **A slower phase** (``--slow-phase-from-iteration A --slow-phase-to-iteration B
  --slow-phase-factor F``): every rank spends ``F`` times its measured compute time per
  iteration from ``A`` to ``B`` (a degraded node, another job on the host), unlike ``--slow-rank``
  which slows one rank; with ``--slow-phase-mode stall`` the extra time is a wait for data
  outside the compute time the ranks measure (a slow file system), so no rank looks slower than
  its peers or its own history.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

LATEST = "latest_checkpointed_iteration.txt"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of this module (Megatron-LM names where Megatron-LM has them)."""
    g = p.add_argument_group("evaluation, checkpoints and phases")
    g.add_argument("--eval-interval", type=int, default=0, help="evaluate every N iterations")
    g.add_argument("--eval-iters", type=int, default=100, help="forward passes per evaluation")
    g.add_argument("--save", default=None, help="checkpoint directory")
    g.add_argument("--save-interval", type=int, default=0, help="checkpoint every N iterations")
    g.add_argument("--load", default=None, help="resume from this checkpoint directory")
    g.add_argument("--exit-interval", type=int, default=0, help="exit after iteration N")
    g.add_argument("--slow-phase-from-iteration", type=int, default=0)
    g.add_argument("--slow-phase-to-iteration", type=int, default=0)
    g.add_argument("--slow-phase-factor", type=float, default=1.0)
    g.add_argument(
        "--slow-phase-mode",
        choices=("compute", "stall"),
        default="compute",
        help="slower compute on every rank, or a data stall outside the measured compute time",
    )


def argument_dump(args: argparse.Namespace) -> list[str]:
    """Megatron-LM's argument dump (``megatron/training/arguments.py:_print_args``)."""
    lines = ["------------------------ arguments ------------------------"]
    for name, value in sorted(vars(args).items()):
        dots = "." * (48 - len(name))
        lines.append(f"  {name} {dots} {value}")
    lines.append("-------------------- end of arguments ---------------------")
    return lines


def in_slow_phase(args: argparse.Namespace, iteration: int) -> bool:
    """True when ``iteration`` lies in the slower phase."""
    return (
        args.slow_phase_factor > 1.0
        and args.slow_phase_from_iteration <= iteration <= args.slow_phase_to_iteration
    )


def evaluate(
    model: torch.nn.Module,
    data: torch.Tensor,
    *,
    args: argparse.Namespace,
    rank: int,
    world: int,
) -> float:
    """Mean validation loss over ``--eval-iters`` forward passes of a global batch (module
    docstring); the same on every rank."""
    per_rank = args.global_batch_size // world
    total = torch.zeros(())
    model.eval()
    with torch.no_grad():
        for k in range(args.eval_iters):
            start = ((k * world + rank) * per_rank) % max(1, len(data) - per_rank)
            batch = data[start : start + per_rank]
            total += model(batch[:, :-1], batch[:, 1:])
    model.train()
    if world > 1:
        dist.all_reduce(total)
        total /= world
    return float(total) / max(1, args.eval_iters)


def validation_lines(iteration: int, loss: float) -> list[str]:
    """Megatron-LM's validation box (``evaluate_and_print_results``)."""
    text = (
        f" validation loss at iteration {iteration} | lm loss value: {loss:.6E} | "
        f"lm loss PPL: {math.exp(min(loss, 50.0)):.6E} | "
    )
    bar = "-" * (len(text) + 1)
    return [bar, text, bar]


def save_checkpoint(
    directory: str, iteration: int, consumed: int, state: dict[str, Any], *, rank: int
) -> str:
    """Write the checkpoint of ``iteration`` (rank 0; every rank waits) and return the line
    Megatron-LM prints."""
    if rank == 0:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        target = path / f"iter_{iteration:07d}.pt"
        with target.open("wb") as f:
            torch.save({**state, "iteration": iteration, "consumed": consumed}, f)
            f.flush()
            os.fsync(f.fileno())
        (path / LATEST).write_text(f"{iteration}\n")
    if dist.is_initialized():
        dist.barrier()
    return (
        f"  successfully saved checkpoint from iteration {iteration:7d} to {directory} "
        "[ t 1/1, p 1/1 ]"
    )


def load_checkpoint(directory: str | None) -> dict[str, Any] | None:
    """The latest checkpoint under ``directory`` (None: none there)."""
    if not directory:
        return None
    latest = Path(directory) / LATEST
    if not latest.is_file():
        return None
    iteration = int(latest.read_text().strip())
    with (Path(directory) / f"iter_{iteration:07d}.pt").open("rb") as f:
        loaded: dict[str, Any] = torch.load(f, weights_only=False)
    return loaded
