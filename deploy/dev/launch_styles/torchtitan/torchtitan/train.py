"""A CPU stand-in for ``python -m torchtitan.train``: reads a torchtitan job config the way
torchtitan does and trains a real tiny model on CPU, printing torchtitan's log lines.

Written for the planner's dev stack (see the README.md of the directory above); not torchtitan.
What it keeps of torchtitan (pytorch/torchtitan at 238fa99):

* **Configuration** (torchtitan/config/manager.py): the JobConfig defaults it uses, then the TOML
  file of ``--job.config_file``, then ``--section.key value`` / ``--section.key=value``
  overrides on the command line (a bare ``--section.key`` is true, ``--section.no-key``
  false).
* **The model**: ``[model] name`` + ``flavor`` looked up in the flavors below (torchtitan's
  TrainSpec model args; only llama3 ``debugmodel`` here), its FFN width by Llama 3's rule. The
  network is the dev stack's tiny GPT (``deploy/dev/tiny_gpt/train.py``, imported) at that shape:
  ``dim`` wide, ``n_layers`` deep, ``n_heads`` heads, ``vocab_size`` tokens, a GeLU MLP of the
  flavor's FFN width (torchtitan's Llama 3 has RMSNorm, RoPE and SwiGLU; the shape is what the
  planner reads).
* **Parallelism** (torchtitan/distributed/parallel_dims.py): the ranks torchrun starts;
  ``data_parallel_shard_degree = -1`` takes them all. torchtitan shards the model with FSDP2;
  over gloo on CPU this stand-in replicates it with DDP (the same batch per rank and the same
  gradients). Tensor, pipeline and context parallelism are refused.
* **The batch** (torchtitan/train.py): ``local_batch_size`` sequences of ``seq_len`` tokens per
  data-parallel rank and step; ``global_batch_size`` above local x DP is reached by gradient
  accumulation.
* **The schedule** (torchtitan/components/lr_scheduler.py): linear warm-up over
  ``warmup_steps``, then constant, then a linear decay over the last ``decay_ratio`` of the
  steps to ``min_lr_factor`` x lr; AdamW; gradients clipped to ``max_norm``.
* **The log** (torchtitan/tools/logging.py, components/metrics.py, train.py): Python logging
  as ``[titan] <asctime> - root - INFO - <message>`` on stdout, every rank (run_train.sh shows
  rank 0's only, torchrun's ``--local-ranks-filter``); the start-up lines,
  and at step 1 and every ``[metrics] log_freq`` steps ::

      step:  2  loss:  7.61234  grad_norm:  1.2345  memory:  0.43GiB(1.39%)  tps: 1,234
      tflops: 0.03  mfu: 0.01%

  (on one line, in colour unless ``[metrics] disable_color_printing``). ``loss`` is the mean
  over the ranks, ``tps`` the tokens per second per rank since the previous line, ``tflops`` and
  ``mfu`` from torchtitan's FLOPs per token (6 x non-embedding parameters + 6 x layers x heads x
  2 x head dim x sequence length) against the A100 peak torchtitan assumes for a device it does
  not know; ``memory`` is the process's peak resident memory against the host's (torchtitan
  prints the GPU's).

The data are the tiny GPT's synthetic sequences (a fixed sparse Markov chain), so the loss falls
from about ln(vocab) as a real run's does.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import logging
import os
import resource
import sys
import time
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from torchtitan import __version__

logger = logging.getLogger()

# The JobConfig defaults this stand-in reads (torchtitan/config/job_config.py@238fa99).
DEFAULTS: dict[str, dict[str, Any]] = {
    "job": {"config_file": None, "description": "default job"},
    "metrics": {"log_freq": 10, "disable_color_printing": False},
    "model": {"name": "llama3", "flavor": "debugmodel"},
    "optimizer": {"name": "AdamW", "lr": 8e-4, "eps": 1e-8, "weight_decay": 0.1},
    "lr_scheduler": {
        "warmup_steps": 200,
        "decay_ratio": None,
        "decay_type": "linear",
        "min_lr_factor": 0.0,
    },
    "training": {
        "local_batch_size": 8,
        "global_batch_size": -1,
        "seq_len": 2048,
        "max_norm": 1.0,
        "steps": 10000,
        "seed": None,
    },
    "parallelism": {
        "data_parallel_replicate_degree": 1,
        "data_parallel_shard_degree": -1,
        "tensor_parallel_degree": 1,
        "pipeline_parallel_degree": 1,
        "context_parallel_degree": 1,
    },
}

# torchtitan's model flavors this stand-in knows (torchtitan/models/llama3/__init__.py@238fa99),
# and the Llama 3 model-args defaults they leave (torchtitan/models/llama3/model/args.py).
FLAVORS: dict[str, dict[str, dict[str, Any]]] = {
    "llama3": {"debugmodel": {"dim": 256, "n_layers": 6, "n_heads": 16, "vocab_size": 2048}},
}
LLAMA3_ARGS = {"multiple_of": 256, "ffn_dim_multiplier": None}
A100_PEAK_FLOPS = 312e12  # torchtitan/tools/utils.py get_peak_flops: unknown devices
NUM_SAMPLES = 4096


class Color:
    """torchtitan/tools/utils.py's colours."""

    red = "\033[31m"
    green = "\033[32m"
    blue = "\033[34m"
    magenta = "\033[35m"
    cyan = "\033[36m"
    reset = "\033[39m"
    orange = "\033[38;2;180;60;0m"
    turquoise = "\033[38;2;54;234;195m"


class NoColor:
    red = green = blue = magenta = cyan = reset = orange = turquoise = ""


def init_logger() -> None:
    """torchtitan/tools/logging.py: INFO records to stdout with the ``[titan]`` format."""
    logger.setLevel(logging.INFO)
    logger.handlers.clear()
    handler = logging.StreamHandler(sys.stdout)
    handler.setLevel(logging.INFO)
    fmt = "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s"
    handler.setFormatter(logging.Formatter(fmt))
    logger.addHandler(handler)


def _scalar(raw: str) -> Any:
    """A command-line value as TOML would read it (int, float, bool, else the string)."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def parse_overrides(argv: list[str]) -> dict[tuple[str, str], Any]:
    """``--section.key value``, ``--section.key=value``, ``--section.key`` (true) and
    ``--section.no-key`` / ``--section.no_key`` (false), ``-`` and ``_`` alike."""
    found: dict[tuple[str, str], Any] = {}
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if not arg.startswith("--") or "." not in arg:
            raise SystemExit(f"unrecognized argument: {arg}")
        flag, sep, raw = arg[2:].partition("=")
        section, _, key = flag.replace("-", "_").partition(".")
        if sep:
            found[section, key] = _scalar(raw)
        elif index < len(argv) and not argv[index].startswith("--"):
            found[section, key] = _scalar(argv[index])
            index += 1
        elif key.startswith("no_"):
            found[section, key[3:]] = False
        else:
            found[section, key] = True
    return found


def job_config(argv: list[str]) -> dict[str, dict[str, Any]]:
    """The defaults, then the TOML file, then the command line (module docstring)."""
    overrides = parse_overrides(argv)
    config = {section: dict(values) for section, values in DEFAULTS.items()}
    path = overrides.get(("job", "config_file"))
    if path:
        with open(path, "rb") as f:
            for section, values in tomllib.load(f).items():
                if isinstance(values, dict):
                    config.setdefault(section, {}).update(values)
    for (section, key), value in overrides.items():
        config.setdefault(section, {})[key] = value
    return config


def llama3_ffn(dim: int, multiple_of: int, multiplier: float | None) -> int:
    """Llama 3's FFN width (torchtitan/models/llama3/model/model.py FeedForward)."""
    hidden = int(2 * 4 * dim / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def load_tiny_gpt() -> ModuleType:
    """The dev stack's tiny GPT (``deploy/dev/tiny_gpt/train.py``), loaded by path: its model and
    synthetic data are what this stand-in trains."""
    path = Path(__file__).resolve().parents[3] / "tiny_gpt" / "train.py"
    spec = importlib.util.spec_from_file_location("tiny_gpt_train", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the tiny GPT from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lr_factor(step: int, steps: int, scheduler: dict[str, Any]) -> float:
    """torchtitan's warm-up, stable and decay schedule (components/lr_scheduler.py)."""
    warmup = int(scheduler["warmup_steps"])
    ratio = scheduler["decay_ratio"]
    decay = steps - warmup if ratio is None else round(steps * float(ratio))
    stable_end = steps - decay
    min_factor = float(scheduler["min_lr_factor"])
    if step < warmup:
        return (step + 1) / (warmup + 1)
    if step < stable_end or decay <= 0:
        return 1.0
    progress = (step - stable_end) / decay
    return 1.0 - (1.0 - min_factor) * progress


def peak_memory() -> tuple[float, float]:
    """The process's peak resident memory (GiB) and its share of the host's memory (%)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return peak / 2**30, 100.0 * peak / total


def init_distributed() -> tuple[int, int]:
    """Join torchrun's process group over gloo; returns (rank, world size)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    dist.init_process_group("gloo")
    return dist.get_rank(), world


def main(argv: list[str]) -> int:
    init_logger()
    rank, world = init_distributed()
    logger.info(
        "torchtitan version: %s (0.0.0 means __version__ is not defined correctly).", __version__
    )
    config = job_config(argv)
    logger.info(f"Starting job: {config['job']['description']}")
    par, training = config["parallelism"], config["training"]
    for key in ("tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree"):
        if int(par[key]) != 1:
            raise SystemExit(f"parallelism.{key} {par[key]}: this CPU stand-in runs only 1")
    replicate = int(par["data_parallel_replicate_degree"])
    shard = int(par["data_parallel_shard_degree"])
    shard = world // replicate if shard == -1 else shard
    dp = replicate * shard
    if dp != world:
        raise SystemExit(f"replicate {replicate} x shard {shard} != world size {world}")
    logger.info(f"Building 1-D device mesh with ['dp_shard'], [{shard}]")

    name, flavor = config["model"]["name"], config["model"]["flavor"]
    try:
        model_args = {**LLAMA3_ARGS, **FLAVORS[name][flavor]}
    except KeyError:
        raise SystemExit(f"model {name} {flavor}: not a flavor of this stand-in") from None
    seq_len, local_batch = int(training["seq_len"]), int(training["local_batch_size"])
    ffn = llama3_ffn(model_args["dim"], model_args["multiple_of"], model_args["ffn_dim_multiplier"])
    tiny = load_tiny_gpt()
    shape = argparse.Namespace(
        hidden_size=model_args["dim"],
        num_layers=model_args["n_layers"],
        num_attention_heads=model_args["n_heads"],
        ffn_hidden_size=ffn,
        vocab_size=model_args["vocab_size"],
        max_position_embeddings=seq_len,
    )
    logger.info(f"Building {name} {flavor} with {model_args} (FFN width {ffn})")
    seed = training["seed"] if training["seed"] is not None else 0
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = tiny.TinyGPT(shape)
    params = sum(p.numel() for p in model.parameters())
    embedding = sum(
        p.numel()
        for m in model.modules()
        if isinstance(m, torch.nn.Embedding)
        for p in m.parameters()
    )
    head_dims = 2 * (model_args["dim"] // model_args["n_heads"])
    flops_per_token = (
        6 * (params - embedding)
        + 6 * model_args["n_layers"] * model_args["n_heads"] * head_dims * seq_len
    )
    color = NoColor() if config["metrics"]["disable_color_printing"] else Color()
    logger.info(
        f"{color.blue}Model {name} {flavor} {color.red}size: {params:,} total parameters"
        f"{color.reset}"
    )
    logger.info(f"Peak FLOPS used for computing MFU: {A100_PEAK_FLOPS:.3e}")
    if world > 1:
        model = DistributedDataParallel(model)

    wanted = int(training["global_batch_size"])
    global_batch = local_batch * dp if wanted <= 0 else wanted
    if global_batch % (local_batch * dp):
        raise SystemExit(f"global batch {global_batch} is not a multiple of local x DP")
    accumulation = global_batch // (local_batch * dp)
    opt = config["optimizer"]
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=float(opt["lr"]),
        eps=float(opt["eps"]),
        weight_decay=float(opt["weight_decay"]),
    )
    steps = int(training["steps"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, steps, config["lr_scheduler"])
    )
    logger.info(
        "Trainer is initialized with "
        f"local batch size {local_batch}, "
        f"global batch size {global_batch}, "
        f"gradient accumulation steps {accumulation}, "
        f"sequence length {seq_len}, "
        f"total steps {steps} "
        f"(warmup {config['lr_scheduler']['warmup_steps']})"
    )
    data = tiny.synthetic_tokens(NUM_SAMPLES, seq_len, model_args["vocab_size"], seed)
    log_freq = int(config["metrics"]["log_freq"])

    logger.info("Training starts at step 1")
    ntokens = 0
    time_last_log = time.perf_counter()
    for step in range(1, steps + 1):
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros(())
        for micro in range(accumulation):
            first = (((step - 1) * accumulation + micro) * dp + rank) * local_batch
            batch = data[torch.arange(first, first + local_batch) % NUM_SAMPLES]
            # DDP all-reduces the gradients after the last micro-batch only
            last = micro == accumulation - 1
            sync = contextlib.nullcontext() if world == 1 or last else model.no_sync()
            with sync:
                loss = model(batch[:, :-1], batch[:, 1:]) / accumulation
                loss.backward()
            loss_sum += loss.detach()
            ntokens += local_batch * seq_len
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), training["max_norm"]))
        optimizer.step()
        scheduler.step()
        if step != 1 and step % log_freq:
            continue
        avg, peak = loss_sum.clone(), loss_sum.clone()
        if world > 1:
            dist.all_reduce(avg)
            dist.all_reduce(peak, op=dist.ReduceOp.MAX)
            avg /= world
        delta = time.perf_counter() - time_last_log
        tps = ntokens / delta
        tflops = flops_per_token * tps / 1e12
        mfu = 100 * flops_per_token * tps / A100_PEAK_FLOPS
        gib, pct = peak_memory()
        logger.info(
            f"{color.red}step: {step:2}  "
            f"{color.green}loss: {float(avg):8.5f}  "
            f"{color.orange}grad_norm: {grad_norm:7.4f}  "
            f"{color.turquoise}memory: {gib:5.2f}GiB({pct:.2f}%)  "
            f"{color.blue}tps: {round(tps):,}  "
            f"{color.cyan}tflops: {tflops:,.2f}  "
            f"{color.magenta}mfu: {mfu:.2f}%{color.reset}"
        )
        ntokens = 0
        time_last_log = time.perf_counter()
    logger.info("Training completed")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
        logger.info("Process group destroyed")
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    load_tiny_gpt().exit_now(code)  # no interpreter teardown (its docstring)
