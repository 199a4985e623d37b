"""Hugging Face Trainer / TRL / accelerate launches: the TRL command line (``trl sft ...``),
scripts that read their arguments with ``HfArgumentParser`` (TRL's ``trl/scripts/sft.py``,
alignment-handbook's ``scripts/run_orpo.py recipe.yaml``, any script or module taking
``--model_name_or_path`` / ``--per_device_train_batch_size``), run by ``accelerate launch``,
``torchrun``, ``deepspeed`` or ``python``.

Each setting is resolved as the Trainer resolves it: the dataclass defaults
(``TrainingArguments``; TRL's trainer configs turn ``bf16`` and ``gradient_checkpointing`` on
and cap sequences at ``max_length``) < the YAML/JSON config (``--config``, or a first
positional config path) < ``--key value`` arguments. The distributed setup
(:mod:`planner.launch.readers.hf_distributed`) comes from the launcher and the accelerate,
DeepSpeed and FSDP configs. Mode: ``lora`` with ``--use_peft`` (rank ``lora_r``), else full
fine-tuning (``sft``; DPO/ORPO/KTO are fine-tuning objectives), ``pretrain`` when the model is
built from ``--config_name`` alone. ``max_steps`` > 0 gives the step count; epoch-based runs
leave it open. The model runs ``transformers``' own code for its ``model_type``, whose
separate or fused projections are stated as :mod:`planner.launch.model_code` gives them.

Defaults and their sources: ``planner/launch/data/hf.yaml``.
"""

from __future__ import annotations

import posixpath
import re

from planner.launch.configs import ConfigTree, read_config
from planner.launch.data import load_data
from planner.launch.model_code import state_transformers_projections
from planner.launch.models import resolve_model
from planner.launch.reader import ReadContext
from planner.launch.readers.hf_args import (
    Flags,
    Settings,
    flag_args,
    hf_default,
)
from planner.launch.readers.hf_distributed import apply_distributed
from planner.launch.types import Facts, Invocation, resolve_path
from planner.launch.values import PURE_BF16_STATES, as_bool, as_int, mapping_of, positive_int

__all__ = [
    "HF_LORA_MODULES",
    "READER",
    "TRL_COMMANDS",
    "HfTrainerReader",
    "lora_targets",
    "script_kind",
    "trainer_settings_facts",
]

TRL_COMMANDS = frozenset(
    {"sft", "dpo", "orpo", "kto", "reward", "grpo", "rloo", "gkd", "online_dpo", "xpo", "cpo"}
)
"""``trl <command>`` subcommands that train (TRL's ``trl/cli``)."""

_TRL_KINDS = ("sft", "dpo", "orpo", "kto", "reward")
"""Trainer configs whose ``max_length`` default ``hf.yaml`` holds."""
_PREFERENCE = frozenset({"dpo", "orpo", "kto", "cpo"})
_SCRIPT_KIND = re.compile(r"^(?:run_)?(sft|dpo|orpo|kto|reward|grpo|rloo|cpt|cpo|gkd)$")
_MARKERS = ("model_name_or_path", "per_device_train_batch_size")
_BOOL_KEYS = frozenset(
    {
        "packing",
        "use_peft",
        "bf16",
        "fp16",
        "gradient_checkpointing",
        "load_in_4bit",
        "load_in_8bit",
        "push_to_hub",
        "do_train",
        "do_eval",
        "use_liger_kernel",
        "overwrite_output_dir",
        "trust_remote_code",
        "padding_free",
        "tf32",
    }
)
_ACCELERATE_KEYS = (
    "config_file",
    "num_processes",
    "num_machines",
    "mixed_precision",
    "use_deepspeed",
    "use_fsdp",
    "multi_gpu",
    "zero_stage",
    "deepspeed_config_file",
    "fsdp_version",
    "fsdp_sharding_strategy",
    "accelerate_config",
)
"""Options ``trl <command>`` hands to ``accelerate launch`` (arguments its script parser does
not take; ``accelerate_config`` names a config file or a TRL built-in config)."""
_SEQ_KEYS = ("max_length", "max_seq_length", "block_size", "model_max_length", "max_seq_len")
"""Sequence caps in precedence order: TRL ``max_length`` (``max_seq_length`` in older TRL),
``run_clm``'s ``block_size``, tokenizer ``model_max_length``."""


def script_kind(invocation: Invocation) -> tuple[str, tuple[str, ...], bool]:
    """``(trainer kind, the script's own arguments, is the trl CLI)``: the kind is a TRL
    trainer (``sft``, ``dpo``, ``orpo``, ...) named by the command or the script's name
    (``run_orpo.py``, ``trl.scripts.sft``; ``cpt`` trains with SFTConfig), else ``""`` (a
    plain Trainer script)."""
    program = invocation.program
    if posixpath.basename(program) == "trl":
        command = invocation.args[0] if invocation.args else ""
        return command, tuple(invocation.args[1:]), True
    stem = posixpath.basename(program)
    stem = stem[:-3] if stem.endswith(".py") else stem.rsplit(".", 1)[-1]
    matched = _SCRIPT_KIND.match(stem)
    kind = matched.group(1) if matched else ""
    return ("sft" if kind == "cpt" else kind), tuple(invocation.args), False


def _is_config(path: str) -> bool:
    return path.lower().endswith((".yaml", ".yml", ".json"))


class HfTrainerReader:
    """The ``hf_trainer`` reader (module docstring)."""

    name = "hf_trainer"

    def recognises(self, invocation: Invocation) -> bool:
        """``trl <training command>``; a ``trl.scripts.*`` module; a script or module given
        ``--model_name_or_path`` or ``--per_device_train_batch_size``; a TRL /
        alignment-handbook script (``sft.py``, ``run_orpo.py``, ...) given a config file."""
        program = invocation.program
        if posixpath.basename(program) == "trl":
            return bool(invocation.args) and invocation.args[0] in TRL_COMMANDS
        if program.startswith("trl.scripts."):
            return True
        if not (program.endswith(".py") or re.match(r"^[A-Za-z_][\w.]*$", program)):
            return False
        for arg in invocation.args:
            if arg.startswith("--") and arg[2:].partition("=")[0].replace("-", "_") in _MARKERS:
                return True
        kind, args, _ = script_kind(invocation)
        has_config = (bool(args) and _is_config(args[0])) or "--config" in args
        return bool(kind) and has_config

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the invocation trains (module docstring). Raises ``SourceError`` /
        ``SpecError`` when a config file it names cannot be read or parsed."""
        facts = Facts()
        kind, args, trl_cli = script_kind(invocation)
        flags = flag_args(args, bool_keys=_BOOL_KEYS)
        settings = _settings(kind, _config_file(flags, invocation, context), flags)
        _model(facts, settings, invocation, context)
        _batch_and_steps(facts, settings)
        _mode(facts, settings, kind)
        apply_distributed(
            facts,
            settings,
            options=_accelerate_options(settings, invocation, trl_cli, facts),
            invocation=invocation,
            context=context,
        )
        _bf16_model(facts, settings)
        _optimizer_implementation(facts, settings)
        return facts


_TORCH_ADAM = frozenset({"adamw_torch", "adamw_torch_fused", "adamw_hf"})
"""``TrainingArguments.optim`` values that step ``torch.optim.AdamW`` (or its twin), whose
moments take the parameters' dtype."""


_OPTIM_IMPLEMENTATION = {"adamw_torch": "foreach", "adamw_torch_fused": "fused"}
"""``TrainingArguments.optim`` -> ``parallelism.optimizer_implementation``: ``adamw_torch`` builds
``torch.optim.AdamW`` without ``foreach`` / ``fused`` (``foreach`` by default on CUDA,
``_default_to_fused_or_foreach`` in ``torch/optim/optimizer.py``), ``adamw_torch_fused`` adds
``fused=True`` (huggingface/transformers ``src/transformers/trainer_optimizer.py``
``_get_adamw_torch`` @ ``0a14d8d782``)."""


def _optimizer_implementation(facts: Facts, settings: Settings) -> None:
    """``parallelism.optimizer_implementation`` from an ``optim`` the job sets
    (``_OPTIM_IMPLEMENTATION``). Unset, ``TrainingArguments`` picks ``adamw_torch_fused`` with
    torch >= 2.8 and ``adamw_torch`` before (``training_args.py`` @ ``00349ae87e``): the torch
    release decides, so the profile's (no foreach list) stands. Under DeepSpeed the engine
    steps the optimizer of its own config, or wraps the Trainer's: left to the framework's."""
    if not settings.explicit("optim") or facts.get("training.framework") == "deepspeed":
        return
    chosen = _OPTIM_IMPLEMENTATION.get(str(settings.get("optim")))
    if chosen is not None:
        facts.set("parallelism.optimizer_implementation", chosen, settings.values["optim"].source)


def _bf16_model(facts: Facts, settings: Settings) -> None:
    """A full fine-tune of a model loaded in bf16 (TRL's ``ModelConfig.dtype``, ``float32`` by
    default: huggingface/trl ``trl/trainer/model_config.py`` @ f2cd577; ``torch_dtype`` in
    older TRL and the transformers example scripts) trains in pure bf16 outside DeepSpeed:
    accelerate's bf16 mixed precision is ``torch.autocast`` only (``native_amp``, no parameter
    copy; huggingface/accelerate ``src/accelerate/accelerator.py`` @ 9f71f0b), so AdamW
    updates the bf16 weights (no master) with bf16 moments and bf16 gradients
    (``PURE_BF16_STATES``). DeepSpeed's bf16 optimizer and optimizers other than torch's AdamW
    keep states of their own, and LoRA adapters need not take the model's dtype: left to the
    framework's."""
    found = next(
        (settings.values[k] for k in ("dtype", "torch_dtype") if settings.explicit(k)), None
    )
    if found is None or str(found.value).replace("torch.", "") not in {"bfloat16", "bf16"}:
        return
    if facts.get("training.mode") == "lora" or facts.get("parallelism.precision") == "fp16":
        return
    optim = str(settings.get("optim") or "adamw_torch")
    if facts.get("training.framework") == "deepspeed" or optim not in _TORCH_ADAM:
        facts.note(
            f"a bf16 model ({found.source}) under "
            f"{'DeepSpeed' if facts.get('training.framework') == 'deepspeed' else optim}: "
            "the optimizer's master and moments are read as the framework's"
        )
        return
    for name, value in PURE_BF16_STATES.items():
        facts.set(name, value, found.source)


def _config_file(flags: Flags, invocation: Invocation, context: ReadContext) -> ConfigTree | None:
    """The YAML/JSON config the script parses: ``--config`` (TRL's parser) or a first
    positional config path (``HfArgumentParser.parse_yaml_file``, alignment-handbook's
    ``H4ArgumentParser``)."""
    found = flags.get("config")
    path = str(found[0]) if found is not None and isinstance(found[0], str) else None
    if path is None and flags.positionals and _is_config(flags.positionals[0]):
        path = flags.positionals[0]
    if path is None:
        return None
    return read_config(context.files, resolve_path(path, invocation.cwd))


def _settings(kind: str, tree: ConfigTree | None, flags: Flags) -> Settings:
    """Defaults (TrainingArguments, then the TRL config's own) < config file < command line."""
    settings = Settings()
    data = load_data("hf.yaml")
    for name in mapping_of(data.get("training_args")):
        settings.default(name, hf_default(f"training_args.{name}"))
    trl = mapping_of(data.get("trl"))
    if kind:
        for section in ("base", "model"):
            for name in mapping_of(trl.get(section)):
                settings.default(name, hf_default(f"trl.{section}.{name}"))
    if kind in _TRL_KINDS:
        settings.default("max_length", hf_default(f"trl.max_length.{kind}"))
    if tree is not None:
        for key, value in tree.data.items():
            if key != "env":
                settings.put(str(key), value, tree.where(str(key)))
    for key, (value, text) in flags.values.items():
        if key.startswith("no_") and key[3:] in _BOOL_KEYS:
            settings.put(key[3:], False, f"override: {text}")
        elif key != "config":
            settings.put(key, value, f"override: {text}")
    if kind and "bf16" in settings.assumed and as_bool(settings.get("fp16")):
        settings.values.pop("bf16")  # TRL: bf16 defaults to `not fp16`
        settings.assumed.discard("bf16")
    return settings


def _model(facts: Facts, settings: Settings, invocation: Invocation, context: ReadContext) -> None:
    """The model (``model_name_or_path``), its training sequence length and quantisation."""
    found = settings.values.get("model_name_or_path")
    if found is not None and isinstance(found.value, str):
        resolve_model(
            found.value, facts=facts, files=context.files, cwd=invocation.cwd, source=found.source
        )
        if not facts.has("launch.model_name"):
            facts.set("launch.model_name", found.value, found.source)
        state_transformers_projections(facts)
    _sequence(facts, settings)
    if as_bool(settings.get("load_in_4bit")) or as_bool(settings.get("load_in_8bit")):
        facts.note("the base model is loaded quantised (bitsandbytes) and frozen under LoRA")


def _sequence(facts: Facts, settings: Settings) -> None:
    """The training sequence: the first sequence cap (:data:`_SEQ_KEYS` order) the launch
    sets, else the first one a default gives."""
    explicit = [k for k in _SEQ_KEYS if settings.explicit(k) and positive_int(settings.get(k))]
    chosen = (
        explicit[0]
        if explicit
        else next((k for k in _SEQ_KEYS if positive_int(settings.get(k))), None)
    )
    if chosen is not None:
        settings.record(facts, "model.seq_length", chosen, positive_int(settings.get(chosen)))


def trainer_settings_facts(facts: Facts, settings: Settings) -> None:
    """What a resolved set of ``TrainingArguments`` values says (the dump a job's log prints):
    the sequence cap, per-device batch, gradient accumulation, steps and recomputation, as
    :class:`HfTrainerReader` reads them."""
    _sequence(facts, settings)
    _batch_and_steps(facts, settings)


def _batch_and_steps(facts: Facts, settings: Settings) -> None:
    """Per-device batch, gradient accumulation, steps and activation recomputation."""
    settings.record(facts, "parallelism.micro_batch_size", "per_device_train_batch_size")
    settings.record(facts, "launch.gradient_accumulation", "gradient_accumulation_steps")
    steps = positive_int(settings.get("max_steps"))
    if steps is not None:
        settings.record(facts, "training.train_iters", "max_steps", steps)
    else:
        facts.note(
            "max_steps is not positive: the run trains num_train_epochs over its dataset, so "
            "the step count depends on the data (train_iters left open)"
        )
    checkpointing = as_bool(settings.get("gradient_checkpointing"))
    if checkpointing is not None:
        recompute = "full" if checkpointing else "none"
        settings.record(facts, "parallelism.recompute", "gradient_checkpointing", recompute)


def _mode(facts: Facts, settings: Settings, kind: str) -> None:
    """``lora`` with ``use_peft`` (rank ``lora_r``, targets ``lora_target_modules``), else
    full fine-tuning, or pretraining from ``config_name`` alone."""
    peft = settings.values.get("use_peft")
    if peft is not None and as_bool(peft.value):
        facts.set("training.mode", "lora", peft.source)
        settings.record(facts, "training.lora_rank", "lora_r", as_int(settings.get("lora_r")))
        targets = lora_targets(settings.get("lora_target_modules"))
        if targets:
            source = settings.values["lora_target_modules"].source
            facts.set("training.lora_targets", targets, source)
        return
    if settings.explicit("config_name") and not settings.explicit("model_name_or_path"):
        facts.set("training.mode", "pretrain", settings.values["config_name"].source)
        return
    trainer = f"TRL {kind.upper()}" if kind else "the Trainer"
    facts.set("training.mode", "sft", f"derived: {trainer} trains every weight (no use_peft)")
    if kind in _PREFERENCE:
        facts.note(f"{kind.upper()} is a preference objective: counted as full fine-tuning")


_TARGETS = {
    "q_proj": "linear_qkv",
    "k_proj": "linear_qkv",
    "v_proj": "linear_qkv",
    "qkv_proj": "linear_qkv",
    "o_proj": "linear_proj",
    "gate_proj": "linear_fc1",
    "up_proj": "linear_fc1",
    "gate_up_proj": "linear_fc1",
    "down_proj": "linear_fc2",
}
_ALL_TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
HF_LORA_MODULES = tuple(_TARGETS)
"""The Hugging Face projection names :func:`lora_targets` maps to the scenario's targets."""


def lora_targets(value: object) -> list[str]:
    """LoRA target modules (a list, or names separated by commas or spaces; Hugging Face
    module names such as ``q_proj``) as the scenario's targets; ``all-linear``: all four;
    ``[]`` when none is known (the library's per-model default applies)."""
    names = value if isinstance(value, list) else str(value or "").replace(",", " ").split()
    words = [str(name).strip() for name in names if str(name).strip()]
    if any(word.lower() in {"all-linear", "all_linear"} for word in words):
        return list(_ALL_TARGETS)
    found = {_TARGETS[word] for word in words if word in _TARGETS}
    return [target for target in _ALL_TARGETS if target in found]


def _accelerate_options(
    settings: Settings, invocation: Invocation, trl_cli: bool, facts: Facts
) -> dict[str, str] | None:
    """The ``accelerate launch`` options of the run, or None when accelerate does not launch
    it. ``trl <command>`` launches accelerate itself with the arguments (and config keys) its
    script parser does not take."""
    if invocation.launcher == "accelerate":
        return {str(key): str(value) for key, value in invocation.launcher_args.items()}
    if not trl_cli:
        return None
    options: dict[str, str] = {}
    for key in _ACCELERATE_KEYS:
        value = settings.get(key)
        if value is not None:
            options[key] = "" if value is True else str(value)
    if "config_file" not in options and "accelerate_config" not in options:
        facts.note(
            "trl runs `accelerate launch` with the machine's default accelerate config (not "
            "part of the job): the world size is taken from the allocation"
        )
    return options


READER = HfTrainerReader()
