"""What the Hugging Face stack and torchtitan print of their resolved configuration at start,
read back into facts.

Hugging Face (transformers, TRL, accelerate, LLaMA-Factory, Axolotl):

* ``TrainingArguments.__str__`` (transformers ``training_args.py``; TRL's configs subclass it),
  which training scripts log (``Training/evaluation parameters TrainingArguments(``): the class
  name and ``(``, one ``key=value,`` line per argument, sorted, then ``)``. Read as the HF
  Trainer reader reads arguments (:func:`~planner.launch.readers.hf.trainer_settings_facts`),
  plus ``bf16`` / ``fp16``.
* ``Trainer``'s ``***** Running training *****`` block: ``Instantaneous batch size per device
  = N``, ``Total train batch size (w. parallel, distributed & accumulation) = N`` (the global
  batch), ``Gradient Accumulation steps = N``, ``Total optimization steps = N`` (the steps the
  run takes, epochs included).
* accelerate's ``AcceleratorState`` (``Num processes: N``, ``Mixed precision type: bf16``) and
  LLaMA-Factory's ``Process rank: 0, world size: N, device: ..., distributed training: ...,
  compute dtype: torch.bfloat16`` (``hparams/parser.py``).

torchtitan (pytorch/torchtitan@238fa99, ``train.py``, ``distributed/parallel_dims.py``,
``config/job_config.py``), through its ``[titan] <time> - root - INFO -`` logger:

* ``Building device mesh with parallelism: pp=P, dp_replicate=R, dp_shard=S, cp=C, tp=T,
  ep=E, etp=X``: the resolved degrees (``dp_shard -1`` already resolved); data parallel = R x S,
  the FSDP shard S, GPUs = P x R x S x C x T.
* ``Trainer is initialized with local batch size B, global batch size G, gradient accumulation
  steps A, sequence length L, total steps N (warmup W)``: B is the micro batch without pipeline
  parallelism; with PP > 1 (the mesh's ``pp`` or the printed config) it is the pipeline batch
  (one schedule per accumulation step) and ``Using pipeline schedule S with M microbatches and
  K stages`` (``distributed/pipeline_parallel.py``) gives the micro batch, B / M.
* ``Building <name> <flavor>with {...}`` (the model args as indented JSON; ``moe_args``
  nested): the model's shape by the flavor catalog's family rules
  (:func:`~planner.launch.readers.torchtitan_flavors.model_args_fields`).
* ``Running with configs: {...}`` (the whole JobConfig, with ``job.print_config``): read as the
  torchtitan reader reads a job config (:func:`~planner.launch.readers.torchtitan.
  config_facts`).
"""

from __future__ import annotations

import re

from planner.errors import SpecError
from planner.launch.configs import ConfigTree, load_config
from planner.launch.data import load_data
from planner.launch.readers.hf import trainer_settings_facts
from planner.launch.readers.hf_args import Settings
from planner.launch.readers.hf_parallel import precision_name
from planner.launch.readers.torchtitan import config_facts as torchtitan_config_facts
from planner.launch.readers.torchtitan_flavors import family_of, model_args_fields
from planner.launch.types import Facts
from planner.launch.values import mapping_of, parse_scalar, positive_int
from planner.launch.witness_log import LogView, Marker, take_facts

__all__ = ["read_hf_lines", "read_torchtitan_lines", "read_training_arguments"]

_ARGUMENTS_STARTS = (
    Marker("Arguments(", re.compile(r"\b[A-Z]\w*Arguments\($")),
    Marker("Config(", re.compile(r"\b[A-Z]\w*Config\($")),
)
_ARGUMENT = re.compile(r"^([A-Za-z_]\w*)=(.*),$")
_MAX_ARGUMENTS = 1000
_HF_LINES = (
    (
        Marker(
            "Instantaneous batch size per device",
            re.compile(r"\bInstantaneous batch size per device = ([\d,]+)"),
        ),
        "parallelism.micro_batch_size",
    ),
    (
        Marker(
            "Total train batch size",
            re.compile(
                r"\bTotal train batch size \(w\. parallel, distributed & accumulation\) = ([\d,]+)"
            ),
        ),
        "parallelism.global_batch_size",
    ),
    (
        Marker(
            "Gradient Accumulation steps", re.compile(r"\bGradient Accumulation steps = ([\d,]+)")
        ),
        "launch.gradient_accumulation",
    ),
    (
        Marker("Total optimization steps", re.compile(r"\bTotal optimization steps = ([\d,]+)")),
        "training.train_iters",
    ),
    (Marker("Num processes: ", re.compile(r"^Num processes: (\d+)\s*$")), "hardware.num_gpus"),
)
_MIXED_PRECISION = Marker("Mixed precision type: ", re.compile(r"^Mixed precision type: (\w+)\s*$"))
_PROCESS_LINE = Marker(
    "Process rank: ",
    re.compile(
        r"\bProcess rank: \d+, world size: (\d+), device: \S+, (?:distributed training: \w+, )?"
        r"compute dtype: (?:torch\.)?(\w+)"
    ),
)
_MESH = Marker(
    "Building device mesh",
    re.compile(r"\bBuilding device mesh with parallelism: ((?:\w+=-?\d+(?:, )?)+)"),
)
_TRAINER = Marker(
    "Trainer is initialized",
    re.compile(
        r"\bTrainer is initialized with local batch size (\d+), global batch size (\d+), "
        r"gradient accumulation steps (\d+), sequence length (\d+), total steps (\d+)"
    ),
)
_PP_SCHEDULE = Marker(
    "Using pipeline schedule",
    re.compile(r"\bUsing pipeline schedule \S+ with (\d+) microbatches and \d+ stages"),
)
_MODEL_ARGS = Marker("with {", re.compile(r"\bBuilding (\S+) (\S+?)\s*with \{\s*$"))
_JOB_CONFIG = Marker("Running with configs", re.compile(r"\bRunning with configs: \{\s*$"))
_MAX_JSON_LINES = 8000


def read_training_arguments(log: LogView, facts: Facts) -> None:
    """The first ``TrainingArguments``-like dump (one holding ``per_device_train_batch_size``)
    into ``facts`` (module docstring)."""
    starts = sorted(index for marker in _ARGUMENTS_STARTS for index, _ in log.search(marker))
    for start in starts:
        settings = Settings()
        for index in range(start + 1, min(len(log.lines), start + 1 + _MAX_ARGUMENTS)):
            row = _ARGUMENT.match(log.lines[index])
            if row is None:
                break
            settings.put(row.group(1), parse_scalar(row.group(2)), log.cite(index))
        if "per_device_train_batch_size" not in settings.values:
            continue
        found = Facts()
        trainer_settings_facts(found, settings)
        take_facts(facts, found)
        for name in ("bf16", "fp16"):
            given = settings.values.get(name)
            if given is not None and given.value is True:
                facts.set("parallelism.precision", name, given.source)
        return


def read_hf_lines(log: LogView, facts: Facts) -> None:
    """The Trainer's ``Running training`` block, accelerate's state and LLaMA-Factory's process
    line (module docstring); the first of each."""
    for marker, field in _HF_LINES:
        found = log.first(marker)
        if found is not None and positive_int(found[1].group(1).replace(",", "")):
            facts.set(field, positive_int(found[1].group(1).replace(",", "")), log.cite(found[0]))
    mixed = log.first(_MIXED_PRECISION)
    if mixed is not None and precision_name(mixed[1].group(1)):
        facts.set("parallelism.precision", precision_name(mixed[1].group(1)), log.cite(mixed[0]))
    process = log.first(_PROCESS_LINE)
    if process is not None:
        index, match = process
        facts.set("hardware.num_gpus", int(match.group(1)), log.cite(index))
        if precision_name(match.group(2)):
            facts.set("parallelism.precision", precision_name(match.group(2)), log.cite(index))


def _json_block(log: LogView, start: int, facts: Facts) -> ConfigTree | None:
    """The indented JSON object opened by ``{`` at the end of line ``start`` (closed by a line
    ``}``), each key cited by its log line; None (noted) when it does not parse."""
    end = next(
        (
            index
            for index in range(start + 1, min(len(log.lines), start + 1 + _MAX_JSON_LINES))
            if log.lines[index].rstrip() == "}"
        ),
        None,
    )
    if end is None:
        return None
    text = "\n".join(["{", *log.lines[start + 1 : end + 1]])
    try:
        tree = load_config(text, "log", "json")
    except SpecError as exc:
        facts.note(f"{log.cite(start)}: the JSON printed there is not read ({exc.message})")
        return None
    lines = {key: start + line for key, line in tree.lines.items()}
    return ConfigTree(tree.data, "log", lines)


def _mesh(log: LogView, facts: Facts) -> None:
    found = log.first(_MESH)
    if found is None:
        return
    index, match = found
    degrees = {
        key: int(value)
        for key, _, value in (pair.partition("=") for pair in match.group(1).split(", "))
    }
    source = log.cite(index)
    for key, field in (
        ("pp", "parallelism.pipeline_parallel"),
        ("cp", "parallelism.context_parallel"),
        ("tp", "parallelism.tensor_parallel"),
        ("ep", "parallelism.expert_parallel"),
    ):
        if degrees.get(key, 0) >= 1:
            facts.set(field, degrees[key], source)
    if degrees.get("ep", 1) > 1 and degrees.get("etp", 0) >= 1:
        facts.set("parallelism.expert_tensor_parallel", degrees["etp"], source)
    replicate, shard = degrees.get("dp_replicate", 0), degrees.get("dp_shard", 0)
    if replicate >= 1 and shard >= 1:
        facts.set("parallelism.data_parallel", replicate * shard, source)
        if shard > 1:
            facts.set("launch.fsdp_shard", shard, source)
        world = replicate * shard
        for key in ("pp", "cp", "tp"):
            world *= max(1, degrees.get(key, 1))
        facts.set("hardware.num_gpus", world, source)


def _model_args(log: LogView, facts: Facts) -> None:
    found = log.first(_MODEL_ARGS)
    if found is None:
        return
    index, match = found
    tree = _json_block(log, index, facts)
    if tree is None:
        return
    name, flavor = match.group(1), match.group(2)
    args = {str(k): v for k, v in tree.data.items() if k != "moe_args"}
    args.update({str(k): v for k, v in mapping_of(tree.data.get("moe_args")).items()})
    kind = str(family_of(load_data("torchtitan.yaml"), name).get("kind", ""))
    source = f"{log.cite(index)} (model args of {name} {flavor})"
    facts.set("launch.model_name", f"{name} {flavor}", log.cite(index))
    for field, value in model_args_fields(kind, args).items():
        facts.set(field, value, source)


def read_torchtitan_lines(log: LogView, facts: Facts) -> None:
    """torchtitan's printed job config, model args, device mesh and trainer line (module
    docstring), the later ones over the earlier (they are resolved further)."""
    config = log.first(_JOB_CONFIG)
    if config is not None:
        tree = _json_block(log, config[0], facts)
        if tree is not None:
            found = Facts()
            torchtitan_config_facts(found, tree)
            take_facts(facts, found)
    _model_args(log, facts)
    _mesh(log, facts)
    trainer = log.first(_TRAINER)
    if trainer is not None:
        index, match = trainer
        pipelined = (facts.int("parallelism.pipeline_parallel") or 1) > 1 or facts.has(
            "parallelism.pipeline_batch_size"
        )
        if pipelined:
            _pipeline_microbatch(log, facts, int(match.group(1)))
        for group, field in (
            (1, "parallelism.pipeline_batch_size" if pipelined else "parallelism.micro_batch_size"),
            (2, "parallelism.global_batch_size"),
            (3, "launch.gradient_accumulation"),
            (4, "model.seq_length"),
            (5, "training.train_iters"),
        ):
            facts.set(field, int(match.group(group)), log.cite(index))


def _pipeline_microbatch(log: LogView, facts: Facts, local: int) -> None:
    """Under PP: the micro batch = the local batch / the schedule line's microbatch count."""
    found = log.first(_PP_SCHEDULE)
    if found is None:
        return
    index, match = found
    count = int(match.group(1))
    if count > 0 and local % count == 0:
        facts.set("parallelism.micro_batch_size", local // count, log.cite(index))
