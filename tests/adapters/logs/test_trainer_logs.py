"""Progress from the logs of Hugging Face Trainer, torchtune and current torchtitan jobs.

The lines are written for the project in the shape each framework prints (the sources are named
in ``adapters/logs/parsers.py``): the Trainer's ``***** Running training *****`` summary and its
description-less tqdm bars (training and evaluation), torchtune's ``epoch|step|Loss`` bar, and
torchtitan's ``Trainer is initialized ... total steps T`` line followed by a start line without
a total.
"""

from __future__ import annotations

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


def _trainer_log(*, summary: bool, prefix: str = "") -> str:
    refreshes = [
        _bar(0, 1500, "?it/s", prefix),
        _bar(1, 1500, "2.50s/it", prefix),
        _bar(2, 1500, "2.20s/it", prefix),
        # an evaluation (its bar counts the 25 evaluation batches), then training goes on
        _bar(0, 25, "?it/s", prefix),
        _bar(10, 25, "9.80it/s", prefix),
        _bar(25, 25, "9.90it/s", prefix),
    ]
    lines = [*SUMMARY] if summary else []
    lines.append("\r".join(refreshes))
    lines.append("{'eval_loss': 2.31, 'eval_runtime': 2.6, 'epoch': 0.01}")
    lines.append("\r".join([_bar(3, 1500, "2.00s/it", prefix), _bar(4, 1500, "1.25it/s", prefix)]))
    lines.append("{'loss': 2.2104, 'grad_norm': 1.03, 'learning_rate': 4.9e-05, 'epoch': 0.01}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("summary", [True, False])
@pytest.mark.parametrize("prefix", ["", "0: ", "[default0]:"])
def test_trainer_training_bar_is_followed_and_evaluation_bars_are_not(
    summary: bool, prefix: str
) -> None:
    reading = read_log(_trainer_log(summary=summary, prefix=prefix), tz=UTC)
    assert reading.framework == "transformers"
    assert [r.iteration for r in reading.records] == [0, 1, 2, 3, 4]
    assert reading.records[0].step_time_s is None  # the bar's start: no rate yet
    assert [r.step_time_s for r in reading.records[1:]] == pytest.approx([2.5, 2.2, 2.0, 0.8])
    assert reading.train_iters == 1500


def test_an_evaluation_before_training_is_not_taken_for_training() -> None:
    """A script that evaluates before it trains prints the evaluation summary and bar first."""
    text = "\n".join(
        [
            "[INFO|trainer.py:4200] 2025-03-10 08:59:00,000 >> ***** Running Evaluation *****",
            "[INFO|trainer.py:4202] 2025-03-10 08:59:00,000 >>   Num examples = 200",
            "\r".join([_bar(0, 25, "?it/s"), _bar(25, 25, "9.90it/s")]),
            *SUMMARY,
            "\r".join([_bar(1, 1500, "2.50s/it"), _bar(2, 1500, "2.40s/it")]),
        ]
    )
    reading = read_log(text + "\n", tz=UTC)
    assert [r.iteration for r in reading.records] == [1, 2]
    assert reading.train_iters == 1500


def test_description_less_bar_without_context_is_not_taken_for_training() -> None:
    assert parse_line(_bar(10, 25, "9.80it/s"), tz=UTC) is None


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
    assert [(r.iteration, r.loss) for r in reading.records] == [
        (1, pytest.approx(1.7654)),
        (2, pytest.approx(1.7012)),
        (251, pytest.approx(1.1020)),
    ]
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


def test_trainer_lines_never_raise_on_garbage() -> None:
    context = LogContext()
    for line in (
        "  Total optimization steps = 99999999999999999999",
        "  Total optimization steps = 0",
        " 50%|#####     | 5/10 [00:01<00:01, 1e400it/s]",
        "1|99999999999999999999|Loss: nan:  50%|#  | 5/10 [00:01<00:01, 1.0it/s]",
    ):
        parse_line(line, tz=UTC, context=context)
