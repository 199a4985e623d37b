"""The values a NeMo 2.0 recipe factory builds, from the catalog of published values
(``planner/launch/data/nemo2_recipes.yaml``), as NeMo-Run attribute paths
(``trainer.strategy.tensor_model_parallel_size``, ``data.global_batch_size``,
``model.config.num_layers``) each with its source, and the factory-call arguments applied.
Nothing of NeMo is imported or run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.launch.data import load_data
from planner.launch.types import Facts, Sourced
from planner.launch.values import mapping_of

__all__ = [
    "FACTORY_ARGS",
    "SHARDING_STRATEGY",
    "RecipeValues",
    "catalog",
    "commit",
    "finetune_values",
    "model_values",
    "pretrain_values",
]

_DATA = "nemo2_recipes.yaml"

FACTORY_ARGS = {
    "num_nodes": "trainer.num_nodes",
    "num_gpus_per_node": "trainer.devices",
    "tensor_parallelism": "trainer.strategy.tensor_model_parallel_size",
    "pipeline_parallelism": "trainer.strategy.pipeline_model_parallel_size",
    "virtual_pipeline_parallelism": "trainer.strategy.virtual_pipeline_model_parallel_size",
    "context_parallelism": "trainer.strategy.context_parallel_size",
    "sequence_parallelism": "trainer.strategy.sequence_parallel",
    "expert_parallelism": "trainer.strategy.expert_model_parallel_size",
    "max_steps": "trainer.max_steps",
    "precision": "trainer.plugins.precision",
    "global_batch_size": "data.global_batch_size",
    "micro_batch_size": "data.micro_batch_size",
    "seq_length": "data.seq_length",
}
"""Recipe factory keyword arguments -> the setting each one decides (recipes accept the
subset their ``factory_args`` list)."""

_IGNORED_ARGS = frozenset({"dir", "name", "fn"})


SHARDING_STRATEGY = "trainer.strategy.ddp.data_parallel_sharding_strategy"
"""The setting holding Megatron-FSDP's sharding strategy."""


def catalog() -> Mapping[str, object]:
    """The parsed ``nemo2_recipes.yaml``."""
    return load_data(_DATA)


def commit() -> str:
    """The NeMo commit the catalog cites, abbreviated."""
    source = catalog().get("source")
    return str(source.get("commit", ""))[:7] if isinstance(source, Mapping) else ""


_PLUGIN_FACTORIES = "nemo/collections/llm/recipes/precision/mixed_precision.py"
"""Where NeMo 2.0's precision-plugin factories (``bf16_mixed``, ...) are defined."""


def _section(name: str) -> Mapping[str, object]:
    return mapping_of(catalog().get(name))


@dataclass(slots=True)
class RecipeValues:
    """A run's settings by NeMo-Run attribute path (``settings``), the recipe ``name``
    (``""`` when none), the training ``mode`` (``pretrain`` / ``sft`` / ``lora``) and, for
    fine-tuning, the Hugging Face model whose tokenizer is used (``hf_id``)."""

    name: str
    mode: str
    settings: dict[str, Sourced] = field(default_factory=dict)
    hf_id: str = ""

    def put(self, values: Mapping[str, object], prefix: str, source: str) -> None:
        """Set ``prefix.<key>`` for each item of ``values``."""
        for key, value in values.items():
            self.settings[f"{prefix}.{key}"] = Sourced(value, source)

    def replace_model(self, model: Mapping[str, Sourced]) -> None:
        """Swap the model config (``model=<factory>``): every ``model.config.*`` replaced."""
        for key in [k for k in self.settings if k.startswith("model.config.")]:
            if key != "model.config.recompute_granularity":
                del self.settings[key]
        self.settings.update(model)

    def set_plugin(self, name: str, source: str, facts: Facts) -> None:
        """``trainer.plugins=<factory>``: the ``trainer.plugins.*`` arguments a precision-plugin
        factory passes (its base factory's, then its own: the catalog's
        ``precision_plugins``), in place of the plugin there was."""
        plugins = _section("precision_plugins")
        entry = plugins.get(name)
        if not isinstance(entry, Mapping):
            facts.note(f"trainer.plugins={name}: not a precision plugin the catalog knows")
            return
        for key in [k for k in self.settings if k.startswith("trainer.plugins.")]:
            del self.settings[key]
        cited = f"{source} ({name}: {_cite(_PLUGIN_FACTORIES)})"
        base = mapping_of(plugins.get(str(entry.get("base", ""))))
        for key, value in {**base, **entry}.items():
            if key != "base":
                self.settings[f"trainer.plugins.{key}"] = Sourced(value, cited)

    def set_peft(self, value: object) -> None:
        """``peft=<scheme>`` (``lora``, ``dora``, ``none``)."""
        if value is None or str(value).lower() == "none":
            self.mode = "sft"
            self.settings.pop("peft.dim", None)
        elif str(value).lower() in {"lora", "dora"}:
            self.mode = "lora"
            defaults = mapping_of(_section("finetune_defaults").get("lora_dim"))
            cited = f"default of NeMo 2.0 ({_cite(defaults.get('path'))} LoRA.dim)"
            self.settings.setdefault("peft.dim", Sourced(defaults.get("value"), cited))


def _cite(path: object) -> str:
    return f"NVIDIA/NeMo/{path}@{commit()}"


def model_values(name: str, source: str | None = None) -> dict[str, Sourced] | None:
    """``model.config.*`` settings of a model config class, or of the model a recipe or model
    factory builds (``llama3_8b``, ``Llama3Config8B``); None when the catalog lacks it.
    ``source`` overrides the citation (a ``model=<factory>`` override)."""
    configs = _section("model_configs")
    recipe = mapping_of(_section("recipes").get(name))
    factory = mapping_of(_section("model_factories").get(name))
    class_name = str(recipe.get("model") or factory.get("model") or name)
    config = mapping_of(configs.get(class_name))
    if not config:
        return None
    cited = f"catalog:{class_name} (NeMo 2.0 model config, {_cite(config.get('path'))})"
    if source:
        cited = f"{source} -> {cited}"
    values = {
        f"model.config.{key}": Sourced(value, cited)
        for key, value in config.items()
        if key != "path"
    }
    if recipe.get("model_seq_length") is not None:
        values["model.config.seq_length"] = Sourced(
            recipe["model_seq_length"], f"catalog:{name} (model(), {_cite(recipe.get('path'))})"
        )
    return values


def pretrain_values(
    name: str, arguments: Mapping[str, object], cited: str, facts: Facts
) -> RecipeValues:
    """What ``pretrain_recipe(**arguments)`` of recipe ``name`` builds; an unknown recipe
    gives empty settings and a note."""
    recipe = mapping_of(_section("recipes").get(name))
    if not recipe:
        facts.note(f"NeMo 2.0 recipe {name!r} is not in the catalog; only the overrides are read")
        return RecipeValues(name="", mode="pretrain")
    values = RecipeValues(name=name, mode="pretrain")
    source = f"catalog:{name} (NeMo 2.0 recipe, {_cite(recipe.get('path'))})"
    values.put(mapping_of(recipe.get("trainer")), "trainer", source)
    values.put(mapping_of(recipe.get("strategy")), "trainer.strategy", source)
    values.put(mapping_of(recipe.get("data")), "data", source)
    values.settings["trainer.plugins.precision"] = Sourced(recipe.get("precision"), source)
    strategy = mapping_of(_section("ddp_sharding_strategy").get("recipes")).get(name)
    if strategy is not None:
        values.settings[SHARDING_STRATEGY] = Sourced(strategy, source)
    if recipe.get("recompute"):
        values.settings["model.config.recompute_granularity"] = Sourced(
            recipe.get("recompute"), source
        )
    values.settings.update(model_values(name) or {})
    accepted = recipe.get("factory_args")
    allowed = set(accepted) if isinstance(accepted, list) else set()
    for argument, value in arguments.items():
        if argument in _IGNORED_ARGS:
            continue
        if argument == "performance_mode":
            if value:
                facts.note(
                    f"{name}(performance_mode=True): callbacks and overlap settings not read"
                )
            continue
        if argument in FACTORY_ARGS and argument in allowed:
            values.settings[FACTORY_ARGS[argument]] = Sourced(value, cited)
        else:
            facts.note(f"{name} pretrain_recipe takes no argument {argument!r}; ignored")
    return values


def finetune_values(
    name: str, arguments: Mapping[str, object], cited: str, facts: Facts
) -> RecipeValues:
    """What ``finetune_recipe(**arguments)`` of recipe ``name`` builds over
    ``default_finetune_recipe`` (``peft_scheme`` 'lora' by default; 'none' is full
    fine-tuning); a recipe without catalogued fine-tuning values gives the model only."""
    recipe = mapping_of(_section("recipes").get(name))
    finetune = mapping_of(recipe.get("finetune"))
    scheme = arguments.get("peft_scheme", "lora")
    full = scheme is None or str(scheme).lower() == "none"
    values = RecipeValues(name=name if recipe else "", mode="sft" if full else "lora")
    if not finetune:
        facts.note(
            f"NeMo 2.0 fine-tuning recipe {name!r} is not in the catalog; only the model is read"
        )
        values.settings.update(model_values(name) or {})
        return values
    defaults = _section("finetune_defaults")
    base = f"catalog:finetune_default ({_cite(defaults.get('path'))})"
    source = f"catalog:{name} (NeMo 2.0 finetune_recipe, {_cite(recipe.get('path'))})"
    values.hf_id = str(finetune.get("hf_id", ""))
    values.put(mapping_of(defaults.get("trainer")), "trainer", base)
    values.put(mapping_of(defaults.get("strategy")), "trainer.strategy", base)
    values.put(mapping_of(defaults.get("data")), "data", base)
    values.settings["trainer.plugins.precision"] = Sourced(defaults.get("precision"), base)
    values.settings.update(model_values(name) or {})
    packed = bool(arguments.get("packed_sequence", arguments.get("performance_mode", False)))
    if packed:
        values.put(mapping_of(defaults.get("packed_data")), "data", base)
    nodes = mapping_of(finetune.get("num_nodes")).get("full" if full else "lora", 1)
    values.settings["trainer.num_nodes"] = Sourced(nodes, source)
    scheme_values = mapping_of(finetune.get("full" if full else "lora"))
    values.put(mapping_of(scheme_values.get("strategy")), "trainer.strategy", source)
    if not full:
        values.settings["peft.dim"] = Sourced(scheme_values.get("dim"), source)
        values.settings["peft.target_modules"] = Sourced(defaults.get("lora_targets"), base)
        if str(scheme).lower() == "dora":
            facts.note("peft_scheme='dora': read as LoRA of the same rank")
    seq = values.settings.get("data.seq_length")
    if seq is not None:
        values.settings["model.config.seq_length"] = Sourced(seq.value, source)
    for argument, value in arguments.items():
        if argument in {"num_nodes", "num_gpus_per_node"}:
            if value is not None:
                values.settings[FACTORY_ARGS[argument]] = Sourced(value, cited)
        elif argument == "seq_length" and value is not None:
            values.settings["data.seq_length"] = Sourced(value, cited)
            values.settings["model.config.seq_length"] = Sourced(value, cited)
        elif argument not in _IGNORED_ARGS | {"peft_scheme", "packed_sequence", "performance_mode"}:
            facts.note(f"{name} finetune_recipe takes no argument {argument!r}; ignored")
    return values
