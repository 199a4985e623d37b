"""What Megatron-LM, Megatron-DeepSpeed and DeepSpeed print of their resolved configuration at
start, read back into facts.

* **Megatron's argument dump** (``_print_args`` in ``megatron/training/arguments.py``,
  NVIDIA/Megatron-LM@10e7b74, and ``megatron/arguments.py`` of microsoft/Megatron-DeepSpeed):
  ``------------------------ arguments ------------------------``, then one line per argument,
  ``  <name> <dots> <value>`` (dots pad the name to 48 columns; a longer name is followed by two
  spaces), sorted, then ``-------------------- end of arguments ---------------------``. The
  names are argparse destinations and the values Python's ``str`` of the validated arguments
  (``True``, ``None``, ``[16, 16, 100000]``), so the dump is read as the arguments they came
  from and resolved by the readers' own rules (:func:`~planner.launch.readers.megatron.
  read_megatron`; a dump with ``deepspeed`` or ``ds_sequence_parallel_size`` by
  :func:`~planner.launch.readers.megatron_deepspeed.read_megatron_deepspeed`, whose ZeRO stage
  comes from DeepSpeed's own print, not from ``--zero-stage``). ``world_size`` and
  ``data_parallel_size`` are printed as ``validate_args`` computed them.
* ``using world size: W, data-parallel size: D, context-parallel size: C, ...,
  tensor-model-parallel size: T, pipeline-model-parallel size: P`` (``validate_args``).
* `` > padded vocab (size: V) with N dummy tokens (new size: P)``: the tokenizer's vocabulary
  and the padded embedding (``megatron/core/tokenizers/utils/build_tokenizer.py``; the same
  line in Megatron-DeepSpeed, NeMo 1.0 and Megatron-Bridge); NeMo 2.0's ``Padded vocab_size:
  P, original vocab_size: V, dummy tokens: N.`` (``get_vocab_size``, nemo/lightning/base.py,
  NVIDIA/NeMo@8cfedd7).
* **DeepSpeed's engine configuration** (``DeepSpeedConfig.print``, deepspeed/runtime/config.py):
  ``DeepSpeedEngine configuration:`` then ``  <name> <dots> <value>`` lines (dots to 29
  columns) through DeepSpeed's logger: ``train_batch_size`` (the global batch),
  ``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``,
  ``zero_optimization_stage``, ``bfloat16_enabled`` / ``fp16_enabled`` and ``world_size``
  (DeepSpeed's data-parallel world: the processes over model and sequence parallelism).
"""

from __future__ import annotations

import re

from planner.launch.readers.megatron import read_megatron
from planner.launch.readers.megatron_common import ArgSource
from planner.launch.readers.megatron_deepspeed import read_megatron_deepspeed
from planner.launch.types import Facts
from planner.launch.values import as_int, positive_int
from planner.launch.witness_log import LogView, Marker, take_facts

__all__ = ["read_argument_dump", "read_deepspeed_config", "read_megatron_lines"]

_DUMP_START = Marker(" arguments -", re.compile(r"^-{8,} arguments -{8,}\s*$"))
_DUMP_END = re.compile(r"^-{8,} end of arguments -{8,}\s*$")
_ROW = re.compile(r"^ {1,4}([A-Za-z_]\w*) (?:\.+ | )(.*?)\s*$")
_MAX_ROWS = 4000
_DEEPSPEED_PREFIX = re.compile(r"^\[[^\]]*\] \[[A-Z]+\] \[[^\]]*\] ")
_DEEPSPEED_START = Marker(
    "DeepSpeedEngine configuration", re.compile(r"\bDeepSpeedEngine configuration:\s*$")
)
_DEEPSPEED_ROWS = 400
_WORLD = Marker(
    "using world size: ",
    re.compile(
        r"using world size: (\d+), data-parallel size: (\d+), context-parallel size: (\d+),"
        r".*tensor-model-parallel size: (\d+), pipeline-model-parallel size: (\d+)"
    ),
)
_PADDED = Marker(
    "> padded vocab (size: ",
    re.compile(r"> padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)"),
)
_NEMO_PADDED = Marker(
    "Padded vocab_size: ",
    re.compile(r"Padded vocab_size: (\d+), original vocab_size: (\d+), dummy tokens:"),
)
_RENAMED = {"fp8": "fp8-format", "fp4": "fp4-format"}
"""Destinations whose flag is spelled otherwise (``--fp8-format`` stores ``fp8``)."""
_NOT_READ = frozenset({"zero-stage", "deepspeed-config", "yaml-cfg"})
"""Megatron-DeepSpeed's ``--zero-stage`` only feeds a config the script may not use, and
files the dump names are not read."""


def _rows(log: LogView, start: int) -> dict[str, tuple[str, int]]:
    """The dump's ``name -> (value text, line index)`` from the header at ``start`` to its
    end line; lines of other shapes between them (another rank's output) are passed over."""
    rows: dict[str, tuple[str, int]] = {}
    for index in range(start + 1, min(len(log.lines), start + 1 + _MAX_ROWS)):
        line = log.lines[index]
        if _DUMP_END.match(line):
            break
        row = _ROW.match(line)
        if row is not None:
            rows.setdefault(row.group(1), (row.group(2), index))
    return rows


def _argument(text: str) -> str | bool | None:
    """A dumped value as a command-line argument: ``True`` a switch, ``False``/``None`` not
    given, a list its items separated by spaces, anything else its text."""
    if text in {"False", "None", ""}:
        return None
    if text == "True":
        return True
    if text.startswith("[") and text.endswith("]"):
        items = [item.strip().strip("'\"") for item in text[1:-1].split(",")]
        return " ".join(item for item in items if item) or None
    return text


def _arguments(rows: dict[str, tuple[str, int]], log: LogView) -> ArgSource:
    values: dict[str, str | bool] = {}
    cited: dict[str, str] = {}
    names: dict[str, str] = {}
    for name, (text, index) in rows.items():
        value = _argument(text)
        flag = _RENAMED.get(name, name.replace("_", "-"))
        if value is None or flag in _NOT_READ:
            continue
        values[flag] = value
        cited[flag] = log.cite(index)
        names[flag] = name
    if values.get("group-query-attention") is not True:
        values.pop("num-query-groups", None)
    return ArgSource(values, where="log", cited=cited, names=names)


def read_argument_dump(log: LogView, facts: Facts) -> None:
    """The first Megatron argument dump of the log into ``facts`` (module docstring)."""
    found = log.first(_DUMP_START)
    if found is None:
        return
    rows = _rows(log, found[0])
    args = _arguments(rows, log)
    world = positive_int(rows.get("world_size", ("", 0))[0])
    dumped = Facts()
    if "deepspeed" in rows or "ds_sequence_parallel_size" in rows:
        read_megatron_deepspeed(dumped, args, config=None, world=world)
    else:
        read_megatron(dumped, args, world=world)
    take_facts(facts, dumped)
    for name, field in (
        ("world_size", "hardware.num_gpus"),
        ("data_parallel_size", "parallelism.data_parallel"),
    ):
        text, index = rows.get(name, ("", 0))
        if positive_int(text):
            facts.set(field, positive_int(text), log.cite(index))


def read_megatron_lines(log: LogView, facts: Facts) -> None:
    """Megatron's ``using world size: ...`` and ``> padded vocab ...`` lines and NeMo 2.0's
    ``Padded vocab_size: ...`` (module docstring); the first of each."""
    world = log.first(_WORLD)
    if world is not None:
        index, match = world
        for group, field in (
            (1, "hardware.num_gpus"),
            (2, "parallelism.data_parallel"),
            (3, "parallelism.context_parallel"),
            (4, "parallelism.tensor_parallel"),
            (5, "parallelism.pipeline_parallel"),
        ):
            facts.set(field, int(match.group(group)), log.cite(index))
    padded = log.first(_PADDED)
    if padded is not None:
        index, match = padded
        facts.set("model.vocab_size", int(match.group(1)), log.cite(index))
        facts.set("launch.padded_vocab_size", int(match.group(3)), log.cite(index))
    padded = log.first(_NEMO_PADDED)
    if padded is not None:
        index, match = padded
        facts.set("model.vocab_size", int(match.group(2)), log.cite(index))
        facts.set("launch.padded_vocab_size", int(match.group(1)), log.cite(index))


def _deepspeed_rows(log: LogView, start: int) -> dict[str, tuple[str, int]]:
    """The engine configuration's ``name -> (value text, line index)``: DeepSpeed's log lines
    after the header, with the indented lines of a value printed as JSON between them; it ends
    at the first other line (``json = {`` of the user config, another record)."""
    rows: dict[str, tuple[str, int]] = {}
    for index in range(start + 1, min(len(log.lines), start + 1 + _DEEPSPEED_ROWS)):
        line = log.lines[index]
        prefix = _DEEPSPEED_PREFIX.match(line)
        row = _ROW.match(line[prefix.end() :]) if prefix is not None else None
        if row is not None:
            rows.setdefault(row.group(1), (row.group(2), index))
        elif prefix is not None or (not line[:1].isspace() and not line.startswith("}")):
            break
    return rows


def read_deepspeed_config(log: LogView, facts: Facts) -> None:
    """The first ``DeepSpeedEngine configuration`` of the log into ``facts`` (module
    docstring)."""
    found = log.first(_DEEPSPEED_START)
    if found is None:
        return
    rows = _deepspeed_rows(log, found[0])
    for name, field in (
        ("train_batch_size", "parallelism.global_batch_size"),
        ("train_micro_batch_size_per_gpu", "parallelism.micro_batch_size"),
        ("gradient_accumulation_steps", "launch.gradient_accumulation"),
        ("world_size", "parallelism.data_parallel"),
    ):
        text, index = rows.get(name, ("", 0))
        if positive_int(text):
            facts.set(field, positive_int(text), log.cite(index))
    text, index = rows.get("zero_optimization_stage", ("", 0))
    stage = as_int(text)
    if stage is not None and 0 <= stage <= 3:
        facts.set("parallelism.zero_stage", stage, log.cite(index))
    for name, precision in (
        ("bfloat16_enabled", "bf16"),
        ("bfloat16_config", "bf16"),
        ("fp16_enabled", "fp16"),
    ):
        text, index = rows.get(name, ("", 0))
        if text == "True" or "enabled=True" in text.split():
            facts.set("parallelism.precision", precision, log.cite(index))
