"""DeepSpeed's engine progress line and DeepSpeed-Chat's RLHF step lines; used by
``adapters.logs.parsers.parse_line``.

* **DeepSpeed engine** (framework ``deepspeed``): every ``steps_per_print`` optimizer steps the
  engine's ``_report_progress`` (``deepspeed/runtime/engine.py``) logs, through Python logging,
  ``[2022-10-28 23:48:58,641] [INFO] [logging.py:68:log_dist] [Rank 0] step=10, skipped=0,
  lr=[...], mom=[...]``: ``step`` counts the optimizer steps done (skipped fp16-overflow steps
  included, as Megatron-LM's iteration does), so the record is ``iteration`` = step with the
  line's time and nothing else. Under a context, once another format has given progress (the
  Megatron-LM lines of Megatron-DeepSpeed, DeepSpeed-Chat's steps), these lines give None and
  lend their time to the next record of the same iteration, which the other format prints just
  after (e.g. Megatron-DeepSpeed's ``iteration 10/...`` line follows ``step=10``); a second
  engine's line for the same step (DeepSpeed-Chat's actor and critic) gives None.
* **DeepSpeed-Chat step 3** (framework ``deepspeed-chat``; DeepSpeedExamples
  ``applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py``, 2023):
  ``Beginning of Epoch 1/1, Total Generation Batches 477`` sets the total (epochs x batches);
  ``epoch: 0|step: 9|ppo_ep: 1|act_loss: ...|cri_loss: ...|unsuper_loss: ...`` ends step 9 (0-based)
  of its epoch, so ``iteration`` = epoch x batches + step + 1 (one RLHF step: a generation
  batch and its PPO training; one optimizer step per engine with the example's
  ``--ppo_epochs 1 --generation_batches 1``, as the engine's ``step=10`` line before step 9
  confirms); ``loss`` is ``act_loss``. The next ``|E2E latency=3.79s |Gather latency=... |``
  line is that step's wall time (generation and training; over ten steps it adds up to the
  engine's timestamps to within 0.02 s in the recorded log). Under a context the step line is
  held until its E2E line (the record then has ``step_time_s``); a step line whose E2E line
  never comes is given on the next step line, or by ``LogContext.finish`` at the end of the log
  (the log's last step has none). Without a context the step line gives its record at once
  (epoch 0 only, no total) and the E2E line gives None.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import tzinfo
from typing import Final

from adapters.logs import values
from adapters.logs.context import LogContext
from planner.specs.job import ProgressRecord

_ENGINE: Final = re.compile(r"\[Rank 0\] step=(?P<step>\d+), skipped=\d+, lr=")
_EPOCH: Final = re.compile(
    r"\bBeginning of Epoch (?P<epoch>\d+)/(?P<epochs>\d+), Total Generation Batches (?P<n>\d+)"
)
_STEP: Final = re.compile(
    rf"^epoch:\s*(?P<epoch>\d+)\|step:\s*(?P<step>\d+)\|ppo_ep:\s*\d+\|"
    rf"act_loss:\s*(?P<loss>{values.NUMBER})\|"
)
_E2E: Final = re.compile(rf"^\|E2E latency=(?P<s>{values.NUMBER})s\s*\|")


def parse_deepspeed(
    text: str, tz: tzinfo | None, context: LogContext | None
) -> ProgressRecord | None:
    """The record of one DeepSpeed engine or DeepSpeed-Chat line, or None (see module doc).

    Raises ``values.InvalidLineError`` (or ValueError) for absurd values.
    """
    engine = _ENGINE.search(text)
    if engine is not None:
        return ProgressRecord(
            iteration=values.iteration(float(engine["step"])),
            timestamp_s=values.timestamp(text[: engine.start()], tz),
            framework="deepspeed",
        )
    if context is not None:
        epoch = _EPOCH.search(text)
        if epoch is not None:
            epochs, batches = int(epoch["epochs"]), int(epoch["n"])
            if 0 < epochs < values.MAX_ITERATION and 0 < batches < values.MAX_ITERATION:
                context.dschat_epochs, context.dschat_batches_per_epoch = epochs, batches
            return None
        e2e = _E2E.search(text)
        if e2e is not None:
            pending = context.dschat_pending
            if pending is None:
                return None
            step_s = values.step_time(values.number(e2e["s"]))  # absurd: the step stays held
            context.dschat_pending = None
            return dataclasses.replace(pending, step_time_s=step_s)
    step = _STEP.search(text)
    if step is None:
        return None
    record = _step_record(int(step["epoch"]), int(step["step"]), step["loss"], context)
    if context is None or record is None:
        return record
    held, context.dschat_pending = context.dschat_pending, record
    return held


def _step_record(
    epoch: int, step: int, loss: str, context: LogContext | None
) -> ProgressRecord | None:
    batches = context.dschat_batches_per_epoch if context is not None else None
    epochs = context.dschat_epochs if context is not None else None
    if batches is None and epoch > 0:
        return None
    iteration = values.iteration(float(epoch * (batches or 0) + step + 1))
    total = epochs * batches if epochs is not None and batches is not None else None
    return ProgressRecord(
        iteration=iteration,
        train_iters=total if total is not None and total >= iteration else None,
        loss=values.finite(values.number(loss)),
        framework="deepspeed-chat",
    )
