"""A Hugging Face Trainer-style script for ``accelerate launch``: trains the causal LM whose
``config.json`` is in ``--model_name_or_path``, on CPU when the host has no GPU, and logs as the
Trainer does.

Written for the planner's dev stack (see README.md); the arguments carry the names of
``transformers.TrainingArguments`` (``--per_device_train_batch_size``,
``--gradient_accumulation_steps``, ``--max_steps``, ``--learning_rate``, ``--warmup_steps``,
``--logging_steps``, ``--max_grad_norm``, ``--seed``, ...) and of the ``run_clm`` example
(``--model_name_or_path``, ``--block_size``), so the job is read as an HF Trainer job is.

* **The model**: the shape of ``<model_name_or_path>/config.json`` (a Llama config:
  ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size``,
  ``vocab_size``), built as the dev stack's tiny GPT (``deploy/dev/tiny_gpt/train.py``,
  imported), whose MLP is GeLU where Llama's is SwiGLU. The directory holds no weights: they
  are initialised from ``--seed``.
* **Distribution**: ``accelerate.Accelerator`` over the processes ``accelerate launch`` starts
  (DDP; gloo on CPU); the data loader is sharded over them; gradients are accumulated over
  ``--gradient_accumulation_steps`` micro-batches. On a host without CUDA the run trains in
  fp32 whatever the accelerate config's ``mixed_precision`` says: bf16 autocast on a CPU without
  bf16 units is about ten times slower than fp32 (measured on the dev stack's host).
* **The schedule**: AdamW, a linear warm-up over ``--warmup_steps`` then a linear decay to 0 at
  ``--max_steps`` (the Trainer's ``linear`` scheduler); gradients clipped to
  ``--max_grad_norm``; ``--max_steps`` optimizer steps.
* **The log** (main process): the Trainer's ``***** Running training *****`` summary, a tqdm bar
  of the optimizer steps on stderr, and every ``--logging_steps`` steps the Trainer's log dict
  (``{'loss': 6.8012, 'grad_norm': 0.8123, 'learning_rate': 0.00096, 'epoch': 0.06}``, the loss
  the mean over the ranks and the steps since the last log) followed by the same values as one
  JSON line with the step and the wall clock::

      {"event": "step", "step": 4, "loss": 6.8012, "grad_norm": 0.8123,
       "learning_rate": 0.00096, "epoch": 0.06, "time_s": 1796000000.123}

  as a ``TrainerCallback`` that ships logs as JSON lines prints them: the planner reads that
  structured line (``adapters/logs/parsers.py``), not the Trainer's dict or bar.

The data are the tiny GPT's synthetic sequences (a fixed sparse Markov chain over the
vocabulary), so the loss falls from about ln(vocab) as a real run's does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)
NUM_SAMPLES = 2048


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The TrainingArguments / run_clm arguments this script takes (module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model_name_or_path", required=True)
    p.add_argument("--block_size", type=int, default=None, help="default: the model's context")
    p.add_argument("--per_device_train_batch_size", type=int, default=8)
    p.add_argument("--gradient_accumulation_steps", type=int, default=1)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--warmup_steps", type=int, default=0)
    p.add_argument("--max_steps", type=int, required=True)
    p.add_argument("--max_grad_norm", type=float, default=1.0)
    p.add_argument("--logging_steps", type=int, default=500)
    p.add_argument("--seed", type=int, default=42)
    return p.parse_args(argv)


def load_tiny_gpt() -> ModuleType:
    """The dev stack's tiny GPT (``deploy/dev/tiny_gpt/train.py``), loaded by path (this
    script's own name is ``train.py`` too): its model and synthetic data are what this trains."""
    path = Path(__file__).resolve().parents[2] / "tiny_gpt" / "train.py"
    spec = importlib.util.spec_from_file_location("tiny_gpt_train", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the tiny GPT from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    """transformers' ``get_linear_schedule_with_warmup`` factor."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        level=logging.INFO,
    )
    on_cpu = not torch.cuda.is_available()
    accelerator = Accelerator(
        cpu=on_cpu,
        mixed_precision="no" if on_cpu else None,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
    )
    main_process = accelerator.is_main_process
    if not main_process:
        logger.setLevel(logging.WARNING)
    logger.info(accelerator.state)
    config_path = Path(args.model_name_or_path) / "config.json"
    logger.info(f"loading configuration file {config_path}")
    config = json.loads(config_path.read_text())
    block = args.block_size or int(config["max_position_embeddings"])
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    tiny = load_tiny_gpt()
    shape = argparse.Namespace(
        hidden_size=config["hidden_size"],
        num_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"],
        ffn_hidden_size=config["intermediate_size"],
        vocab_size=config["vocab_size"],
        max_position_embeddings=block,
    )
    model = tiny.TinyGPT(shape)
    data = tiny.synthetic_tokens(NUM_SAMPLES, block, config["vocab_size"], args.seed)
    loader = DataLoader(
        TensorDataset(data),
        batch_size=args.per_device_train_batch_size,
        shuffle=True,
        drop_last=True,
    )
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.learning_rate,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        linear_schedule(args.warmup_steps, args.max_steps),
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    steps_per_epoch = max(1, len(loader) // args.gradient_accumulation_steps)
    total_batch = (
        args.per_device_train_batch_size
        * accelerator.num_processes
        * args.gradient_accumulation_steps
    )
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info("***** Running training *****")
    logger.info(f"  Num examples = {NUM_SAMPLES:,}")
    logger.info(f"  Num Epochs = {math.ceil(args.max_steps / steps_per_epoch):,}")
    logger.info(f"  Instantaneous batch size per device = {args.per_device_train_batch_size:,}")
    logger.info(
        f"  Total train batch size (w. parallel, distributed & accumulation) = {total_batch:,}"
    )
    logger.info(f"  Gradient Accumulation steps = {args.gradient_accumulation_steps}")
    logger.info(f"  Total optimization steps = {args.max_steps:,}")
    logger.info(f"  Number of trainable parameters = {params:,}")

    bar = tqdm(total=args.max_steps, disable=not accelerator.is_local_main_process)
    started = time.time()
    step, grad_norm = 0, 0.0
    loss_sum = torch.zeros(())
    last_logged = 0
    total_loss = 0.0
    while step < args.max_steps:
        for (batch,) in loader:
            with accelerator.accumulate(model):
                loss = model(batch[:, :-1], batch[:, 1:])
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    grad_norm = float(
                        accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    )
                optimizer.step()
                optimizer.zero_grad()
            loss_sum += loss.detach() / args.gradient_accumulation_steps
            if not accelerator.sync_gradients:
                continue
            scheduler.step()
            step += 1
            bar.update(1)
            if step % args.logging_steps == 0 or step == args.max_steps:
                mean = float(accelerator.reduce(loss_sum, reduction="mean")) / (step - last_logged)
                total_loss += mean * (step - last_logged)
                logs = {
                    "loss": round(mean, 4),
                    "grad_norm": round(grad_norm, 4),
                    "learning_rate": scheduler.get_last_lr()[0],
                    "epoch": round(step / steps_per_epoch, 2),
                }
                if main_process:
                    bar.write(str(logs))
                    line = {"event": "step", "step": step, **logs}
                    print(json.dumps({**line, "time_s": round(time.time(), 3)}), flush=True)
                loss_sum = torch.zeros(())
                last_logged = step
            if step >= args.max_steps:
                break
    bar.close()
    runtime = time.time() - started
    if main_process:
        summary = {
            "train_runtime": round(runtime, 4),
            "train_samples_per_second": round(step * total_batch / runtime, 3),
            "train_steps_per_second": round(step / runtime, 3),
            "train_loss": total_loss / max(1, step),
            "epoch": round(step / steps_per_epoch, 2),
        }
        print(summary, flush=True)
    accelerator.wait_for_everyone()
    accelerator.end_training()  # destroys the process group: gloo aborts at exit otherwise
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    load_tiny_gpt().exit_now(code)  # no interpreter teardown (its docstring)
