"""LLaMA-Factory launches: ``llamafactory-cli train cfg.yaml key=value ...`` (or ``lmf``), and
``src/train.py cfg.yaml`` under ``torchrun`` / ``deepspeed`` / ``accelerate``.

Settings resolve as LLaMA-Factory resolves them (``hparams/parser.py`` ``read_args``): the yaml
(or json) file, then ``key=value`` overrides merged over it; without a config file, Hugging Face
``--key value`` flags. What no source sets takes the defaults of LLaMA-Factory's argument classes
and the Hugging Face ``TrainingArguments`` (``planner/launch/data/llamafactory.yaml``, each with
its repo, path and commit).

GPUs: ``llamafactory-cli train`` starts ``torchrun`` itself when ``FORCE_TORCHRUN`` (or
``USE_MCA``) is set or more than one device is visible (``launcher.py``): ``NNODES`` nodes x
``NPROC_PER_NODE`` processes, the latter defaulting to the visible devices
(``CUDA_VISIBLE_DEVICES`` entries, else the node's GPUs). ``USE_MCA=1`` selects the
mcore_adapter Megatron backend: tensor / pipeline / context / expert sizes from the yaml, data
parallel = world / (TP x PP x CP), and the global batch = micro x accumulation x that data
parallel size (expert parallelism does not divide it).

Without mcore_adapter or Megatron-Bridge the model runs ``transformers``' own code for its
``model_type``, whose separate or fused projections are stated as
:mod:`planner.launch.model_code` gives them (not with ``use_unsloth``, which patches it).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.errors import SpecError
from planner.launch.configs import ConfigTree, dotted_overrides, read_config
from planner.launch.data import load_data
from planner.launch.model_code import state_transformers_projections
from planner.launch.models import resolve_model
from planner.launch.reader import ReadContext
from planner.launch.readers.hf_args import flag_args
from planner.launch.readers.hf_parallel import (
    DeepSpeedConfig,
    allocated_world,
    apply_sharding,
    deepspeed_inline,
    fsdp_zero_stage,
    is_hybrid,
    read_accelerate,
    read_deepspeed,
)
from planner.launch.types import Facts, Invocation, Sourced, resolve_path
from planner.launch.values import PURE_BF16_STATES, as_bool, positive_int

__all__ = ["READER", "LlamaFactoryReader"]

_COMMANDS = frozenset({"llamafactory-cli", "lmf"})
_MODULES = frozenset({"llamafactory.cli", "llamafactory.launcher"})
_SCRIPTS = ("src/train.py", "llamafactory/launcher.py")
_CONFIG_EXTENSIONS = (".yaml", ".yml", ".json")
_TRUE = frozenset({"true", "y", "1"})
_OWN_FLAGS = frozenset({"stage", "finetuning_type", "template", "cutoff_len"})
_BOOL_FLAGS = frozenset({"bf16", "fp16", "pure_bf16", "fp8", "do_train", "packing"})
_LORA_MODULES = {
    "linear_qkv": ("q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "c_attn", "wqkv"),
    "linear_proj": ("o_proj", "dense", "wo", "out_proj"),
    "linear_fc1": ("gate_proj", "up_proj", "gate_up_proj", "w1", "w3", "dense_h_to_4h"),
    "linear_fc2": ("down_proj", "w2", "dense_4h_to_h"),
}
"""Hugging Face module names LoRA adapts -> the scenario format's layer names."""
_LORA_TARGETS = {module: layer for layer, names in _LORA_MODULES.items() for module in names}
_ALL_TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")


@dataclass(slots=True)
class _Settings:
    """The program's settings: the config file (``tree``) under the command-line ``overrides``
    (key -> (value, the argument))."""

    tree: ConfigTree | None
    overrides: dict[str, tuple[object, str]] = field(default_factory=dict)

    def get(self, key: str) -> tuple[object, str] | None:
        """``(value, source)`` of ``key``, the override first; None when neither sets it."""
        if key in self.overrides:
            value, argument = self.overrides[key]
            return value, f"override: {argument}"
        if self.tree is not None and self.tree.has(key):
            return self.tree.get(key), self.tree.where(key)
        return None

    def value(self, key: str) -> object:
        found = self.get(key)
        return None if found is None else found[0]


def _default(table: str, key: str) -> tuple[object, str]:
    """A documented default from ``data/llamafactory.yaml`` with its citation."""
    data = load_data("llamafactory.yaml")
    entries = data.get(table)
    entry = entries.get(key) if isinstance(entries, Mapping) else None
    if not isinstance(entry, Mapping):
        raise SpecError("planner/launch/data/llamafactory.yaml", f"{table}.{key} is missing")
    repo, path, commit = entry.get("repo"), entry.get("path"), entry.get("commit")
    framework = "LLaMA-Factory " + str(data.get("version", ""))
    if repo == "huggingface/transformers":
        framework = "transformers (TrainingArguments, used by LLaMA-Factory)"
    elif repo == "alibaba/ROLL":
        framework = "mcore_adapter (LLaMA-Factory USE_MCA backend)"
    return entry.get("value"), f"default of {framework} ({repo}/{path}@{str(commit)[:7]})"


def _truthy(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    return isinstance(value, str) and value.strip().lower() in _TRUE


def _env_enabled(env: Mapping[str, str], name: str) -> bool:
    """LLaMA-Factory's ``is_env_enabled``: ``true``, ``y`` or ``1`` (any case)."""
    return env.get(name, "0").strip().lower() in _TRUE


class LlamaFactoryReader:
    """Reads LLaMA-Factory training launches (module docstring)."""

    name = "llamafactory"

    def recognises(self, invocation: Invocation) -> bool:
        """``llamafactory-cli train ...`` / ``lmf train ...``, ``python -m llamafactory.cli
        train ...``, or LLaMA-Factory's ``src/train.py`` given a yaml/json config or its own
        flags (``--stage``, ``--finetuning_type``, ``--template``, ``--cutoff_len``)."""
        program = invocation.program
        if posixpath.basename(program) in _COMMANDS or program in _MODULES:
            return bool(invocation.args) and invocation.args[0] == "train"
        if not program.endswith(_SCRIPTS) or not invocation.args:
            return False
        if invocation.args[0].endswith(_CONFIG_EXTENSIONS):
            return True
        return bool(set(flag_args(invocation.args).values) & _OWN_FLAGS)

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the LLaMA-Factory run trains. Raises ``SourceError`` / ``SpecError`` when the
        config file or the DeepSpeed config it names cannot be read or parsed."""
        facts = Facts()
        facts.set("training.framework", "other", "launch: LLaMA-Factory")
        args = list(invocation.args)
        console = bool(args) and args[0] == "train"
        if console:
            args = args[1:]
        settings = self._settings(args, invocation, context)
        env = invocation.env
        mca = _env_enabled(env, "USE_MCA")
        bridge = _env_enabled(env, "USE_MEGATRON_BRIDGE")
        if _env_enabled(env, "USE_V1"):
            facts.note("USE_V1=1 selects LLaMA-Factory's v1 launcher; read with the v0 keys")
        if bridge:
            facts.note(
                "USE_MEGATRON_BRIDGE=1: the Megatron-Bridge backend's parallel keys are "
                "not read; data parallel assumed over every GPU"
            )
        self._model(settings, invocation, context, facts)
        self._sequence(settings, facts)
        self._batch(settings, facts)
        self._mode(settings, facts)
        self._precision(settings, facts, mca=mca)
        if console:
            self._world(invocation, context, facts, mca=mca)
        if mca:
            self._megatron(settings, facts)
        else:
            self._sharding(settings, invocation, context, facts)
            self._pure_bf16(settings, facts)
        if not (mca or bridge):
            self._model_code(settings, facts)
        return facts

    def _model_code(self, settings: _Settings, facts: Facts) -> None:
        """The ``transformers`` model code's projections (:mod:`planner.launch.model_code`),
        unless ``use_unsloth`` swaps in Unsloth's patched model code."""
        found = settings.get("use_unsloth")
        if found is not None and as_bool(found[0]):
            facts.note(
                f"use_unsloth ({found[1]}): Unsloth's patched model code; its projections "
                "are not stated"
            )
            return
        state_transformers_projections(facts)

    def _settings(self, args: list[str], invocation: Invocation, context: ReadContext) -> _Settings:
        if args and args[0].endswith(_CONFIG_EXTENSIONS):
            path = resolve_path(args[0], invocation.cwd)
            tree = read_config(context.files, path)
            overrides = {key: (value, arg) for key, value, arg in dotted_overrides(args[1:])}
            return _Settings(tree, overrides)
        return _Settings(None, dict(flag_args(args, bool_keys=_BOOL_FLAGS).values))

    def _model(
        self, settings: _Settings, invocation: Invocation, context: ReadContext, facts: Facts
    ) -> None:
        found = settings.get("model_name_or_path")
        if found is None or not isinstance(found[0], str):
            facts.note("model_name_or_path is not set: the model is unknown")
            return
        reference, source = found[0], found[1]
        resolve_model(
            reference, facts=facts, files=context.files, cwd=invocation.cwd, source=source
        )
        if not facts.has("launch.model_name"):
            facts.set("launch.model_name", reference, source)

    def _sequence(self, settings: _Settings, facts: Facts) -> None:
        """``cutoff_len`` caps every sample (and is the block length when packing)."""
        found = settings.get("cutoff_len")
        length, source = found if found is not None else _default("defaults", "cutoff_len")
        facts.set("model.seq_length", positive_int(length), source)
        if found is None:
            # a documented default, over the model's context length the model lookup assumed
            facts.assumed.add("model.seq_length")

    def _batch(self, settings: _Settings, facts: Facts) -> None:
        for key, name in (
            ("per_device_train_batch_size", "parallelism.micro_batch_size"),
            ("gradient_accumulation_steps", "launch.gradient_accumulation"),
        ):
            found = settings.get(key)
            if found is None:
                value, source = _default("defaults", key)
                facts.default(name, positive_int(value), source)
            else:
                facts.set(name, positive_int(found[0]), found[1])
        steps = settings.get("max_steps")
        count = positive_int(steps[0]) if steps is not None else None
        if steps is not None and count:
            facts.set("training.train_iters", count, steps[1])
        else:
            facts.note(
                "training length is epoch-based (num_train_epochs over the dataset): "
                "optimizer steps depend on the dataset size"
            )

    def _mode(self, settings: _Settings, facts: Facts) -> None:
        stage_found = settings.get("stage")
        stage, stage_source = stage_found or _default("defaults", "stage")
        kind_found = settings.get("finetuning_type")
        kind, kind_source = kind_found or _default("defaults", "finetuning_type")
        if kind in {"lora", "oft"}:
            facts.set("training.mode", "lora", kind_source)
            rank = settings.get("lora_rank")
            value, source = rank if rank is not None else _default("defaults", "lora_rank")
            facts.set("training.lora_rank", positive_int(value), source)
            target = settings.get("lora_target")
            names, where = target if target is not None else _default("defaults", "lora_target")
            targets = _lora_targets(names)
            if targets:
                facts.set("training.lora_targets", targets, where)
            if kind == "oft":
                facts.note("finetuning_type oft: orthogonal adapters, described as LoRA")
            if settings.value("quantization_bit") is not None:
                facts.note("quantized base model (QLoRA): the frozen weights are not bf16")
        elif stage == "pt":
            facts.set("training.mode", "pretrain", stage_source)
        else:
            facts.set("training.mode", "sft", kind_source)
            if kind == "freeze":
                facts.note(
                    "finetuning_type freeze: only the last layers train; described as "
                    "full fine-tuning"
                )
        if stage not in {"pt", "sft"}:
            facts.note(
                f"stage {stage}: preference/reward training runs extra forward passes "
                "(reference or reward model) the scenario does not model"
            )

    def _precision(self, settings: _Settings, facts: Facts, *, mca: bool) -> None:
        fp8 = settings.get("fp8")
        recipe = settings.get("fp8_recipe")
        if mca and recipe is not None and str(recipe[0]).lower() == "mxfp8":
            facts.set("parallelism.precision", "mxfp8", recipe[1])
            return
        if fp8 is not None and (_truthy(fp8[0]) or (mca and isinstance(fp8[0], str))):
            facts.set("parallelism.precision", "fp8", fp8[1])
            return
        for key, precision in (("pure_bf16", "bf16"), ("bf16", "bf16"), ("fp16", "fp16")):
            found = settings.get(key)
            if found is not None and _truthy(found[0]):
                facts.set("parallelism.precision", precision, found[1])
                return
        facts.note(
            "neither bf16 nor fp16 is set: LLaMA-Factory trains in fp32, which the "
            "scenario format does not model"
        )

    def _pure_bf16(self, settings: _Settings, facts: Facts) -> None:
        """``pure_bf16``: the trainable parameters stay bf16 ("Pure bf16 / BAdam detected,
        remaining trainable params in half precision", where otherwise they are upcast to fp32,
        ``src/llamafactory/model/adapter.py``; the model loads in bf16, ``hparams/parser.py``;
        hiyouga/LLaMA-Factory @ ff6d4d12e) and train without AMP, so ``torch.optim.AdamW``
        updates the bf16 weights (no master) with bf16 moments (``zeros_like(p)``) and bf16
        gradients. Under DeepSpeed (ZeRO 0-2: LLaMA-Factory refuses ZeRO-3 with it) the
        engine's own optimizer wrapper decides, so only a note."""
        found = settings.get("pure_bf16")
        if found is None or not _truthy(found[0]):
            return
        if facts.get("training.framework") == "deepspeed":
            facts.note(
                "pure_bf16 under DeepSpeed: the optimizer's master and moments follow the "
                "DeepSpeed config, read as the framework's (fp32)"
            )
            return
        for name, value in PURE_BF16_STATES.items():
            facts.set(name, value, found[1])

    def _world(
        self, invocation: Invocation, context: ReadContext, facts: Facts, *, mca: bool
    ) -> None:
        """The processes ``llamafactory-cli train`` starts (``launcher.py``): one, or
        ``torchrun`` with NNODES x NPROC_PER_NODE (default: the visible devices)."""
        env = invocation.env
        visible = env.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            devices: int | None = len([item for item in visible.split(",") if item.strip()])
            device_source = "launch: CUDA_VISIBLE_DEVICES"
        else:
            devices = allocated_world(context)[1]
            device_source = "launch: the node's GPUs"
        distributed = mca or any(
            _env_enabled(env, name) for name in ("FORCE_TORCHRUN", "USE_MEGATRON_BRIDGE")
        )
        if not distributed and devices is not None and devices > 1:
            distributed = not (_env_enabled(env, "USE_RAY") or _env_enabled(env, "USE_KT"))
        if not distributed:
            if devices is not None:
                facts.set("hardware.num_gpus", 1, f"derived: one process ({device_source})")
                facts.set("hardware.gpus_per_node", max(devices, 1), device_source)
                facts.set("launch.num_nodes", 1, device_source)
            return
        nodes_value, nodes_source = _default("defaults", "NNODES")
        if env.get("NNODES") is not None:
            nodes_value, nodes_source = env["NNODES"], "launch: NNODES"
        per_node, per_node_source = devices, device_source
        if env.get("NPROC_PER_NODE") is not None:
            per_node = positive_int(env["NPROC_PER_NODE"])
            per_node_source = "launch: NPROC_PER_NODE"
        nodes = positive_int(nodes_value)
        if not nodes or not per_node:
            return
        world = f"derived: NNODES x NPROC_PER_NODE ({nodes_source}; {per_node_source})"
        facts.set("launch.world_size", nodes * per_node, world)
        facts.set("hardware.num_gpus", nodes * per_node, world)
        facts.set("hardware.gpus_per_node", per_node, per_node_source)
        facts.set("launch.num_nodes", nodes, nodes_source)

    def _megatron(self, settings: _Settings, facts: Facts) -> None:
        """mcore_adapter's Megatron layout (``USE_MCA=1``)."""
        facts.set("training.framework", "megatron", "launch: USE_MCA=1 (mcore_adapter)")
        for key, name in (
            ("tensor_model_parallel_size", "parallelism.tensor_parallel"),
            ("pipeline_model_parallel_size", "parallelism.pipeline_parallel"),
            ("context_parallel_size", "parallelism.context_parallel"),
            ("expert_model_parallel_size", "parallelism.expert_parallel"),
        ):
            found = settings.get(key)
            if found is not None and found[0] is not None:
                facts.set(name, positive_int(found[0]), found[1])
            else:
                value, source = _default("mca_defaults", key)
                facts.default(name, value, source)
        for key, name in (
            ("expert_tensor_parallel_size", "parallelism.expert_tensor_parallel"),
            ("virtual_pipeline_model_parallel_size", "parallelism.virtual_pipeline"),
        ):
            found = settings.get(key)
            if found is not None and positive_int(found[0]):
                facts.set(name, positive_int(found[0]), found[1])
        found = settings.get("sequence_parallel")
        if found is not None:
            facts.set("parallelism.sequence_parallel", _truthy(found[0]), found[1])
        found = settings.get("recompute_granularity")
        if found is not None and found[0] in {"full", "selective"}:
            facts.set("parallelism.recompute", found[0], found[1])
        found = settings.get("use_distributed_optimizer")
        if found is None:
            value, source = _default("mca_defaults", "use_distributed_optimizer")
            facts.default("parallelism.zero_stage", 1 if _truthy(value) else 0, source)
        else:
            facts.set("parallelism.zero_stage", 1 if _truthy(found[0]) else 0, found[1])
        facts.note(
            "Megatron backend: global batch = micro x gradient accumulation x "
            "world / (TP x PP x CP); expert parallelism does not divide it"
        )

    def _sharding(
        self, settings: _Settings, invocation: Invocation, context: ReadContext, facts: Facts
    ) -> None:
        """ZeRO stage from the yaml's DeepSpeed config, FSDP from its ``fsdp`` argument, else
        the accelerate config of an ``accelerate launch``, else DDP."""
        found = settings.get("deepspeed")
        config: DeepSpeedConfig | None = None
        if found is not None and isinstance(found[0], Mapping):
            config = deepspeed_inline(found[0], found[1])
        elif found is not None and isinstance(found[0], str) and found[0]:
            config = read_deepspeed(context.files, resolve_path(found[0], invocation.cwd))
        if found is not None and config is not None:
            _apply_deepspeed(config, Sourced("deepspeed", found[1]), facts)
            return
        fsdp = settings.get("fsdp")
        text = str(fsdp[0]).lower() if fsdp is not None and fsdp[0] else ""
        strategy = next(
            (name for name in ("hybrid_shard", "full_shard", "shard_grad_op") if name in text),
            None,
        )
        if fsdp is not None and strategy is not None:
            self._fsdp(strategy.upper(), fsdp[1], context, facts)
            return
        if invocation.launcher == "accelerate":
            setup = read_accelerate(context.files, invocation.launcher_args, invocation.cwd)
            kind = setup.distributed_type
            if kind is not None and kind.value == "DEEPSPEED":
                backend = Sourced("deepspeed", kind.source)
                if setup.deepspeed_file is not None:
                    config = read_deepspeed(context.files, str(setup.deepspeed_file.value))
                    _apply_deepspeed(config, backend, facts)
                else:
                    zero = setup.zero_stage
                    apply_sharding(facts, backend=backend, zero_stage=zero, fsdp_shard=None)
                return
            if kind is not None and kind.value == "FSDP" and setup.fsdp_strategy is not None:
                self._fsdp(setup.fsdp_strategy.value, setup.fsdp_strategy.source, context, facts)
                return
        apply_sharding(
            facts,
            backend=Sourced("ddp", "derived: no deepspeed or fsdp setting"),
            zero_stage=None,
            fsdp_shard=None,
        )

    def _fsdp(self, strategy: object, source: str, context: ReadContext, facts: Facts) -> None:
        """An FSDP strategy: its ZeRO stage; hybrid strategies shard within a node."""
        shard: Sourced | None = None
        if is_hybrid(strategy):
            per_node = facts.int("hardware.gpus_per_node") or allocated_world(context)[1]
            if per_node:
                shard = Sourced(per_node, f"derived: {strategy} shards within a node")
        stage = fsdp_zero_stage(strategy)
        apply_sharding(
            facts,
            backend=Sourced("fsdp", source),
            zero_stage=Sourced(stage, source) if stage is not None else None,
            fsdp_shard=shard,
        )


def _apply_deepspeed(config: DeepSpeedConfig, backend: Sourced, facts: Facts) -> None:
    """ZeRO stage and optimizer offload of a DeepSpeed config (its ``auto`` batch fields are
    filled by the Hugging Face Trainer from LLaMA-Factory's arguments, so they are not read)."""
    name = posixpath.basename(config.path)
    stage = config.zero_stage or Sourced(0, f"derived: {name} has no ZeRO stage")
    apply_sharding(facts, backend=backend, zero_stage=stage, fsdp_shard=None)
    if config.offload is not None:
        device = str(config.offload.value).lower()
        facts.set("launch.optimizer_offload", device, config.offload.source)
        facts.note(f"DeepSpeed offloads the optimizer states to {device} ({config.offload.source})")


def _lora_targets(names: object) -> list[str]:
    """LLaMA-Factory ``lora_target`` (``all`` or comma-separated module names) as the scenario
    format's adapted layers; empty when no name is known."""
    if isinstance(names, list):
        items = [str(item).strip() for item in names]
    else:
        items = [item.strip() for item in str(names).split(",")]
    if "all" in items:
        return list(_ALL_TARGETS)
    mapped = {_LORA_TARGETS[item] for item in items if item in _LORA_TARGETS}
    return [target for target in _ALL_TARGETS if target in mapped]


READER = LlamaFactoryReader()
