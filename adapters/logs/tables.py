"""Megatron-LM's CI golden-value tables: sampled per-iteration times of real release runs.

Source: NVIDIA/Megatron-LM ``tests/functional_tests/test_cases/<model>/<test>/golden_values_*.json``
(written by its functional-test harness from the run's TensorBoard scalars). Shape::

    {"<metric>": {"start_step": 1, "end_step": 47680, "step_interval": 5,
                  "values": {"1": 13.89, "5": 13.89, ...}}, ...}

with metrics such as ``lm loss``, ``num-zeros``, ``mem-allocated-bytes`` and ``iteration-time``
(seconds per iteration: Megatron-LM's ``elapsed time per iteration`` averaged over its
``--log-interval``, so it leaves out evaluation and checkpointing). A value may be the string
``"nan"`` where the run logged nothing at that step. The table has no timestamps: a restart
shows only as a long iteration.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from planner.errors import SpecError
from planner.specs.job import ProgressRecord

ITERATION_TIME: Final = "iteration-time"
_LOSS: Final = "lm loss"
_MAX_STEP: Final = 10**12
_MAX_STEP_TIME_S: Final = 1.0e6


def read_iteration_table(text: str) -> list[ProgressRecord]:
    """The ``iteration-time`` samples of a Megatron-LM CI golden table, in step order.

    One record per sampled step whose value is a number (``"nan"`` samples and zeros are
    skipped): ``iteration`` the step, ``step_time_s`` the value (s), ``num_iterations`` the steps
    since the previous kept sample (``start_step - 1`` before the first; the ``step_interval``
    when nothing is skipped), so that ``step_time_s * num_iterations`` summed over the records is
    the table's estimate of the run's training time; ``train_iters`` the table's ``end_step``;
    ``loss`` the ``lm loss`` sample of the same step when the table has one; no timestamps;
    framework ``megatron-ci``.

    Raises ``SpecError`` naming the field (``table``, ``iteration-time``,
    ``iteration-time.end_step``, ``iteration-time.values.<step>``, ...) when the text is not
    JSON, has no ``iteration-time`` metric, or a field is missing, of the wrong type or absurd
    (a negative or infinite time, a step outside ``start_step``..``end_step``), or when no sample
    is a number.
    """
    try:
        table = json.loads(text)
    except ValueError as exc:
        where = getattr(exc, "lineno", None)
        at = f" (line {where}, column {getattr(exc, 'colno', '?')})" if where else ""
        raise SpecError("table", f"is not valid JSON{at}: {exc}") from exc
    except RecursionError as exc:
        raise SpecError("table", "is nested too deeply to be a golden-value table") from exc
    if not isinstance(table, dict):
        raise SpecError("table", "must be a JSON object of metrics ({metric: {values: ...}})")
    if ITERATION_TIME not in table:
        found = ", ".join(_short(k) for k in sorted(table)[:8]) or "none"
        raise SpecError(
            ITERATION_TIME,
            f"missing: the table has no per-iteration times (metrics found: {found}); "
            "give a golden-value file of a test whose METRICS include iteration-time",
        )
    metric = _metric(table[ITERATION_TIME], ITERATION_TIME)
    start, end, samples = metric
    losses = _losses(table.get(_LOSS))
    records: list[ProgressRecord] = []
    previous = start - 1
    for step, value in samples:
        if value is None or value == 0.0:
            continue
        if value < 0 or value > _MAX_STEP_TIME_S:
            raise SpecError(
                f"{ITERATION_TIME}.values.{step}",
                f"must be a time per iteration in seconds in (0, 1e6], got {value}",
            )
        records.append(
            ProgressRecord(
                iteration=step,
                train_iters=end,
                step_time_s=value,
                num_iterations=step - previous,
                loss=losses.get(step),
                framework="megatron-ci",
            )
        )
        previous = step
    if not records:
        raise SpecError(f"{ITERATION_TIME}.values", 'has no number: every sample is "nan" or 0')
    return records


def _metric(entry: object, name: str) -> tuple[int, int, list[tuple[int, float | None]]]:
    """(start_step, end_step, [(step, value or None for nan)] sorted by step) of one metric."""
    if not isinstance(entry, dict):
        raise SpecError(name, "must be an object with start_step, end_step, step_interval, values")
    start = _step(entry.get("start_step"), f"{name}.start_step")
    end = _step(entry.get("end_step"), f"{name}.end_step")
    _step(entry.get("step_interval"), f"{name}.step_interval")
    if end < start:
        raise SpecError(f"{name}.end_step", f"must be at least start_step ({start}), got {end}")
    raw = entry.get("values")
    if not isinstance(raw, dict):
        raise SpecError(f"{name}.values", 'must be an object {step: number or "nan"}')
    samples: list[tuple[int, float | None]] = []
    for key, value in raw.items():
        field = f"{name}.values.{key}"
        step = _step(_int_key(key, field), field)
        if not start <= step <= end:
            raise SpecError(field, f"step must be within start_step..end_step ({start}..{end})")
        samples.append((step, _value(value, field)))
    samples.sort(key=lambda sample: sample[0])
    return start, end, samples


def _losses(entry: object) -> dict[int, float]:
    """The ``lm loss`` samples by step, or {} when the table has none or they are malformed."""
    try:
        _, _, samples = _metric(entry, _LOSS)
    except SpecError:
        return {}
    return {step: value for step, value in samples if value is not None}


def _int_key(key: str, field: str) -> int:
    if not (key.isascii() and key.isdigit()) or len(key) > 15:
        raise SpecError(field, "step must be a whole number")
    return int(key)


def _step(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < _MAX_STEP:
        raise SpecError(field, f"must be a whole number of steps >= 1, got {_short(value)}")
    return value


def _value(value: Any, field: str) -> float | None:
    """A sample: a finite number, or None for ``"nan"`` (JSON string or NaN literal)."""
    if isinstance(value, str) and value.strip().lower() == "nan":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(field, f'must be a number or "nan", got {_short(value)}')
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range (JSON allows any length)
        number = math.inf
    if math.isnan(number):
        return None
    if not math.isfinite(number):
        raise SpecError(field, f"must be finite, got {_short(value)}")
    return number


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
