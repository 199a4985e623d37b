"""Progress from the logs of torchtune and current torchtitan jobs, and what a Trainer bar is not.

The lines are written for the project in the shape each framework prints (the sources are named
in ``adapters/logs/parsers.py``): torchtune's ``epoch|step|Loss`` bar, torchtitan's ``Trainer is
initialized ... total steps T`` line followed by a start line without a total, and a Trainer's
description-less tqdm bar beside structured step lines (not read: the bar's smoothed rate is not
the job's own measurement).
"""

from __future__ import annotations

import json
from datetime import UTC

import pytest

from adapters.logs.context import LogContext
from adapters.logs.parsers import parse_line
from adapters.logs.reading import read_log

SUMMARY = [
    "[INFO|trainer.py:2369] 2025-03-10 09:00:01,100 >> ***** Running training *****",
    "[INFO|trainer.py:2370] 2025-03-10 09:00:01,100 >>   Num examples = 48,000",
    "[INFO|trainer.py:2376] 2025-03-10 09:00:01,100 >>   Gradient Accumulation steps = 2",
    "[INFO|trainer.py:2377] 2025-03-10 09:00:01,101 >>   Total optimization steps = 1,500",
]


def _bar(n: int, total: int, rate: str, prefix: str = "") -> str:
    pct = 100 * n // total
    return f"{prefix}{pct:3d}%|##        | {n}/{total} [00:10<01:30, {rate}]"


def test_a_trainer_bar_beside_structured_step_lines_is_not_read() -> None:
    """A Trainer script that ships its logs as JSON step lines still shows the Trainer's tqdm
    bar: only the JSON lines (with the job's own time stamps) are progress, never the bar's
    smoothed rate, whatever the summary says."""
    lines = [*SUMMARY]
    for step in range(1, 7):
        lines.append(_bar(step, 1500, "2.50s/it"))
        if step % 2 == 0:
            lines.append(json.dumps({"event": "step", "step": step, "time_s": 1.7e9 + step}))
    reading = read_log("\n".join(lines) + "\n", tz=UTC)
    assert reading.framework == "json"
    assert [r.iteration for r in reading.records] == [2, 4, 6]


def test_torchtune_bar_gives_the_global_step_across_epochs() -> None:
    text = "\n".join(
        [
            "INFO:torchtune.utils._logging:Model is initialized with precision torch.bfloat16.",
            "\r".join(
                [
                    "1|1|Loss: 1.7654:   0%|          | 1/250 [00:03<12:30,  3.01s/it]",
                    "1|2|Loss: 1.7012:   1%|          | 2/250 [00:05<11:40,  2.80s/it]",
                ]
            ),
            "2|251|Loss: 1.1020:   0%|          | 1/250 [00:03<12:00,  2.90s/it]",
        ]
    )
    reading = read_log(text + "\n", tz=UTC)
    assert reading.framework == "torchtune"
    assert [r.iteration for r in reading.records] == [1, 2, 251]
    assert [r.loss for r in reading.records] == pytest.approx([1.7654, 1.7012, 1.1020])
    assert [r.step_time_s for r in reading.records] == pytest.approx([3.01, 2.80, 2.90])


def test_torchtitan_total_from_the_trainer_initialized_line() -> None:
    head = "[rank0]:[titan] 2025-11-20 10:00:00,000 - root - INFO - "
    text = "\n".join(
        [
            head + "Trainer is initialized with local batch size 8, global batch size 64, "
            "gradient accumulation steps 1, sequence length 2048, total steps 3000 (warmup 200)",
            head + "Training starts at step 1",
            head + "step:  1  loss:  8.0277  grad_norm:  1.4604  memory:  1.21GiB(0.86%)  "
            "tps: 5,756  tflops: 0.41  mfu: 0.04%",
            head.replace("00,000", "02,500") + "step:  2  loss:  7.9011  grad_norm:  1.3  "
            "memory:  1.21GiB(0.86%)  tps: 6,100  tflops: 0.44  mfu: 0.05%",
        ]
    )
    reading = read_log(text + "\n", tz=UTC)
    assert reading.framework == "torchtitan"
    assert [r.iteration for r in reading.records] == [0, 1, 2]
    assert reading.train_iters == 3000
    assert all(r.train_iters == 3000 for r in reading.records)


def test_bar_lines_never_raise_on_garbage() -> None:
    context = LogContext()
    for line in (
        "  Total optimization steps = 99999999999999999999",
        " 50%|#####     | 5/10 [00:01<00:01, 1e400it/s]",
        "1|99999999999999999999|Loss: nan:  50%|#  | 5/10 [00:01<00:01, 1.0it/s]",
        "[INFO|trainer.py:1] 2025-03-10 09:00:00,000 >> Trainer is initialized with total steps x",
    ):
        parse_line(line, tz=UTC, context=context)
