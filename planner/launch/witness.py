"""The job's own log as a witness of what it trains.

Frameworks print their resolved configuration when a job starts: Megatron-LM's and
Megatron-DeepSpeed's argument dump, DeepSpeed's engine configuration, the vocabulary padding
of Megatron, NeMo and Megatron-Bridge (:mod:`planner.launch.witness_megatron`), Hugging Face's
``TrainingArguments`` and the Trainer's ``Running training`` block, accelerate's state,
torchtitan's device mesh, trainer line, model args and job config
(:mod:`planner.launch.witness_trainers`), the config trees of NeMo 1.0,
Megatron-Bridge and torchtune (:mod:`planner.launch.witness_trees`). :func:`witness_facts` reads
them from the head of a log into :class:`~planner.launch.types.Facts`, each value cited
``log:<line>``; :func:`weigh_witness` and :func:`check_witness` hold it against what the launch
says.

The rule (:func:`~planner.launch.describe.describe_launch` applies it when ``Launch.log_text``
is given):

1. **The log fills what the launch left open.** A field the launch did not determine (absent,
   or only a documented default assumed) takes the log's value, before the description derives
   data parallelism, the global batch and the node count, so those follow the log.
2. **The launch's own values stay; a disagreement is noted.** Where the launch determined a
   field (a file, an override, the catalog, a derivation) and the log prints another value, the
   description keeps the launch's value and adds a note naming both, with their sources: the
   launch is what the planner is asked about (a resubmission runs it again), and a difference
   means the log is of another run or the framework changed a setting on its own, which a
   person should look at.

Only the head of the log is read (:data:`~planner.launch.witness_log.LOG_HEAD_CHARS`), line by
line with bounded sections, so a log of any size or content costs at most a few milliseconds;
nothing in it is executed.
"""

from __future__ import annotations

from planner.launch.types import Facts
from planner.launch.witness_log import LOG_HEAD_CHARS, LogView
from planner.launch.witness_megatron import (
    read_argument_dump,
    read_deepspeed_config,
    read_megatron_lines,
)
from planner.launch.witness_trainers import (
    read_hf_lines,
    read_torchtitan_lines,
    read_training_arguments,
)
from planner.launch.witness_trees import read_config_trees

__all__ = ["LOG_HEAD_CHARS", "check_witness", "weigh_witness", "witness_facts"]

_READERS = (
    read_config_trees,
    read_argument_dump,
    read_megatron_lines,
    read_deepspeed_config,
    read_training_arguments,
    read_hf_lines,
    read_torchtitan_lines,
)
"""The formats, in increasing precedence: where two print the same field, the later one (the
value as the run resolved it further) is kept."""

_NOT_WITNESSED = frozenset({"training.framework", "training.mode", "launch.model_name"})
"""Fields a log's format implies rather than prints: they fill a gap but are never held
against the launch."""


def witness_facts(text: str) -> Facts:
    """What the head of a job's log (``text``, as read; only its first
    :data:`LOG_HEAD_CHARS` characters are looked at) says the job trains, each value cited
    ``log:<line>``. Empty when the log prints none of the formats read (module docstring);
    a printed configuration that does not parse is noted, never raised."""
    log = LogView.of(text)
    facts = Facts()
    for read in _READERS:
        read(log, facts)
    return facts


def weigh_witness(facts: Facts, witness: Facts) -> list[str]:
    """Fill ``facts`` (a reader's, before derivation) from ``witness`` where the launch did not
    determine a field (unset or assumed); returns the fields filled. A note lists them."""
    filled = []
    for name, found in witness:
        if name in witness.assumed or (facts.has(name) and name not in facts.assumed):
            continue
        facts.set(name, found.value, found.source)
        filled.append(name)
    if filled:
        facts.note(f"from the job's log: {', '.join(filled)}")
    for note in witness.notes:
        facts.note(note)
    return filled


def _same(first: object, second: object) -> bool:
    """Equal values (``8`` and ``8.0`` alike; a bool is not a number)."""
    if isinstance(first, bool) or isinstance(second, bool):
        return first is second
    if isinstance(first, list | tuple) and isinstance(second, list | tuple):
        return list(first) == list(second)
    return first == second


def check_witness(facts: Facts, witness: Facts) -> None:
    """Note each field where the finished ``facts`` (the launch's values and what was derived
    from them) and ``witness`` disagree: ``<field>: the launch gives A (<source>), the job's log
    B (<log:line>); the launch's value is kept``."""
    for name, found in witness:
        if name in witness.assumed or name in _NOT_WITNESSED:
            continue
        mine = facts.values.get(name)
        if mine is None or mine.source == found.source or _same(mine.value, found.value):
            continue
        facts.note(
            f"{name}: the launch gives {mine.value!r} ({mine.source}), the job's log "
            f"{found.value!r} ({found.source}); the launch's value is kept"
        )
