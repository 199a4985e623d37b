"""NeMo 2.0 launches: ``nemo llm pretrain|finetune --factory <recipe>[(arg=value, ...)]
[options] key=value ...`` (NeMo-Run's CLI over ``nemo.collections.llm`` recipes).

Settings resolve as NeMo-Run builds the run: the recipe factory's published values
(``planner/launch/data/nemo2_recipes.yaml``, NVIDIA/NeMo@8cfedd7: trainer, MegatronStrategy,
data module, precision plugin, model config class), then the factory-call arguments
(``--factory "llama3_70b(num_nodes=128)"``), then the dotted overrides in order
(``trainer.strategy.tensor_model_parallel_size=2``, ``data.micro_batch_size=4``, ``a.b*=2``;
values read as Python literals, as NeMo-Run's ``PythonicParser`` reads them). The factory
string is parsed, never evaluated; no recipe is imported.

Derived: GPUs = ``trainer.num_nodes`` x ``trainer.devices`` (the recipe's, which NeMo-Run
launches whatever the scheduler allocated); the vocabulary is the data module's tokenizer's:
``MockDataModule`` without one builds the Megatron GPT2BPETokenizer (50257), padded to a multiple
of 128 x TP (``nemo/lightning/base.py`` ``get_vocab_size``), unless the model config presets
``vocab_size`` (kept as is). Fine-tuning uses the model's own Hugging Face tokenizer.
Megatron-FSDP (``trainer.strategy.fsdp=megatron``) runs the ZeRO stage of the DDP config's
``data_parallel_sharding_strategy``: the override's, the recipe trainer's (the catalog's
``ddp_sharding_strategy``), else Megatron-Core's default ``no_shard``.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping, Sequence

from planner.errors import SpecError
from planner.launch.configs import split_options
from planner.launch.models import resolve_model
from planner.launch.reader import ReadContext
from planner.launch.readers.nemo2_values import (
    SHARDING_STRATEGY,
    RecipeValues,
    catalog,
    commit,
    finetune_values,
    model_values,
    pretrain_values,
)
from planner.launch.readers.nemo_common import (
    fp16_base_note,
    megatron_fsdp_facts,
    moe_routing_keys,
    optimizer_config_facts,
    padded_vocab,
    sixteen_bit_layers_note,
    unexpanded,
)
from planner.launch.types import Facts, Invocation, MemoryFiles, Sourced
from planner.launch.values import as_int, mapping_of
from planner.scenario.megatron_table import FP8_RECIPES, megatron_fsdp_master

__all__ = ["NEMO2_READER", "Nemo2Reader", "parse_factory"]

_COMMANDS = frozenset({"pretrain", "finetune"})
_VALUED = frozenset(
    {
        "--factory",
        "-f",
        "--name",
        "-n",
        "--load",
        "-l",
        "--yaml",
        "--rich-theme",
        "--to-yaml",
        "--to-toml",
        "--to-json",
    }
)
_OVERRIDE = re.compile(r"^([\w\[\]\.]+)\s*(=|\+=|-=|\*=|/=)\s*(.*)$")
_OPERATIONS: dict[str, Callable[[float, float], float]] = {
    "+=": operator.add,
    "-=": operator.sub,
    "*=": operator.mul,
    "/=": operator.truediv,
}
_ALIASES = {
    "trainer.strategy.sequence_parallelism": "trainer.strategy.sequence_parallel",
    "model.config.num_moe_experts": "model.config.num_experts",
}
_FACTS = (
    ("model.num_layers", "model.config.num_layers"),
    ("model.hidden_size", "model.config.hidden_size"),
    ("model.num_attention_heads", "model.config.num_attention_heads"),
    ("model.num_query_groups", "model.config.num_query_groups"),
    ("model.kv_channels", "model.config.kv_channels"),
    ("model.ffn_hidden_size", "model.config.ffn_hidden_size"),
    ("model.num_experts", "model.config.num_experts"),
    ("model.moe_router_topk", "model.config.moe_router_topk"),
    ("model.moe_ffn_hidden_size", "model.config.moe_ffn_hidden_size"),
    (
        "model.moe_shared_expert_intermediate_size",
        "model.config.moe_shared_expert_intermediate_size",
    ),
    ("model.num_dense_layers", "model.config.num_dense_layers"),
    ("model.moe_layer_freq", "model.config.moe_layer_freq"),
    *moe_routing_keys("model.config"),
    ("model.multi_latent_attention", "model.config.multi_latent_attention"),
    ("model.qk_layernorm", "model.config.qk_layernorm"),
    ("model.q_lora_rank", "model.config.q_lora_rank"),
    ("model.kv_lora_rank", "model.config.kv_lora_rank"),
    ("model.activation", "model.config.activation"),
    ("model.untie_embeddings", "model.config.untie_embeddings"),
    ("model.moe_expert_bias", "model.config.moe_expert_bias"),
    ("model.window_size", "model.config.window_size"),
    ("model.window_attn_skip_freq", "model.config.window_attn_skip_freq"),
    ("model.rope_type", "model.config.rope_type"),
    ("model.softmax_type", "model.config.softmax_type"),
    ("model.activation_func_clamp_value", "model.config.activation_func_clamp_value"),
    ("model.seq_length", "data.seq_length"),
    ("parallelism.tensor_parallel", "trainer.strategy.tensor_model_parallel_size"),
    ("parallelism.pipeline_parallel", "trainer.strategy.pipeline_model_parallel_size"),
    ("parallelism.virtual_pipeline", "trainer.strategy.virtual_pipeline_model_parallel_size"),
    ("parallelism.context_parallel", "trainer.strategy.context_parallel_size"),
    ("parallelism.expert_parallel", "trainer.strategy.expert_model_parallel_size"),
    ("parallelism.expert_tensor_parallel", "trainer.strategy.expert_tensor_parallel_size"),
    ("parallelism.sequence_parallel", "trainer.strategy.sequence_parallel"),
    ("parallelism.micro_batch_size", "data.micro_batch_size"),
    ("parallelism.global_batch_size", "data.global_batch_size"),
    ("parallelism.recompute", "model.config.recompute_granularity"),
    ("training.train_iters", "trainer.max_steps"),
    ("training.lora_rank", "peft.dim"),
)


_WINDOW_FACTS = frozenset({"model.window_size", "model.window_attn_skip_freq"})
"""Read only with a sliding window: without ``window_size`` every layer attends in full
whatever ``window_attn_skip_freq`` says (Megatron-Core ``is_layer_window_attention``,
megatron/core/transformer/utils.py @ core_v0.15.0)."""


def parse_factory(text: str) -> tuple[str, dict[str, object], list[str]]:
    """``(recipe name, call keyword arguments, problems)`` of a ``--factory`` value such as
    ``llama3_70b`` or ``"llama3_8b(num_nodes=2, name='run')"``: parsed with Python's grammar,
    arguments read as literals (nothing is evaluated). A value that is not a name or a call
    gives name ``""``."""
    problems: list[str] = []
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return "", {}, [f"--factory {text!r} is not a factory name or call"]
    arguments: dict[str, object] = {}
    if isinstance(node, ast.Call):
        if node.args:
            problems.append(f"--factory {text!r}: positional arguments are not read")
        for keyword in node.keywords:
            if keyword.arg is None:
                problems.append(f"--factory {text!r}: ** arguments are not read")
                continue
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, SyntaxError, TypeError):
                problems.append(f"--factory argument {keyword.arg}: not a literal; ignored")
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr, arguments, problems
    if isinstance(node, ast.Name):
        return node.id, arguments, problems
    return "", {}, [f"--factory {text!r} is not a factory name or call"]


def _literal(text: str) -> object:
    """A command-line value as NeMo-Run's ``parse_value`` reads it: a Python literal, else
    ``true``/``false`` (any case), else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        lowered = text.strip().lower()
        if lowered in {"true", "false"}:
            return lowered == "true"
        return text


def _split(args: Sequence[str]) -> tuple[dict[str, str], list[str], list[str]]:
    """NeMo-Run's own options (``--factory X`` / ``--factory=X``, flags such as ``-y``), the
    overrides, and the arguments it ignores."""
    given, rest = split_options(args, _VALUED)
    options = {name.lstrip("-"): value for name, value in given}
    overrides = [arg for arg in rest if _OVERRIDE.match(arg)]
    ignored = [arg for arg in rest if not _OVERRIDE.match(arg)]
    if "f" in options:
        options.setdefault("factory", options.pop("f"))
    return options, overrides, ignored


class Nemo2Reader:
    """Reads NeMo 2.0 ``nemo llm`` launches (module docstring)."""

    name = "nemo2"

    def recognises(self, invocation: Invocation) -> bool:
        """``nemo llm pretrain ...`` or ``nemo llm finetune ...``."""
        args = invocation.args
        return (
            invocation.program.rsplit("/", 1)[-1] == "nemo"
            and len(args) >= 2
            and args[0] == "llm"
            and args[1] in _COMMANDS
        )

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the run trains; unknown recipes and arguments are noted, never guessed."""
        facts = Facts()
        command = invocation.args[1]
        facts.set("training.framework", "nemo", "launch: NeMo 2.0 (nemo llm)")
        options, overrides, ignored = _split(invocation.args[2:])
        for arg in ignored:
            facts.note(f"argument {arg!r} is not a NeMo-Run override; ignored")
        if "yaml" in options or "load" in options:
            facts.note("--yaml / --load configs are not read; the recipe and overrides are")
        values = self._recipe(command, options.get("factory"), facts)
        for arg in overrides:
            _override(values, arg, facts)
        _to_facts(values, command, facts)
        _check_allocation(facts, context)
        return facts

    def _recipe(self, command: str, factory: str | None, facts: Facts) -> RecipeValues:
        if not factory:
            facts.note(f"nemo llm {command} without --factory: only the overrides are read")
            return RecipeValues(name="", mode="pretrain" if command == "pretrain" else "lora")
        name, arguments, problems = parse_factory(factory)
        for problem in problems:
            facts.note(problem)
        cited = f"override: --factory {factory}"
        if command == "pretrain":
            values = pretrain_values(name, arguments, cited, facts)
        else:
            values = finetune_values(name, arguments, cited, facts)
        if values.name:
            facts.set("launch.recipe", f"{command}:{values.name}", cited)
        return values


def _window(value: object) -> tuple[str, object]:
    """``window_size``: ``(left, right)`` or None (full causal) -> the left size, 0 for none
    (Megatron-Core ``TransformerConfig.window_size``)."""
    if value is None:
        return "model.config.window_size", 0
    if isinstance(value, list | tuple) and value:
        return "model.config.window_size", value[0]
    return "model.config.window_size", value


def _softmax(value: object) -> tuple[str, object]:
    """``softmax_type`` as Megatron-Core spells it (``off-by-one``) -> the scenario's
    ``off_by_one``."""
    text = value.replace("-", "_") if isinstance(value, str) else value
    return "model.config.softmax_type", text


_ATTENTION_BACKEND_STORES_SCORES: Mapping[str, bool] = {
    "flash": False,
    "fused": False,
    "auto": False,
    "unfused": True,
    "local": True,
}
"""Megatron-Core's attention backends (``AttnBackend``, megatron/core/transformer/enums.py @
core_v0.14.0) -> whether the core attention stores the ``s x s`` scores (the scenario's
``flash_attention`` false): ``local`` is Megatron-Core's own ``DotProductAttention`` (NeMo's
``GPTConfig.configure_model`` puts it in the layer spec, nemo/collections/llm/gpt/model/base.py
@ 8cfedd7203462cb251a914e700e5605444277561), which takes GPT-OSS's windows and learnable
softmax and materialises the scores with ``baddbmm`` (megatron/core/transformer/
dot_product_attention.py @ core_v0.15.0, 103851dcf4c380fe93463e2c128cbfba9bd84e37),
``unfused`` Transformer Engine's unfused path; ``flash``, ``fused`` and ``auto`` its
fused-attention kernels."""


def _attention_backend(value: object) -> tuple[str, object]:
    """``attention_backend`` as written (``local``, ``AttnBackend.local``) -> its member name."""
    text = value.rsplit(".", 1)[-1] if isinstance(value, str) else value
    return "model.config.attention_backend", text


_CONFIG_NAMES: Mapping[str, Callable[[object], tuple[str, object]]] = {
    "model.config.attention_backend": _attention_backend,
    "model.config.add_bias_linear": lambda value: ("model.config.moe_expert_bias", value),
    "model.config.window_size": _window,
    # yarn or rope; anything else goes through, for the scenario's error naming the field
    "model.config.position_embedding_type": lambda value: ("model.config.rope_type", value),
    "model.config.softmax_type": _softmax,
}
"""Overrides of a model config field under its ``TransformerConfig`` name -> the catalog's
setting under the scenario's name, and the value converted (``nemo2_recipes.yaml``,
``model_configs``): ``add_bias_linear`` of an MoE config is its experts' biases."""


def _override(values: RecipeValues, arg: str, facts: Facts) -> None:
    """Apply one dotted override to ``values``."""
    match = _OVERRIDE.match(arg)
    if match is None:
        return
    key, op, raw = match.groups()
    key = key.strip()
    if unexpanded(arg):
        facts.note(f"{arg!r}: no value (a shell variable left unexpanded); ignored")
        return
    if key in _ALIASES:
        facts.note(f"{key} is read as {_ALIASES[key]}")
        key = _ALIASES[key]
    value = _literal(raw)
    source = f"override: {arg}"
    if op != "=":
        current = values.settings.get(key)
        if current is None or not isinstance(current.value, int | float):
            facts.note(f"{arg}: no numeric value to apply {op} to; ignored")
            return
        if not isinstance(value, int | float) or isinstance(value, bool):
            facts.note(f"{arg}: not a number; ignored")
            return
        result = _OPERATIONS[op](current.value, value)
        value = int(result) if isinstance(result, float) and result.is_integer() else result
    if key == "model" and isinstance(value, str):
        model = model_values(value, source)
        if model is None:
            facts.note(f"model={value}: not a model factory the catalog knows")
            return
        values.replace_model(model)
    elif key == "trainer.plugins" and isinstance(value, str):
        values.set_plugin(value, source, facts)
    elif key == "peft":
        values.set_peft(value)
    elif key == "trainer.accumulate_grad_batches":
        facts.note(
            f"{arg}: Lightning gradient accumulation; the Megatron strategy accumulates from "
            "global / (micro x data parallel) instead"
        )
    elif key == "model.config.share_embeddings_and_output_weights" and isinstance(value, bool):
        values.settings["model.config.untie_embeddings"] = Sourced(not value, source)
    elif key in _CONFIG_NAMES:
        name, scenario_value = _CONFIG_NAMES[key](value)
        values.settings[name] = Sourced(scenario_value, source)
    elif "." in key:
        values.settings[key] = Sourced(value, source)
    else:
        facts.note(f"{arg}: not a setting of the {values.name or 'run'} recipe; ignored")


def _to_facts(values: RecipeValues, command: str, facts: Facts) -> None:
    """The settings -> facts: shape, layout, batch, steps, precision, vocabulary, GPUs."""
    settings = values.settings
    window = settings.get("model.config.window_size")
    full_attention = window is None or not window.value  # the skip frequency then means nothing
    experts = settings.get("model.config.num_experts")
    dense = experts is None or not as_int(experts.value)  # add_bias_linear: no expert to bias
    for name, key in _FACTS:
        found = settings.get(key)
        if name in _WINDOW_FACTS and full_attention:
            continue
        if name == "model.moe_expert_bias" and dense:
            continue
        if found is not None and found.value is not None:
            facts.set(name, found.value, found.source)
    backend = settings.get("model.config.attention_backend")
    if backend is not None and backend.value is not None:
        stores = _ATTENTION_BACKEND_STORES_SCORES.get(str(backend.value))
        # an unknown name goes through, for the scenario's error naming the field
        flash = backend.value if stores is None else not stores
        facts.set("parallelism.flash_attention", flash, backend.source)
    facts.set("training.mode", values.mode, f"launch: nemo llm {command}")
    if values.mode == "lora":
        targets = settings.get("peft.target_modules")
        if targets is not None:
            facts.set("training.lora_targets", targets.value, targets.source)
    _derived_model(facts)
    _megatron_fsdp(settings, facts)
    _precision(settings, facts)
    _optimizer(settings, facts)
    _vocab(values, facts)
    nodes = settings.get("trainer.num_nodes")
    devices = settings.get("trainer.devices")
    count = as_int(nodes.value) if nodes else None
    per_node = as_int(devices.value) if devices else None
    if nodes is not None and devices is not None and count and per_node:
        facts.set("launch.num_nodes", count, nodes.source)
        facts.set("hardware.gpus_per_node", per_node, devices.source)
        cited = (
            nodes.source if nodes.source == devices.source else f"{nodes.source}; {devices.source}"
        )
        facts.set(
            "hardware.num_gpus",
            count * per_node,
            f"derived: trainer.num_nodes x trainer.devices ({cited})",
        )
    model_seq = settings.get("model.config.seq_length")
    data_seq = settings.get("data.seq_length")
    if model_seq and data_seq and model_seq.value != data_seq.value:
        facts.note(
            f"model.config.seq_length {model_seq.value} differs from data.seq_length "
            f"{data_seq.value}; the data module's length is what is trained"
        )


def _megatron_fsdp(settings: Mapping[str, Sourced], facts: Facts) -> None:
    """Under Megatron-FSDP (``trainer.strategy.fsdp='megatron'``, or the DDP config's
    ``use_megatron_fsdp`` / ``use_custom_fsdp``, from which ``MegatronStrategy`` sets it:
    nemo/lightning/pytorch/strategies/megatron_strategy.py), its ZeRO stage
    (``megatron_fsdp_facts``) from ``trainer.strategy.ddp.data_parallel_sharding_strategy``:
    the override's or the recipe's, else Megatron-Core's default. ``fsdp='pytorch'`` is noted
    (``MegatronStrategy`` raises NotImplementedError)."""
    fsdp = settings.get("trainer.strategy.fsdp")
    if fsdp is not None and fsdp.value == "pytorch":
        facts.note(
            f"trainer.strategy.fsdp='pytorch' ({fsdp.source}): MegatronStrategy raises "
            "NotImplementedError (PyTorch FSDP2 is not supported with MegatronParallel)"
        )
    found = _megatron_fsdp_on(settings)
    if found is None:
        return
    strategy = settings.get(SHARDING_STRATEGY)
    if strategy is None:
        megatron_fsdp_facts(facts, found.source, None, "")
    else:
        megatron_fsdp_facts(facts, found.source, strategy.value, strategy.source)


def _megatron_fsdp_on(settings: Mapping[str, Sourced]) -> Sourced | None:
    """The setting that turns Megatron-FSDP on (``trainer.strategy.fsdp='megatron'``, else the
    DDP config's ``use_megatron_fsdp`` / ``use_custom_fsdp``), None where none does."""
    fsdp = settings.get("trainer.strategy.fsdp")
    if fsdp is not None and fsdp.value == "megatron":
        return fsdp
    flags = ("trainer.strategy.ddp.use_megatron_fsdp", "trainer.strategy.ddp.use_custom_fsdp")
    return next((settings[k] for k in flags if k in settings and settings[k].value is True), None)


def _derived_model(facts: Facts) -> None:
    heads = facts.values.get("model.num_attention_heads")
    if (
        heads
        and not facts.has("model.num_query_groups")
        and not facts.get("model.multi_latent_attention")
    ):
        facts.set(
            "model.num_query_groups",
            heads.value,
            f"derived: num_query_groups unset -> multi-head attention ({heads.source})",
        )
    ffn = facts.values.get("model.ffn_hidden_size")
    if ffn and facts.has("model.num_experts") and not facts.has("model.moe_ffn_hidden_size"):
        facts.set(
            "model.moe_ffn_hidden_size",
            ffn.value,
            "derived: Megatron-Core moe_ffn_hidden_size unset -> ffn_hidden_size",
        )
    shared = as_int(facts.get("model.moe_shared_expert_intermediate_size"))
    expert = as_int(facts.get("model.moe_ffn_hidden_size"))
    if shared and expert:
        facts.set(
            "model.num_shared_experts",
            max(1, shared // expert),
            "derived: moe_shared_expert_intermediate_size / moe_ffn_hidden_size",
        )


def _precision(settings: Mapping[str, Sourced], facts: Facts) -> None:
    """``parallelism.precision`` from the precision plugin's ``precision`` string, replaced by
    ``fp8`` (``mxfp8`` under the ``mxfp8`` recipe) when ``fp8`` is set, with ``fp8_recipe`` and
    ``fp8_param_gather`` as the plugin holds them (a factory's, ``set_plugin``, or an override;
    unset, MegatronMixedPrecision's ``delayed`` and false are the scenario's defaults too). An
    fp16 base under the fp8 GEMMs (the ``fp16_with_*`` factories) and 16-bit first and last
    layers are noted: no scenario field holds them."""
    strings = catalog().get("precision_strings")
    table = strings if isinstance(strings, Mapping) else {}
    plugin = settings.get("trainer.plugins.precision")
    base = None
    if plugin is not None:
        base = table.get(str(plugin.value).lower())
        if base is None:
            facts.note(f"precision {plugin.value!r}: not a bf16/fp16 plugin; left open")
        else:
            facts.set("parallelism.precision", base, plugin.source)
    fp8 = settings.get("trainer.plugins.fp8")
    if fp8 is not None and fp8.value:
        recipe = settings.get("trainer.plugins.fp8_recipe")
        word = str(recipe.value).lower() if recipe is not None else ""
        low = "mxfp8" if word == "mxfp8" else "fp8"
        facts.set("parallelism.precision", low, (recipe or fp8).source)
        if recipe is not None and word in FP8_RECIPES:
            facts.set("parallelism.fp8_recipe", word, recipe.source)
        gather = settings.get("trainer.plugins.fp8_param_gather")
        if gather is not None and isinstance(gather.value, bool):
            facts.set("parallelism.fp8_param_gather", gather.value, gather.source)
        if base == "fp16" and plugin is not None:
            facts.note(fp16_base_note(low, plugin.source))
        _note_sixteen_bit_layers(settings, low, facts)
    _grad_reduce(settings, plugin, facts)


NEMO2_NEWEST_CONTAINER = "26.02"
"""The newest NeMo Framework container that ships NeMo 2.0 (NeMo 2.7.0, Megatron Core 0.16.0;
the 26.04 and 26.06 containers list none, NVIDIA-NeMo/Megatron-Bridge
``docs/releases/software-versions.md`` @ 067f987df03b)."""


def _optimizer(settings: Mapping[str, Sourced], facts: Facts) -> None:
    """The optimizer's dtypes from ``optim.config.*`` overrides: the recipes' optimizer is
    Megatron-Core's ``OptimizerConfig`` (``distributed_fused_adam_with_cosine_annealing``,
    ``bf16`` for the ``bf16-mixed`` precision, the distributed optimizer on;
    nemo/collections/llm/recipes/optim/adam.py, NVIDIA/NeMo @
    8cfedd7203462cb251a914e700e5605444277561), read by
    ``nemo_common.optimizer_config_facts``. NeMo-Run builds it (its ``__post_init__`` computing
    whether Transformer Engine keeps the master) before ``MegatronStrategy`` copies the
    precision plugin's fields over it with ``setattr`` (``update_config_with_dtype_overrides``,
    nemo/lightning/pytorch/strategies/megatron_strategy.py @ 8cfedd72), so its ``fp8_recipe``
    there is the override's, else None (and the plugin's own default is ``delayed``,
    plugins/mixed_precision.py): the fp32 master of bf16 weights is kept as remainders.
    Under Megatron-FSDP (:func:`_megatron_fsdp_on`) as ``megatron_fsdp_master`` says for
    ``NEMO2_NEWEST_CONTAINER``: NeMo 2.0 leaves Megatron-FSDP's ``preserve_fp32_weights`` set
    (no assignment in NVIDIA/NeMo @ 8cfedd72), so its fp32 main weights and ``FusedAdam``'s
    master are both kept in every container that ships it (noted, nothing read)."""
    plugin = settings.get("trainer.plugins.precision")
    catalog_strings = catalog().get("precision_strings")
    table = catalog_strings if isinstance(catalog_strings, Mapping) else {}
    base = None if plugin is None else table.get(str(plugin.value).lower())
    own = settings.get("optim.config.bf16")
    bf16 = own.value is True if own is not None else base == "bf16"
    recipe = settings.get("optim.config.fp8_recipe")
    optimizer_config_facts(
        settings.get,
        "optim.config.",
        facts,
        bf16=bf16,
        fp8_recipe=None if recipe is None else recipe.value,
        default_source="Megatron-Core OptimizerConfig",
        megatron_fsdp=None
        if _megatron_fsdp_on(settings) is None
        else megatron_fsdp_master(NEMO2_NEWEST_CONTAINER, clears_preserve=False),
        release=f"{NEMO2_NEWEST_CONTAINER} or earlier",
    )


def _note_sixteen_bit_layers(settings: Mapping[str, Sourced], low: str, facts: Facts) -> None:
    """Note the plugin's 16-bit first and last layers (``first_last_layers_bf16``)."""
    flag = settings.get("trainer.plugins.first_last_layers_bf16")
    if flag is None or flag.value is not True:
        return
    start, end = (
        settings.get(f"trainer.plugins.num_layers_at_{side}_in_bf16") for side in ("start", "end")
    )
    counts = [found.value if found is not None else 0 for found in (start, end)]
    if any(counts):
        facts.note(sixteen_bit_layers_note(counts[0], counts[1], low, "trainer.plugins"))


def _grad_reduce(settings: Mapping[str, Sourced], plugin: Sourced | None, facts: Facts) -> None:
    """``parallelism.grad_reduce_in_fp32``: the precision plugin's, which the Megatron
    strategy copies into the DDP config (``MegatronStrategy`` ->
    ``update_config_with_dtype_overrides``, nemo/lightning/pytorch/strategies/
    megatron_strategy.py). Every catalogued recipe builds ``MegatronMixedPrecision``
    (``bf16_mixed()`` or the class with ``precision="bf16-mixed"``), whose default is true;
    a precision factory or an override says otherwise."""
    found = settings.get("trainer.plugins.grad_reduce_in_fp32")
    if found is not None and isinstance(found.value, bool):
        facts.set("parallelism.grad_reduce_in_fp32", found.value, found.source)
    elif plugin is not None:
        facts.set(
            "parallelism.grad_reduce_in_fp32",
            True,
            f"{plugin.source} (MegatronMixedPrecision default grad_reduce_in_fp32 true)",
        )


def _catalog_int(section: str, key: str) -> int:
    """An integer of the catalog (``nemo2_recipes.yaml``); ``SpecError`` when it is missing (a
    packaging error)."""
    value = as_int(mapping_of(catalog().get(section)).get(key))
    if value is None:
        raise SpecError("planner/launch/data/nemo2_recipes.yaml", f"{section}.{key} is missing")
    return value


def _vocab(values: RecipeValues, facts: Facts) -> None:
    """``model.vocab_size`` and ``launch.padded_vocab_size``: a model config's preset vocab
    (unpadded), the mock data's GPT-2 fallback, or the fine-tuned model's tokenizer."""
    settings = values.settings
    tp = as_int(facts.get("parallelism.tensor_parallel")) or 1
    divisor = settings.get("model.config.make_vocab_size_divisible_by")
    multiple = (as_int(divisor.value) if divisor else None) or _catalog_int(
        "vocab_divisor", "value"
    )
    rule = f"NVIDIA/NeMo/nemo/lightning/base.py@{commit()} get_vocab_size"
    preset = settings.get("model.config.vocab_size")
    if preset is not None and as_int(preset.value):
        facts.set("model.vocab_size", preset.value, preset.source)
        facts.set(
            "launch.padded_vocab_size",
            preset.value,
            "derived: a model config's preset vocab_size is not padded (NVIDIA/NeMo/"
            f"nemo/collections/llm/gpt/model/base.py@{commit()} configure_model)",
        )
        return
    tokenizer = settings.get("data.tokenizer")
    module = settings.get("data.module")
    named = tokenizer is not None and tokenizer.value is not None
    if values.mode == "pretrain" and module and module.value == "MockDataModule" and not named:
        mock = mapping_of(catalog().get("mock_tokenizer"))
        vocab = _catalog_int("mock_tokenizer", "vocab_size")
        facts.set(
            "model.vocab_size",
            vocab,
            "default of NeMo 2.0: MockDataModule without a tokenizer builds the "
            f"{mock.get('name', 'GPT2BPETokenizer')} (NVIDIA/NeMo/{mock.get('path')}@{commit()})",
        )
        facts.note(
            "vocabulary: the recipe's mock data has no tokenizer, so NeMo uses GPT-2 BPE "
            f"({vocab}), not the model family's own tokenizer"
        )
        padded_vocab(facts, vocab, multiple, tp, rule)
        return
    hf_id = values.hf_id or (str(tokenizer.value) if tokenizer and named else "")
    scratch = Facts()
    if "/" in hf_id and resolve_model(
        hf_id, facts=scratch, files=MemoryFiles(), cwd=None, source=hf_id
    ):
        tokens = as_int(scratch.get("model.vocab_size"))
        found = scratch.values.get("model.vocab_size")
        if tokens and found:
            facts.set("model.vocab_size", tokens, f"{found.source}: the tokenizer of {hf_id}")
            facts.set("launch.hf_id", hf_id, found.source)
            padded_vocab(facts, tokens, multiple, tp, rule)
            return
    facts.note("vocabulary: the data module's tokenizer is not fixed by the launch")


def _check_allocation(facts: Facts, context: ReadContext) -> None:
    """Note when the scheduler's allocation disagrees with the recipe's GPUs."""
    gpus = as_int(facts.get("hardware.num_gpus"))
    for name in ("launch.world_size", "hardware.num_gpus"):
        found = context.allocation.values.get(name)
        if gpus and found is not None:
            allocated = as_int(found.value)
            if allocated and allocated != gpus:
                facts.note(
                    f"the recipe runs {gpus} GPUs (trainer.num_nodes x devices) while the "
                    f"allocation gives {allocated} ({found.source}); NeMo-Run launches the recipe's"
                )
            return


NEMO2_READER = Nemo2Reader()
