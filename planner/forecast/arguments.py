"""What a job's arguments say about the pauses of its run: evaluation and checkpoint intervals;
pure text reading, no I/O.

Read from a command line or batch script (``--eval-interval 1000``, ``--eval-interval=1000``),
from the argument dump Megatron-LM prints at start-up (``  eval_interval ........ 1000``), from
NeMo / Lightning Hydra overrides (``trainer.val_check_interval=1000``) and from torchtitan's
options (``--validation.freq 1000``). Only values the text states are used (a framework's
default interval is not assumed: a job may have no validation data).

Names read, per field:

* ``eval_interval``: ``--eval-interval`` (Megatron-LM), ``trainer.val_check_interval`` (NeMo,
  Lightning; an integer), ``--validation.freq`` (torchtitan);
* ``eval_iters``: ``--eval-iters``, ``trainer.limit_val_batches`` (an integer),
  ``--validation.steps``;
* ``save_interval``: ``--save-interval``,
  ``exp_manager.checkpoint_callback_params.every_n_train_steps`` or ``every_n_train_steps``,
  ``--checkpoint.interval``;
* ``train_iters``: ``--train-iters``, ``trainer.max_steps``, ``--training.steps``;
* ``global_batch_size``: ``--global-batch-size``, ``model.global_batch_size``;
* ``eval_global_batch_size``: Megatron-LM's ``--eval-global-batch-size``, the samples of one
  evaluation iteration (unstated: the training's global batch, Megatron-LM's default in
  ``validate_args``, ``megatron/training/arguments.py``);
* ``rampup_batch_size``: Megatron-LM's ``--rampup-batch-size START INCREMENT SAMPLES`` (the
  batch grows from ``START`` by ``INCREMENT`` over ``SAMPLES`` samples to the global batch),
  ``model.rampup_batch_size=[START,INCREMENT,SAMPLES]`` (NeMo).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "eval_interval": ("eval-interval", "trainer.val_check_interval", "validation.freq"),
    "eval_iters": ("eval-iters", "trainer.limit_val_batches", "validation.steps"),
    "save_interval": (
        "save-interval",
        "exp_manager.checkpoint_callback_params.every_n_train_steps",
        "every_n_train_steps",
        "checkpoint.interval",
    ),
    "train_iters": ("train-iters", "trainer.max_steps", "training.steps"),
    "global_batch_size": ("global-batch-size", "model.global_batch_size"),
    "eval_global_batch_size": ("eval-global-batch-size",),
}
_RAMPUP = (
    r"(?:--rampup-batch-size(?:\s*=\s*|\s+)|model\.rampup_batch_size=\[?)"
    r"['\"]?(\d+)['\"]?[\s,]+['\"]?(\d+)['\"]?[\s,]+['\"]?(\d+)",
    r"(?m)^\s*rampup_batch_size\s\.{2,}\s\[['\"]?(\d+)['\"]?,\s*['\"]?(\d+)['\"]?,\s*"
    r"['\"]?(\d+)['\"]?\]",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSchedule:
    """Intervals a job's arguments state, in iterations (None: not stated).

    ``eval_interval``: an evaluation every that many iterations (Megatron-LM: after each
    iteration that is a multiple of it), over ``eval_iters`` batches of
    ``eval_global_batch_size`` samples (None: the training's global batch); ``save_interval``:
    a checkpoint every that many iterations; ``train_iters``: the run's total;
    ``global_batch_size`` and ``rampup_batch_size`` (``start, increment, samples``): a
    batch-size ramp-up (``planner.forecast.rampup``).
    """

    eval_interval: int | None = None
    eval_iters: int | None = None
    save_interval: int | None = None
    train_iters: int | None = None
    global_batch_size: int | None = None
    rampup_batch_size: tuple[int, int, int] | None = None
    eval_global_batch_size: int | None = None

    @property
    def empty(self) -> bool:
        """True when the text stated no interval and no ramp-up."""
        return self.eval_interval is None and self.save_interval is None and self.ramp() is None

    def ramp(self) -> tuple[int, int, int, int] | None:
        """``(start, increment, samples, global batch)`` of a usable batch-size ramp-up."""
        if self.rampup_batch_size is None or not self.global_batch_size:
            return None
        start, increment, samples = self.rampup_batch_size
        if not (0 < start < self.global_batch_size and increment > 0 and samples > 0):
            return None
        return start, increment, samples, self.global_batch_size


@dataclass(frozen=True, slots=True)
class _Alias:
    """One spelling of an option: as given on a command line or in an override (``literal``,
    the text ``given`` must find) and as Megatron-LM's argument dump prints it (``dumped``, its
    dashes as underscores, found by ``printed``)."""

    literal: str
    dumped: str
    given: re.Pattern[str]
    printed: re.Pattern[str]


def _alias(alias: str) -> _Alias:
    name = re.escape(alias)
    dumped = alias.replace("-", "_")
    return _Alias(
        literal=alias,
        dumped=dumped,
        given=re.compile(
            rf"(?:^|[\s'\"])(?:--|\+{{0,2}})?{name}(?:\s*=\s*|\s+)['\"]?(-?\d+(?:\.\d+)?)\b"
        ),
        printed=re.compile(rf"(?m)^\s*{re.escape(dumped)}\s\.{{2,}}\s(-?\d+(?:\.\d+)?)\s*$"),
    )


# Compiled once: a service's first cycle reads the schedule of every job it describes (ten
# thousand scripts at once), and each pattern is only run over a text that holds its literal
# (a regular expression scan of a whole script per spelling cost most of the read).
_COMPILED: Final[dict[str, tuple[_Alias, ...]]] = {
    field_name: tuple(_alias(a) for a in aliases) for field_name, aliases in _ALIASES.items()
}
_RAMPUP_COMPILED: Final = tuple(re.compile(p) for p in _RAMPUP)
_RAMPUP_LITERALS: Final = ("rampup-batch-size", "rampup_batch_size")


def _option(text: str, alias: _Alias) -> int | None:
    """The last integer value given to ``alias`` in ``text`` (None: not given, or not an
    integer, e.g. a fraction of an epoch)."""
    found: list[tuple[int, str]] = []
    if alias.literal in text:
        found += [(m.start(), m.group(1)) for m in alias.given.finditer(text)]
    if alias.dumped in text:
        found += [(m.start(), m.group(1)) for m in alias.printed.finditer(text)]
    if not found:
        return None
    value = max(found)[1]
    if "." in value:
        number = float(value)
        return int(number) if number.is_integer() and number >= 1 else None
    number_int = int(value)
    return number_int if number_int >= 0 else None


def schedule_from_arguments(text: str) -> TrainingSchedule:
    """The evaluation and checkpoint intervals ``text`` states (see the module docstring); an
    ``empty`` schedule when it states none. An interval of 0 means none (Megatron-LM's
    ``--eval-interval 0``)."""
    values = {}
    for field_name, aliases in _COMPILED.items():
        value = None
        for alias in aliases:
            value = _option(text, alias)
            if value is not None:
                break
        values[field_name] = value
    eval_interval = values["eval_interval"] or None
    eval_iters = values["eval_iters"]
    if eval_iters == 0:
        eval_interval = None
    ramp = None
    found = (
        [(m.start(), m.groups()) for p in _RAMPUP_COMPILED for m in p.finditer(text)]
        if any(literal in text for literal in _RAMPUP_LITERALS)
        else []
    )
    if found:
        groups = max(found)[1]
        ramp = (int(groups[0]), int(groups[1]), int(groups[2]))
    return TrainingSchedule(
        eval_interval=eval_interval,
        eval_iters=eval_iters,
        save_interval=values["save_interval"] or None,
        train_iters=values["train_iters"] or None,
        global_batch_size=values["global_batch_size"] or None,
        rampup_batch_size=ramp,
        eval_global_batch_size=values["eval_global_batch_size"] or None,
    )
