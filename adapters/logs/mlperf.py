"""MLPerf Training result logs: the ``:::MLLOG {json}`` events of every round since v1.0; used by
``adapters.logs.parsers.parse_line``.

Each event is one JSON object: ``{"namespace": "", "time_ms": <epoch ms>, "event_type":
"POINT_IN_TIME" | "INTERVAL_START" | "INTERVAL_END", "key": ..., "value": ..., "metadata":
{...}}``, any prefix before ``:::MLLOG`` (``srun -l`` labels) ignored. The keys and metadata are
those of ``mlperf_logging/mllog/constants.py`` and of the compliance checker's rules per round
(``mlperf_logging/compliance_checker/training_<round>/common.yaml``, ``closed_*.yaml``) in
``mlcommons/logging`` @ 7bbf7926; the units per benchmark are those its
``mlperf_logging/rcp_checker/rcp_checker.py`` and ``rcp_checker/training_<round>/rcps_*.json``
read convergence in. The shapes below were read from submitted result logs
(``<submitter>/results/<system>/<benchmark>/result_*.txt``) of ``mlcommons/training_results_v1.0``
@ 50619b5d, ``_v2.1`` @ 158189d4, ``_v3.0`` @ 9f08e30c, ``_v3.1`` @ f33f9444, ``_v4.0`` @
6fe95437, ``_v4.1`` @ b87b9e39, ``_v5.0`` @ 0fdc28f0 and ``_v5.1`` @ 441d65f4.

**Positions.** A run says how far training got in samples, tokens or epochs, never in optimizer
steps; an event's position is the first of its metadata:

* ``samples_count``: samples (v4.0 on: the LLM benchmarks, Stable Diffusion, Flux);
* ``step_num``: optimizer steps (Stable Diffusion's ``tracked_stats``);
* ``epoch_num``, or for a ``tracked_stats`` its ``step`` (or its value's ``epoch_num``): the
  benchmark's count: tokens for ``gpt3`` (``global_batch_size`` x ``max_sequence_length`` per
  step: 4,194,304 = 2,048 x 2,048 in the v3.0 log), samples for ``bert`` and the benchmarks of
  ``_SAMPLE_BENCHMARKS``, epochs for those of ``_EPOCH_BENCHMARKS`` (vision, speech,
  recommendation, graph; fractions of an epoch for DLRM and GNN), except that an epoch count
  that is a whole multiple of the dataset's size counts samples (UNet3D v4.0 on: 168,000 =
  1,000 epochs of 168). A benchmark not named yet (Google's v1.0 BERT logs
  ``submission_benchmark`` last, at time 0) counts epochs when the count is a fraction or below
  the global batch, tokens when it is a whole number of batches of sequences, else samples. The
  unit is decided once per log. Epoch benchmarks' ``tracked_stats`` give no position (their
  ``step`` counts epochs, blocks or iterations by submitter).

Whole epoch counts are epochs done (an ``epoch_stop`` of a log whose first ``epoch_start`` is
epoch 0 ends it with one done: SSD, RetinaNet). Fractions are the position since the first
``epoch_start``'s number when the first fraction is past it (HugeCTR's DLRM v1.0 counts 1.05
for 5 % of the run's epoch; GNN starts epoch 1 at 0.05); in such a log a whole ``epoch_stop``
(HugeCTR's, naming the next epoch) gives no record.

A position becomes optimizer steps with the header's ``global_batch_size``: samples / batch,
tokens / (batch x ``max_sequence_length``), epochs x ``train_samples`` / batch, where
``train_samples`` logged before the first record is the dataset's size (1,281,167 for ResNet);
without it (or when it is smaller than a batch: NVIDIA's SSD v4.0 logs 464) an iteration is an
epoch (a thousandth of one for fractional counts), as for MiniGo. Steps are rounded to the
nearest: BERT counts unpacked samples while its batch holds packed sequences. Less than half a
step is no progress (NVIDIA's v1.0 BERT logs ``epoch_num`` 1 on every evaluation and its steps
only on other lines: it gives no record).

**Records.** One record per event of ``_REACHED`` (a ``tracked_stats`` holding a training
statistic, NeMo's ``train_loss``, ``epoch_stop``, ``eval_start``, ``eval_stop``,
``eval_accuracy``, ``run_stop``) whose position is past the previous record's, at the event's
``time_ms``. That keeps one record per position where every rank prints the event, drops
evaluations logged late for earlier checkpoints (Stable Diffusion evaluates after training) and
counts that name where a block *started* (NeMo's block summaries and ``block_stop`` in Llama 3.1
405B and Llama 2 LoRA v5.0). ``block_start``/``block_stop`` and ``epoch_start`` give no record:
submitters fill their ``first_epoch_num``/``epoch_count``/``samples_count`` with steps, samples
or the block's start. Nothing after ``run_stop`` is a record, nor an ``epoch_stop`` ending an
epoch shorter than half the previous one (from the epoch's first ``epoch_start``): the
epoch a run cut short when it reached its target (SSD, RetinaNet).

**Step time.** A ``tracked_stats`` whose value holds a training step time (``_STEP_TIME_KEYS``:
``train_step_timing`` in v3.0/v3.1, ``train_step_timing in s`` in v4.1, ``train_step_time`` in
v5.0, s per step) or a training throughput (``_THROUGHPUT_KEYS``: ``throughput``, ``imgs_sec``;
per second in the benchmark's count, samples for step positions) is a training statistic: its
record's step time is that time, or a step's samples (tokens) over the throughput; its
``reduced_train_loss`` is the loss. Evaluation (``validation_*``), whole-epoch
(``train_epoch_timing``) and start-up (``warmup_time``, ``init_finished``) statistics are not.
Other records carry no step time: their times give the pace. ``num_iterations`` is the number of
steps since the previous record.

**The total** (``LogContext.totals["mlperf"]``, hence ``train_iters`` of later records): a run
stops at its quality target, so before it ends a log states at most a cap, and once it has
ended its real total:

* the cap, from the header: ``max_steps`` (Llama 3.1 8B v5.1) or
  ``opt_learning_rate_training_steps`` (BERT's and Llama 2 LoRA's ``max_steps``), in steps;
  ``max_samples`` in samples. Learning-rate decay horizons (``opt_learning_rate_decay_steps``)
  are not caps; GPT-3 and Llama 3.1 405B state none;
* the end: ``train_samples`` or ``trained_samples`` logged after the first record (the
  samples, GPT-3's tokens, the run trained: BERT v2.1 on, GPT-3 v3.0 on), else ``run_stop``
  (the last record's step).

**Events.** ``init_start`` (the first one: every rank prints it), ``init_stop``, ``run_start``,
``eval_start``, ``eval_stop`` and ``run_stop`` give, with a context, a ``LogEvent`` at
``time_ms`` and the last training iteration read; every event's ``time_ms`` counts towards the
log's first and last timestamp.

Without a context no line gives a record: a position cannot be read from one line.
"""

from __future__ import annotations

import math
from typing import Any, Final

from adapters.logs import values
from adapters.logs.context import LogContext, LogEvent, MllogState
from planner.specs.job import ProgressRecord

MARKER: Final = ":::MLLOG"
FRAMEWORK: Final = "mlperf"
_EVENTS: Final = frozenset(
    {"init_start", "init_stop", "run_start", "eval_start", "eval_stop", "run_stop"}
)
_REACHED: Final = frozenset(
    {
        "tracked_stats",
        "train_loss",
        "epoch_stop",
        "eval_start",
        "eval_stop",
        "eval_accuracy",
        "run_stop",
    }
)
_STEP_TIME_KEYS: Final = (
    "train_step_timing",
    "train_step_timing in s",
    "train_step_time",
    "train_step_time_s",
    "step_time",
    "step_time_s",
)
_THROUGHPUT_KEYS: Final = ("throughput", "imgs_sec", "samples_per_second", "train_throughput")
_LOSS_KEYS: Final = ("reduced_train_loss", "train_loss", "loss")
_TOKEN_BENCHMARKS: Final = frozenset({"gpt3"})
_SAMPLE_BENCHMARKS: Final = frozenset(
    {
        "bert",
        "llama2_70b_lora",
        "llama31_405b",
        "llama31_8b",
        "stable_diffusion",
        "flux1",
        "deepseekv3_671b",
        "gpt_oss_20b",
        "qwen35_397b_grpo",
    }
)
_EPOCH_BENCHMARKS: Final = frozenset(
    {
        "resnet",
        "ssd",
        "retinanet",
        "maskrcnn",
        "rnnt",
        "unet3d",
        "dlrm",
        "dlrm_dcnv2",
        "minigo",
        "gnn",
        "rgat",
        "transformer",
        "gnmt",
        "ncf",
    }
)
_CAPS: Final = {
    "max_steps": "steps",
    "opt_learning_rate_training_steps": "steps",
    "max_samples": "samples",
}


def parse_mllog(text: str, context: LogContext | None) -> ProgressRecord | None:
    """The record of one ``:::MLLOG`` line, or None; updates ``context`` (see module doc).

    Raises ``values.InvalidLineError`` (or ValueError) for absurd values in a training statistic.
    """
    start = text.find(MARKER)
    if start < 0:
        return None
    obj = values.json_object(text[start + len(MARKER) :].strip())
    if obj is None or context is None:
        return None
    key = obj.get("key")
    value = obj.get("value")
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    time_s = _time_s(obj.get("time_ms"))
    context.observe_time(time_s)
    if not isinstance(key, str):
        return None
    state = context.mllog
    if key in _EVENTS and not (
        key == "init_start" and any(e.name == "init_start" for e in context.events)
    ):
        context.events.append(
            LogEvent(name=key, timestamp_s=time_s, iteration=state.last_iteration)
        )
    _header(key, value, state, context)
    if key == "epoch_start":
        epoch = _number(metadata.get("epoch_num"))
        if state.first_epoch is None:
            state.first_epoch = epoch
        if state.epoch_started is None or state.epoch_started[0] != epoch:
            state.epoch_started = (epoch, time_s)
    reached = key in _REACHED and not state.stopped
    if key == "epoch_stop" and not _whole_epoch(time_s, state):
        reached = False
    record = _progress(key, value, metadata, time_s, state) if reached else None
    if key == "run_stop":
        state.stopped = True
        if state.last_iteration is not None and not state.trained:
            _state_total(context, state.last_iteration)
    return record


def _whole_epoch(time_s: float | None, state: MllogState) -> bool:
    """Whether an ``epoch_stop`` ends a whole epoch: one lasting at least half the previous
    (a run that reaches its target mid-epoch logs an ``epoch_stop`` for the epoch it cut short:
    SSD and RetinaNet, seconds after an evaluation). Records the epoch's length either way, so
    that a slow first epoch (warm-up) costs at most the record of the second."""
    started = None if state.epoch_started is None else state.epoch_started[1]
    if state.epoch_started is not None:
        state.epoch_started = (state.epoch_started[0], None)  # the first stop of the epoch
    if time_s is None or started is None:
        return True
    length, previous = time_s - started, state.epoch_s
    state.epoch_s = length
    return previous is None or length >= 0.5 * previous


def _header(key: str, value: object, state: MllogState, context: LogContext) -> None:
    """Read the settings a later position needs (batch, sequence, dataset size, caps)."""
    if key == "submission_benchmark" and isinstance(value, str):
        state.benchmark = value.strip().lower()
    elif key == "global_batch_size":
        state.global_batch_size = _count(value)
    elif key == "max_sequence_length":
        state.sequence_length = _count(value)
    elif key in ("train_samples", "trained_samples"):
        count = _count(value)
        if count is None:
            return
        if state.last_iteration is None:
            if key == "train_samples":
                state.epoch_samples = count
        else:  # after training: what the run trained
            unit = _trained_unit(state, count)
            steps = None if unit is None else _steps(float(count), unit, state)
            if steps is not None:
                _state_total(context, round(steps))
                state.trained = True
    elif key in _CAPS and state.last_iteration is None:
        count = _count(value)
        steps = _steps(float(count), _CAPS[key], state) if count is not None else None
        if steps is not None and steps >= 1:
            _state_total(context, round(steps))


def _state_total(context: LogContext, total: int) -> None:
    last = context.mllog.last_iteration
    if total >= 1 and total < values.MAX_ITERATION and (last is None or total >= last):
        context.totals[FRAMEWORK] = total


def _progress(
    key: str, value: object, metadata: dict[str, Any], time_s: float | None, state: MllogState
) -> ProgressRecord | None:
    """The record of an event that reaches a position (module doc), or None."""
    statistic: tuple[str, float] | None = None
    loss: float | None = None
    if key == "tracked_stats":
        if not isinstance(value, dict):
            return None
        statistic = _training_statistic(value)
        if statistic is None:
            return None
        loss = _first_number(value, _LOSS_KEYS)
    elif key == "train_loss":
        loss = _number(value)
    position = _position(key, value, metadata, state)
    if position is None:
        return None
    count, unit = position
    steps = _steps(count, unit, state)
    if steps is None or not math.isfinite(steps) or steps < 0.5:
        return None  # less than a step is no progress (NVIDIA's v1.0 BERT logs epoch_num 1)
    iteration = values.iteration(float(round(steps)))
    last = state.last_iteration
    if last is not None and iteration <= last:
        return None
    step_s = None if statistic is None else values.step_time(_step_time(statistic, unit, state))
    record = ProgressRecord(
        iteration=iteration,
        step_time_s=step_s,
        num_iterations=1 if last is None else iteration - last,
        timestamp_s=time_s,
        loss=values.finite(loss),
        framework=FRAMEWORK,
    )
    state.last_iteration = iteration
    return record


def _training_statistic(value: dict[str, Any]) -> tuple[str, float] | None:
    """(``time`` or ``throughput``, its number) of a training ``tracked_stats`` value, else None.
    A step time that is not a number is absurd (``InvalidLineError``)."""
    for name in _STEP_TIME_KEYS:
        if name in value:
            step_s = _number(value[name])
            if step_s is None:
                raise values.InvalidLineError
            return "time", step_s
    for name in _THROUGHPUT_KEYS:
        rate = _number(value.get(name))
        if rate is not None:
            return "throughput", rate
    return None


def _step_time(statistic: tuple[str, float], unit: str, state: MllogState) -> float | None:
    kind, number = statistic
    if kind == "time":
        return number
    per_step = _per_step(unit, state)
    return per_step / number if per_step is not None and number > 0 else None


def _per_step(unit: str, state: MllogState) -> float | None:
    """What one optimizer step processes in the unit a throughput is counted in."""
    batch = state.global_batch_size
    if batch is None:
        return None
    if unit == "tokens":
        return None if state.sequence_length is None else float(batch * state.sequence_length)
    return float(batch)  # samples per second, also for step and epoch positions


def _position(
    key: str, value: object, metadata: dict[str, Any], state: MllogState
) -> tuple[float, str] | None:
    """(count, unit) the event says training reached, or None."""
    samples = _number(metadata.get("samples_count"))
    if samples is not None:
        return samples, "samples"
    step_num = _number(metadata.get("step_num"))
    if step_num is not None:
        return step_num, "steps"
    count = _number(metadata.get("epoch_num"))
    from_step = count is None and key == "tracked_stats"
    if from_step:
        if state.benchmark in _EPOCH_BENCHMARKS or state.count_unit == "epochs":
            return None  # epoch benchmarks' statistics count epochs, blocks or iterations
        count = _number(metadata.get("step"))
        if count is None and isinstance(value, dict):
            count = _number(value.get("epoch_num"))
    if count is None or count < 0:
        return None
    unit = _count_unit(state, count)
    if unit is None or (unit == "epochs" and from_step):
        return None
    if unit == "epochs":
        done = _epochs_done(key, count, state)
        return None if done is None else (done, unit)
    return count, unit


def _epochs_done(key: str, count: float, state: MllogState) -> float | None:
    """Epochs done at an event counting ``count`` epochs. Whole counts: what eval events say,
    and an ``epoch_stop`` of a log numbering epochs from 0 ends epoch 0 with one done. Fractions
    (DLRM, GNN): less the first ``epoch_start``'s number when the first fraction is past it
    (HugeCTR's DLRM v1.0 counts from 1: 1.05 is 5 % of the epoch; GNN starts epoch 1 at 0.05);
    in such a log a whole ``epoch_stop`` gives none (HugeCTR closes its run with the next
    epoch's number)."""
    first = state.first_epoch
    if count != int(count):
        if state.epoch_offset is None:
            past = first is not None and 0 < first <= count
            state.epoch_offset = first if past and first is not None else 0.0
        return count - state.epoch_offset
    if key == "epoch_stop":
        if state.epoch_offset is not None:
            return None
        if first == 0:
            return count + 1
    return count


def _count_unit(state: MllogState, count: float) -> str | None:
    """The unit of the log's ``epoch_num`` / ``tracked_stats`` counts, decided once (None: not
    yet decidable, an unnamed benchmark before its global batch)."""
    if state.count_unit is not None:
        return state.count_unit
    benchmark = state.benchmark
    unit: str | None = None
    if benchmark in _TOKEN_BENCHMARKS:
        unit = "tokens"
    elif benchmark in _SAMPLE_BENCHMARKS:
        unit = "samples"
    elif benchmark in _EPOCH_BENCHMARKS:
        unit = "epochs"
        dataset = state.epoch_samples
        if dataset is not None and count >= dataset and count % dataset == 0:
            unit = "samples"  # UNet3D v4.0 counts samples: 168,000 = 1,000 epochs of 168
    else:
        batch, sequence = state.global_batch_size, state.sequence_length
        if count != int(count):
            unit = "epochs"  # samples and tokens are whole
        elif batch is None:
            return None
        elif count < batch:
            unit = "epochs"
        elif sequence is not None and count > 0 and count % (batch * sequence) == 0:
            unit = "tokens"
        else:
            unit = "samples"
    state.count_unit = unit
    return unit


def _trained_unit(state: MllogState, count: int) -> str | None:
    """The unit of a ``train_samples`` logged after training: the log's count unit; None for a
    benchmark counting epochs (its ``run_stop`` gives the total)."""
    unit = _count_unit(state, float(count))
    return None if unit == "epochs" else unit


def _steps(count: float, unit: str, state: MllogState) -> float | None:
    """``count`` in ``unit`` as optimizer steps (None when the header does not say how many)."""
    if unit == "steps":
        return count
    batch = state.global_batch_size
    if unit == "epochs":
        if state.steps_per_epoch is None:  # decided once, at the first position in epochs
            samples = state.epoch_samples
            # without the dataset's size: an iteration per epoch, or per thousandth of one
            # for a log counting fractions of epochs (DLRM v1.0 logs no train_samples)
            fallback = 1.0 if count == int(count) else 1000.0
            per_epoch = samples / batch if samples and batch else 0.0
            # a "dataset" smaller than a batch is no sample count (NVIDIA's SSD v4.0 logs 464)
            state.steps_per_epoch = per_epoch if per_epoch >= 1 else fallback
        return count * state.steps_per_epoch
    if batch is None:
        return None
    if unit == "tokens":
        sequence = state.sequence_length
        return None if sequence is None else count / (batch * sequence)
    return count / batch


def _first_number(value: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for name in keys:
        number = _number(value.get(name))
        if number is not None:
            return number
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: object) -> int | None:
    number = _number(value)
    if number is None or not math.isfinite(number) or number < 1 or number != int(number):
        return None
    return int(number) if number < values.MAX_ITERATION else None


def _time_s(value: object) -> float | None:
    ms = _number(value)
    return values.epoch_s(ms / 1000.0) if ms is not None else None
