"""Megatron-Bridge launches: its entry scripts (``examples/recipes/llama/pretrain_llama3_8b.py
[--config-file f.yaml] a.b=c ...``, ``scripts/training/run_recipe.py --recipe <name> [-tp N]
a.b=c ...``) loading a recipe's ``ConfigContainer``.

Settings resolve as the scripts build them: the recipe function's published values
(``planner/launch/data/megatron_bridge_recipes.yaml``), then the ``--config-file`` YAML merged
over them (OmegaConf.merge; ``pretrain_llama3_8b.py`` applies its default
``conf/llama3_8b_pretrain_override_example.yaml`` when the option is absent), then the command
line (``run_recipe.py``'s convenience options first, then Hydra-style ``a.b=c`` / ``+a.b=c`` /
``~a.b`` overrides, in order; ``~a.b`` leaves the recipe function's own value, since only the
keys the merged config holds are set on the function's ``ConfigContainer``). The model's
shape is its Hugging Face config's (the recipe converts ``hf_path`` with AutoBridge;
:func:`planner.launch.models.resolve_model`), under ``model.*`` overrides; its vocabulary
stays the HF config's, unpadded, when it is at least the tokenizer's (``training/setup.py``
``_validate_and_set_vocab_size``).

The mixed precision resolves as ``runtime_config_update`` (``training/config.py``) does after
every override: a recipe name (``bf16_with_fp8_current_scaling_mixed``, ...) to the fields its
function sets (the catalog's ``mixed_precision_recipes``, read at v0.1.0rc3 / 25.09, v0.2.0 /
25.11 and 067f987), a mapping to its keys over ``MixedPrecisionConfig``'s defaults; those fields
then win over the ``model.*`` / ``ddp.*`` keys of the same name (``MixedPrecisionConfig.setup``).
A name on the command line or in the YAML replaces the whole config; a key under a name is
refused by Hydra (noted); a recipe function that builds its config (``bf16_mixed()``) has its
fields edited key by key.

Megatron-FSDP (``ddp.use_megatron_fsdp`` or ``dist.use_megatron_fsdp``) runs the ZeRO stage of
``ddp.data_parallel_sharding_strategy``: the merged config's, else the recipe function's (the
catalog's ``ddp_sharding_strategy``), else Megatron-Core's default, ``no_shard`` (stage 0):
``planner.launch.readers.nemo_common.megatron_fsdp_facts``.

A job that runs the script several times (a sweep of layouts) is described by its first run;
the others are noted.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planner.errors import SourceError
from planner.launch.configs import read_config, split_options
from planner.launch.data import load_data
from planner.launch.models import resolve_model
from planner.launch.reader import ReadContext
from planner.launch.readers.nemo_common import (
    fp16_base_note,
    megatron_fsdp_facts,
    moe_routing_keys,
    optimizer_config_facts,
    sixteen_bit_layers_note,
    unexpanded,
)
from planner.launch.readers.nemo_hydra import HydraConfig, Resolved, split_override
from planner.launch.release import launch_release
from planner.launch.types import Facts, Invocation, resolve_path
from planner.launch.values import as_int, mapping_of
from planner.scenario.megatron_table import (
    FP8_RECIPES,
    block_recompute_layers,
    cuda_graphs_of,
    megatron_fsdp_master,
)

__all__ = [
    "READER",
    "MegatronBridgeReader",
    "config_facts",
    "recipe_precision",
    "scenario_precision",
]

_DATA = "megatron_bridge_recipes.yaml"
_FRAMEWORK_SOURCE = (
    "launch: Megatron-Bridge, released in the NeMo Framework container; its training loop on "
    "Megatron-Core overlaps the pipeline's send/recv under a virtual pipeline "
    "(training/comm_overlap.py overlap_p2p_comm) and syncs gradients per model chunk "
    "(training/setup.py grad_sync_func), as the nemo profile models "
    "(NVIDIA-NeMo/Megatron-Bridge@067f987)"
)
_SETUP = "src/megatron/bridge/training/setup.py"
_RECIPE_MODES = {
    "pretrain": "pretrain",
    "sft": "sft",
    "finetune": "sft",
    "peft": "lora",
    "lora": "lora",
    "dora": "lora",
}
"""``--mode`` values and recipe-name parts -> the planner's training mode."""
_WRAPPERS = frozenset({"bash", "sh", "uv", "python", "python3", "torchrun"})
_LAYOUT = (
    ("TP", "model.tensor_model_parallel_size"),
    ("PP", "model.pipeline_model_parallel_size"),
    ("CP", "model.context_parallel_size"),
    ("EP", "model.expert_model_parallel_size"),
    ("SP", "model.sequence_parallel"),
)
_FACTS = (
    ("parallelism.tensor_parallel", "model.tensor_model_parallel_size"),
    ("parallelism.pipeline_parallel", "model.pipeline_model_parallel_size"),
    ("parallelism.virtual_pipeline", "model.virtual_pipeline_model_parallel_size"),
    ("parallelism.context_parallel", "model.context_parallel_size"),
    ("parallelism.expert_parallel", "model.expert_model_parallel_size"),
    ("parallelism.expert_tensor_parallel", "model.expert_tensor_parallel_size"),
    ("parallelism.sequence_parallel", "model.sequence_parallel"),
    ("parallelism.micro_batch_size", "train.micro_batch_size"),
    ("parallelism.global_batch_size", "train.global_batch_size"),
    ("training.train_iters", "train.train_iters"),
    ("model.num_layers", "model.num_layers"),
    ("model.hidden_size", "model.hidden_size"),
    ("model.num_attention_heads", "model.num_attention_heads"),
    ("model.num_query_groups", "model.num_query_groups"),
    ("model.ffn_hidden_size", "model.ffn_hidden_size"),
    ("model.kv_channels", "model.kv_channels"),
    ("model.num_experts", "model.num_moe_experts"),
    ("model.moe_router_topk", "model.moe_router_topk"),
    ("model.moe_ffn_hidden_size", "model.moe_ffn_hidden_size"),
    *moe_routing_keys("model"),
    ("model.vocab_size", "model.vocab_size"),
)
"""Scenario field <- ``ConfigContainer`` key (the MoE routing knobs: ``moe_routing_keys``)."""


def _catalog() -> Mapping[str, object]:
    return load_data(_DATA)


def _section(name: str) -> Mapping[str, object]:
    return mapping_of(_catalog().get(name))


def _cite(repo_key: object, path: object) -> str:
    repo = mapping_of(_section("repos").get(str(repo_key)))
    return f"{repo.get('repo', 'NVIDIA-NeMo/Megatron-Bridge')}/{path}@{str(repo.get('commit'))[:7]}"


def _script(program: str) -> tuple[str, Mapping[str, object]] | None:
    """The catalogued entry script ``program`` runs (matched by its path's end)."""
    for key, entry in _section("scripts").items():
        if (
            program == key
            or program.endswith("/" + key)
            or (
                posixpath.basename(program) == posixpath.basename(str(key))
                and str(key).startswith("examples/")
            )
        ):
            return str(key), mapping_of(entry)
    return None


def _unwrap(invocation: Invocation) -> Invocation | None:
    """``invocation`` itself when it runs an entry script; else the script found inside a
    wrapper the shell layer left (``bash -c "uv run python .../run_recipe.py ..."``)."""
    if _script(invocation.program) is not None:
        return invocation
    if posixpath.basename(invocation.program) not in _WRAPPERS:
        return None
    words = list(invocation.args)
    if "-c" in words[:2]:
        text = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else ""
        try:
            words = shlex.split(text)
        except ValueError:
            return None
    for index, word in enumerate(words):
        if _script(word) is not None:
            return Invocation(
                program=word,
                args=tuple(words[index + 1 :]),
                env=invocation.env,
                cwd=invocation.cwd,
                launcher=invocation.launcher,
                launcher_args=invocation.launcher_args,
                where=invocation.where,
            )
    return None


@dataclass(slots=True)
class _Run:
    """One script run: its recipe, config and mode; ``function`` holds the values the recipe
    function builds (dotted key, value, source), which the merged ``config`` starts from."""

    recipe: str = ""
    entry: Mapping[str, object] = field(default_factory=dict)
    config: HydraConfig = field(default_factory=HydraConfig)
    mode: str = "pretrain"
    function: list[tuple[str, object, str]] = field(default_factory=list)


class MegatronBridgeReader:
    """Reads Megatron-Bridge recipe launches (module docstring)."""

    name = "megatron_bridge"

    def recognises(self, invocation: Invocation) -> bool:
        """An entry script of the catalog (``pretrain_llama3_8b.py``, ``run_recipe.py`` with
        ``--recipe`` / ``--model``), directly or inside a shell wrapper."""
        found = _unwrap(invocation)
        if found is None:
            return False
        key, _ = _script(found.program) or ("", {})
        if key.endswith("run_recipe.py"):
            return any(a.split("=", 1)[0] in {"--recipe", "--model"} for a in found.args)
        return True

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the first run trains. Raises ``SourceError`` when a ``--config-file`` the
        launch names is missing, ``SpecError`` when it cannot be parsed."""
        facts = Facts()
        facts.set("training.framework", "nemo", _FRAMEWORK_SOURCE)
        found = _unwrap(invocation) or invocation
        run = _read_run(found, context, facts)
        release = launch_release(context.allocation, invocation)
        _to_facts(run, found, context, facts, None if release is None else release[0])
        _note_sweep(invocation, run, context, facts)
        return facts


def _read_run(invocation: Invocation, context: ReadContext, facts: Facts | None) -> _Run:
    key, script = _script(invocation.program) or ("", {})
    run = _Run()
    args = list(invocation.args)
    if key.endswith("run_recipe.py"):
        overrides = _run_recipe_args(args, script, run, facts)
    else:
        overrides = _example_args(invocation, script, run, context, facts)
    for arg in overrides:
        if unexpanded(arg):
            if facts is not None:
                facts.note(f"{arg!r}: no value (a shell variable left unexpanded); ignored")
            continue
        if _refused_under_name(run, arg, facts):
            continue
        if not run.config.apply_override(arg) and facts is not None:
            facts.note(f"argument {arg!r} is not a KEY=VALUE override; ignored")
        parsed = split_override(arg)
        if parsed is not None and parsed[0] == "delete":
            _keep_function_values(run, parsed[1], arg, facts)
    return run


def _keep_function_values(run: _Run, key: str, arg: str, facts: Facts | None) -> None:
    """After ``~key``: the recipe function's values under ``key`` again. Megatron-Bridge
    deletes the key from the merged OmegaConf config only, and ``apply_overrides`` sets on the
    function's ``ConfigContainer`` the keys that config holds, so the function's own values
    under a deleted key stay (``training/utils/omegaconf_utils.py``
    ``process_config_with_overrides`` @ 067f987, ``examples/recipes/llama/
    pretrain_llama3_8b.py`` @ 7e8111c2)."""
    kept = False
    for dotted, value, source in run.function:
        if dotted == key or dotted.startswith(key + "."):
            run.config.set(dotted, value, source)
            kept = True
        elif key.startswith(dotted + ".") and isinstance(value, Mapping):
            inner: object = value
            for part in key[len(dotted) + 1 :].split("."):
                inner = inner.get(part) if isinstance(inner, Mapping) else None
            if inner is not None:
                run.config.set(key, inner, source)
                kept = True
    if kept and facts is not None:
        facts.note(
            f"{arg!r} removes the key from the merged config only: the recipe function's "
            "value stays"
        )


def _refused_under_name(run: _Run, arg: str, facts: Facts | None) -> bool:
    """True for a ``mixed_precision.<key>=v`` (or ``~mixed_precision.<key>``) override while
    ``mixed_precision`` holds a recipe name, which Megatron-Bridge's ``parse_hydra_overrides``
    refuses (the config is in struct mode and OmegaConf.update replaces the name by an empty
    mapping without the key: "Could not override", the script stops); noted and ignored.
    ``+`` / ``++`` add the key to that empty mapping, which ``apply_overrides`` then applies
    over the recipe function's own precision config: over its fields where the function built
    one (``mixed_precision_built``), so they are put back first (facebookresearch/hydra
    ``hydra/_internal/config_loader_impl.py`` ``_apply_overrides_to_config`` @ v1.3.2,
    omry/omegaconf ``omegaconf/omegaconf.py`` ``update`` @ v2.3.0)."""
    parsed = split_override(arg)
    if parsed is None or not parsed[1].startswith("mixed_precision."):
        return False
    name = run.config.value("mixed_precision")
    if not isinstance(name, str):
        return False
    if parsed[0] in ("set", "delete"):
        if facts is not None:
            refusal = '"Could not override"' if parsed[0] == "set" else '"Could not delete"'
            facts.note(
                f"{arg!r}: mixed_precision holds the recipe name {name!r}, under which Hydra "
                f"sets or deletes no key ({refusal}; the script stops); ignored"
            )
        return True
    built, source = _function_precision(run)
    if isinstance(built, Mapping):
        run.config.set("mixed_precision", built, source)
        if facts is not None:
            facts.note(
                f"{arg!r} replaces the recipe name {name!r} by a mapping, applied over the "
                f"recipe's own {run.entry.get('mixed_precision')}()"
            )
    return False


def _function_precision(run: _Run) -> tuple[object, str]:
    """The ``mixed_precision`` the recipe function builds (a name, or the fields of the config
    it built) and its source; ``(None, "")`` when no catalogued recipe was loaded."""
    for dotted, value, source in run.function:
        if dotted == "mixed_precision":
            return value, source
    return None, ""


def _load_recipe(name: str, run: _Run, facts: Facts | None) -> None:
    recipes = _section("recipes")
    entry = mapping_of(recipes.get(name))
    if not entry:
        for candidate, value in recipes.items():
            aliases = mapping_of(value).get("aliases")
            if isinstance(aliases, list) and name in aliases:
                name, entry = str(candidate), mapping_of(value)
                break
    run.recipe = name
    if not entry:
        if facts is not None:
            facts.note(
                f"Megatron-Bridge recipe {name!r} is not in the catalog; only overrides read"
            )
        return
    run.entry = entry
    cited = _cite(entry.get("repo_key"), entry.get("path"))
    source = f"catalog:{name} (Megatron-Bridge recipe, {cited})"
    for section in ("model", "train", "dataset"):
        for field_name, value in mapping_of(entry.get(section)).items():
            run.function.append((f"{section}.{field_name}", value, source))
    precision = entry.get("mixed_precision")
    built = recipe_precision(precision) if isinstance(precision, str) else None
    if entry.get("mixed_precision_built") is True and built is not None:
        cite = f"{source}: {precision}() ({_recipe_cite(str(precision))})"
        run.function.append(("mixed_precision", built, cite))
    else:
        run.function.append(("mixed_precision", precision, source))
    run.function.append(("tokenizer.tokenizer_type", entry.get("tokenizer"), source))
    strategy = mapping_of(_section("ddp_sharding_strategy").get("recipes")).get(name)
    if strategy is not None:
        run.function.append(("ddp.data_parallel_sharding_strategy", strategy, source))
    for dotted, value, cite in run.function:
        run.config.set(dotted, value, cite)


def _example_args(
    invocation: Invocation,
    script: Mapping[str, object],
    run: _Run,
    context: ReadContext,
    facts: Facts | None,
) -> list[str]:
    """``pretrain_llama3_8b.py``: ``--config-file`` (default next to the script), ``--debug``,
    then the overrides."""
    given, overrides = split_options(invocation.args, {"--config-file"})
    config_file = given[-1][1] if given else None
    _load_recipe(str(script.get("recipe", "")), run, facts)
    if config_file is not None:
        path = resolve_path(config_file, invocation.cwd)
        if not context.files.exists(path):
            raise SourceError(
                path,
                "the --config-file YAML is not in the job's files (the "
                "script exits without it); add the file or fix the path",
            )
        run.config.merge_tree(read_config(context.files, path))
        return overrides
    default = str(script.get("default_config_file", ""))
    if not default:
        return overrides
    script_dir = posixpath.dirname(resolve_path(invocation.program, invocation.cwd))
    path = posixpath.join(script_dir, default)
    if context.files.exists(path):
        run.config.merge_tree(read_config(context.files, path))
        if facts is not None:
            facts.note(f"--config-file not given: the script's default {default} is applied")
        return overrides
    published = mapping_of(script.get("default_config_values"))
    values = mapping_of(published.get("values"))
    source = (
        "default of Megatron-Bridge (--config-file default "
        f"{_cite(script.get('repo_key'), published.get('path'))})"
    )
    run.config.merge_values({str(k): v for k, v in values.items()}, source)
    if facts is not None:
        facts.note(
            f"--config-file not given and {default} is not in the job's files: its "
            "published values are applied"
        )
    return overrides


def _run_recipe_args(
    args: Sequence[str], script: Mapping[str, object], run: _Run, facts: Facts | None
) -> list[str]:
    """``run_recipe.py``: ``--recipe`` / ``--model`` + ``--mode``, convenience options
    (turned into overrides first), then the trailing overrides."""
    options = mapping_of(script.get("options"))
    valued = script.get("valued_options")
    takes_value = set(valued) if isinstance(valued, list) else set()
    given, trailing = split_options(args, {*options, *takes_value})
    converted = [f"{options[name]}={value}" for name, value in given if name in options]
    chosen = {
        name.lstrip("-").replace("-", "_"): value for name, value in given if name not in options
    }
    mode = chosen.get("mode", "")
    if "recipe" in chosen:
        name = chosen["recipe"]
        mode = mode or next((m for m in _RECIPE_MODES if f"_{m}" in name), "")
    else:
        task = "pretrain" if mode in {"", "pretrain"} else "finetune"
        name = f"{chosen.get('model', '')}_{task}_config"
    run.mode = _RECIPE_MODES.get(mode, "pretrain")
    _load_recipe(name, run, facts)
    if "dataset" in chosen and facts is not None:
        facts.note(f"--dataset {chosen['dataset']}: its data settings are not read")
    return [*converted, *trailing]


def _to_facts(
    run: _Run, invocation: Invocation, context: ReadContext, facts: Facts, release: str | None
) -> None:
    config = run.config
    facts.set("training.mode", run.mode, f"launch: {posixpath.basename(invocation.program)}")
    hf_path = run.entry.get("hf_path")
    if isinstance(hf_path, str):
        source = f"catalog:{run.recipe} (hf_path)"
        if not resolve_model(
            hf_path, facts=facts, files=context.files, cwd=invocation.cwd, source=source
        ):
            facts.note(f"{hf_path}: the model's shape is not known to the catalog")
    if run.recipe:
        facts.set("launch.recipe", run.recipe, f"launch: {posixpath.basename(invocation.program)}")
    config_facts(config, facts, release)
    vocab = as_int(facts.get("model.vocab_size"))
    if vocab:
        facts.set(
            "launch.padded_vocab_size",
            vocab,
            "derived: the model's vocab_size (HF config) is kept unpadded "
            f"({_cite(run.entry.get('repo_key', 'llama_qwen'), _SETUP)} "
            "_validate_and_set_vocab_size)",
        )
    _note_mapping_over_name(run, facts)
    for key in sorted(config.unknown):
        facts.note(f"{key}: its interpolation cannot be resolved from the files")


def _note_mapping_over_name(run: _Run, facts: Facts) -> None:
    """Note a ``mixed_precision`` mapping (from the ``--config-file`` or ``+`` overrides) where
    the recipe function holds a name: ``apply_overrides`` sets the mapping itself (it edits
    field by field only a dataclass, instantiates only a mapping with ``_target_``), which
    ``runtime_config_update`` can neither resolve nor finalize (training/utils/
    omegaconf_utils.py ``_apply_overrides``, training/config.py @ v0.2.0)."""
    declared = run.config.value("mixed_precision")
    original, _ = _function_precision(run)
    if isinstance(declared, Mapping) and "_target_" not in declared and isinstance(original, str):
        facts.note(
            f"mixed_precision is a mapping where {run.recipe} holds the name {original!r}: "
            "Megatron-Bridge sets the mapping itself, which it cannot finalize (the script "
            "stops); read as a MixedPrecisionConfig of its keys"
        )


def config_facts(config: HydraConfig, facts: Facts, release: str | None = None) -> None:
    """The values of a ``ConfigContainer`` (the job's merged config, or the one its log
    prints): layout, batch, steps and model shape as the keys hold them, the sequence length
    (``dataset.seq_length``, else ``model.seq_length``) and the precision; ``release`` the
    NeMo Framework container the launch names (None: the newest), which decides the optimizer
    dtypes under Megatron-FSDP (:func:`_optimizer`)."""
    for name, key in _FACTS:
        found = config.lookup(key)
        if found is not None and found.value is not None:
            facts.set(name, found.value, found.source)
    seq = config.lookup("dataset.seq_length") or config.lookup("model.seq_length")
    if seq is not None and seq.value is not None:
        facts.set("model.seq_length", seq.value, seq.source)
    model_seq = config.lookup("model.seq_length")
    if model_seq is not None and seq is not None and model_seq.value != seq.value:
        facts.note(
            f"model.seq_length {model_seq.value} differs from dataset.seq_length {seq.value}"
        )
    _optimizer(config, facts, _precision(config, facts), release)
    _cuda_graphs(config, facts)
    _offloading(config, facts)
    _recompute(config, facts)
    _megatron_fsdp(config, facts)


def _megatron_fsdp(config: HydraConfig, facts: Facts) -> None:
    """Under Megatron-FSDP (``ddp.use_megatron_fsdp`` or ``dist.use_megatron_fsdp``: the
    ``ConfigContainer`` turns both on when either is, ``training/config.py``), its ZeRO stage
    (``megatron_fsdp_facts``) from ``ddp.data_parallel_sharding_strategy``: the merged
    config's or the recipe's, else Megatron-Core's default. Without it the layout keeps the
    scenario's default stage, the distributed optimizer the recipes set."""
    found = _megatron_fsdp_on(config)
    if found is None:
        return
    strategy = config.lookup("ddp.data_parallel_sharding_strategy")
    if strategy is None:
        megatron_fsdp_facts(facts, found.source, None, "")
    else:
        megatron_fsdp_facts(facts, found.source, strategy.value, strategy.source)


def _megatron_fsdp_on(config: HydraConfig) -> Resolved | None:
    """The key that turns Megatron-FSDP on (``ddp.use_megatron_fsdp`` or
    ``dist.use_megatron_fsdp``), None where neither does."""
    keys = ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")
    return next((f for f in map(config.lookup, keys) if f is not None and f.value is True), None)


def _recompute(config: HydraConfig, facts: Facts) -> None:
    """``parallelism.recompute`` from the provider's ``model.recompute_granularity``
    (``selective`` or ``full``) and, under ``full`` with ``model.recompute_method`` ``block``,
    ``parallelism.recompute_num_layers`` from ``model.recompute_num_layers`` (the first layers
    of each pipeline model chunk recomputed; ``uniform`` recomputes every layer). The
    performance scripts set the three in ``set_recompute_overrides``
    (NVIDIA-NeMo/Megatron-Bridge ``scripts/performance/utils/helpers.py`` @ ``v0.1.0rc3`` and
    ``v0.2.0``)."""
    granularity = config.lookup("model.recompute_granularity")
    if granularity is None or granularity.value not in ("selective", "full"):
        return
    facts.set("parallelism.recompute", granularity.value, granularity.source)
    method = config.lookup("model.recompute_method")
    layers = config.lookup("model.recompute_num_layers")
    if layers is None:
        return
    count = block_recompute_layers(
        granularity.value, None if method is None else method.value, layers.value
    )
    if count is not None:
        facts.set("parallelism.recompute_num_layers", count, layers.source)


def _offloading(config: HydraConfig, facts: Facts) -> None:
    """``parallelism.activation_offload_layers`` from the provider's Megatron-Core CPU
    offloading (``model.cpu_offloading`` with ``cpu_offloading_num_layers``; activations
    unless ``cpu_offloading_activations`` is false, its ``TransformerConfig`` default true; the
    performance scripts set them in ``set_recompute_overrides``, NVIDIA-NeMo/Megatron-Bridge
    ``scripts/performance/utils/helpers.py`` @ ``v0.2.0``)."""
    enabled = config.lookup("model.cpu_offloading")
    layers = config.lookup("model.cpu_offloading_num_layers")
    activations = config.lookup("model.cpu_offloading_activations")
    if (
        enabled is not None
        and enabled.value is True
        and layers is not None
        and isinstance(layers.value, int)
        and not (activations is not None and activations.value is False)
    ):
        facts.set("parallelism.activation_offload_layers", layers.value, layers.source)


def _cuda_graphs(config: HydraConfig, facts: Facts) -> None:
    """``training.cuda_graphs`` from the model provider's Megatron-Core CUDA-graph fields
    (``model.cuda_graph_impl``, ``model.cuda_graph_scope`` or ``model.cuda_graph_modules``,
    the older ``model.enable_cuda_graph`` / ``model.external_cuda_graph``; the performance
    scripts set them per GPU, NVIDIA-NeMo/Megatron-Bridge ``scripts/performance/utils/
    helpers.py`` ``set_cuda_graph_overrides`` @ ``v0.2.0``), as
    ``planner.scenario.megatron_table.cuda_graphs_of`` reads them; nothing when none is set."""
    impl = config.lookup("model.cuda_graph_impl")
    scope = config.lookup("model.cuda_graph_scope") or config.lookup("model.cuda_graph_modules")
    enable = config.lookup("model.enable_cuda_graph")
    external = config.lookup("model.external_cuda_graph")
    impl_value = impl.value if impl is not None else None
    if impl_value is None and external is not None and external.value is True:
        impl, impl_value = external, "transformer_engine"
    legacy = impl_value is None and enable is not None and enable.value is True
    value = cuda_graphs_of(impl_value, scope.value if scope is not None else None, legacy=legacy)
    if value is None:
        return
    found = impl if impl_value is not None else enable
    if value == "full_iteration" and impl_value != "full_iteration" and scope is not None:
        found = scope
    if found is not None:
        facts.set("training.cuda_graphs", value, found.source)


_LOW_PRECISION = frozenset({"fp8", "mxfp8", "nvfp4"})


def recipe_precision(name: str) -> dict[str, object] | None:
    """The fields of ``MixedPrecisionConfig`` the reader reads (``mixed_precision_defaults``) as
    Megatron-Bridge's named recipe ``name`` sets them (its base recipe's, then its own; the
    catalog's ``mixed_precision_recipes``), a hyphenated name read as underscored
    (``get_mixed_precision_config`` from v0.2.0); None for a name no catalogued release
    registers."""
    recipes = _section("mixed_precision_recipes")
    values = dict(_section("mixed_precision_defaults"))
    chain: list[Mapping[str, object]] = []
    key: object = name.replace("-", "_")
    while isinstance(key, str) and key in recipes and len(chain) < len(recipes):
        entry = mapping_of(recipes[key])
        chain.append(entry)
        key = entry.get("base")
    if not chain:
        return None
    for entry in reversed(chain):
        values.update({k: v for k, v in entry.items() if k in values})
    return values


def _recipe_cite(name: str) -> str:
    """Where the named recipe's values come from: the file at each catalogued ref registering it
    (with its NeMo Framework container)."""
    entry = mapping_of(_section("mixed_precision_recipes").get(name.replace("-", "_")))
    sources = _section("mixed_precision_sources")
    refs = entry.get("sources")
    cited = []
    for ref in refs if isinstance(refs, list) else []:
        source = mapping_of(sources.get(str(ref)))
        container = source.get("container")
        suffix = f", container {container}" if container else ""
        cited.append(f"{ref} ({str(source.get('commit'))[:12]}{suffix})")
    path = _catalog().get("mixed_precision_path")
    return f"NVIDIA-NeMo/Megatron-Bridge/{path} @ " + ", ".join(cited)


def _note_releases(name: str, facts: Facts) -> None:
    """Note the catalogued releases whose Megatron-Bridge would not take the recipe name
    ``name`` (a recipe they do not register, a hyphenated name before v0.2.0): the launch
    stops there (``get_mixed_precision_config`` raises ValueError)."""
    sources = _section("mixed_precision_sources")
    entry = mapping_of(_section("mixed_precision_recipes").get(name.replace("-", "_")))
    takes = entry.get("sources")
    refs = set(takes) if isinstance(takes, list) else set()
    hyphen = _catalog().get("mixed_precision_hyphen_refs")
    if "-" in name and isinstance(hyphen, list):
        refs &= set(hyphen)
    missing = [
        f"{ref} (container {mapping_of(source).get('container')})"
        for ref, source in sources.items()
        if ref not in refs and mapping_of(source).get("container")
    ]
    if missing:
        facts.note(
            f"mixed_precision {name!r} is not a recipe name Megatron-Bridge "
            f"{', '.join(missing)} takes (get_mixed_precision_config raises ValueError)"
        )


def _precision_fields(config: HydraConfig, facts: Facts) -> dict[str, Resolved] | None:
    """The ``MixedPrecisionConfig`` fields the reader reads, as ``runtime_config_update``
    leaves them: a recipe name's (:func:`recipe_precision`), else the mapping's keys over the
    dataclass defaults; None without a mixed-precision config or with a name Megatron-Bridge
    does not know (noted: ``get_mixed_precision_config`` raises and the training stops)."""
    found = config.lookup("mixed_precision")
    if found is None or found.value is None:
        return None
    if isinstance(found.value, str):
        values = recipe_precision(found.value)
        if values is None:
            facts.note(
                f"mixed_precision {found.value!r} is not a Megatron-Bridge precision recipe "
                "(get_mixed_precision_config raises ValueError before the first step); the "
                "precision is not read"
            )
            return None
        _note_releases(found.value, facts)
        source = f"{found.source} ({found.value}: {_recipe_cite(found.value)})"
        return {key: Resolved(value, source) for key, value in values.items()}
    fields = {}
    for key, default in _section("mixed_precision_defaults").items():
        given = config.lookup(f"mixed_precision.{key}")
        fields[str(key)] = given or Resolved(
            default, f"{found.source} (MixedPrecisionConfig default {key} {default})"
        )
    return fields


def scenario_precision(values: Mapping[str, object]) -> dict[str, tuple[object, str]]:
    """The scenario's ``parallelism`` precision fields of a ``MixedPrecisionConfig`` holding
    ``values`` (the keys of :func:`recipe_precision`): field -> (value, the config field it is
    read from). ``grad_reduce_in_fp32`` as given (``MixedPrecisionConfig.setup`` copies it over
    the DDP config's); ``precision`` from ``fp4`` (nvfp4), ``fp8`` (``mxfp8`` under the
    ``mxfp8`` recipe, else ``fp8``), ``fp16`` or ``bf16``, none in fp32 or with both fp4 and fp8
    (which ``MixedPrecisionConfig.finalize`` refuses); ``fp8_recipe`` from ``fp8_recipe`` or
    ``fp4_recipe``; ``fp8_param_gather`` under fp8 and mxfp8, elsewhere only when true (a
    gather the precision cannot run, which the scenario then refuses)."""
    out: dict[str, tuple[object, str]] = {}
    reduce = values.get("grad_reduce_in_fp32")
    if isinstance(reduce, bool):
        out["grad_reduce_in_fp32"] = (reduce, "grad_reduce_in_fp32")
    fp4, fp8, recipe = values.get("fp4"), values.get("fp8"), values.get("fp8_recipe")
    if fp4 and not fp8:
        out["precision"] = ("nvfp4", "fp4")
        if values.get("fp4_recipe") == "nvfp4":
            out["fp8_recipe"] = ("nvfp4", "fp4_recipe")
    elif fp8 and not fp4:
        out["precision"] = ("mxfp8", "fp8_recipe") if recipe == "mxfp8" else ("fp8", "fp8")
        if recipe in FP8_RECIPES:
            out["fp8_recipe"] = (recipe, "fp8_recipe")
    elif not fp8:
        for name in ("fp16", "bf16"):
            if values.get(name) is True:
                out["precision"] = (name, name)
                break
    gather = values.get("fp8_param_gather")
    low = out.get("precision", (None, ""))[0] in ("fp8", "mxfp8")
    if isinstance(gather, bool) and (low or gather is True):
        out["fp8_param_gather"] = (gather, "fp8_param_gather")
    return out


def _optimizer(
    config: HydraConfig,
    facts: Facts,
    fields: Mapping[str, Resolved] | None,
    release: str | None = None,
) -> None:
    """The optimizer's dtypes from ``optimizer.*`` (Megatron-Core's ``OptimizerConfig``, which
    Megatron-Bridge's subclasses; ``nemo_common.optimizer_config_facts``). ``fields``: the
    resolved ``MixedPrecisionConfig`` (``_precision``), whose ``bf16`` and ``fp8_recipe``
    ``MixedPrecisionConfig.setup`` copies over the ``OptimizerConfig`` before
    ``runtime_config_update``'s ``validate`` runs its deferred ``__post_init__``
    (``OptimizerConfig.finalize``, src/megatron/bridge/training/config.py @
    067f987df03b8355b03192d88d70f1709fedf51a, @ v0.2.0, 7af9601c9da7, and @ v0.1.0rc3,
    bf71eba07bae): ``bf16_mixed`` leaves
    ``fp8_recipe`` at its default ``tensorwise``, so the fp32 master stays whole there; without
    a mixed-precision config, the ``optimizer.*`` keys. Under Megatron-FSDP
    (:func:`_megatron_fsdp_on`) as ``megatron_fsdp_master`` says for the container ``release``:
    Megatron-Bridge clears ``preserve_fp32_weights`` under the precision-aware optimizer
    through v0.2.2 (NeMo Framework 25.11), so ``FusedAdam`` keeps the master there."""
    if fields is not None:
        bf16, recipe = fields["bf16"].value is True, fields["fp8_recipe"].value
    else:
        own, recipe_found = config.lookup("optimizer.bf16"), config.lookup("optimizer.fp8_recipe")
        bf16 = own is not None and own.value is True
        recipe = None if recipe_found is None else recipe_found.value
    optimizer_config_facts(
        config.lookup,
        "optimizer.",
        facts,
        bf16=bf16,
        fp8_recipe=recipe,
        default_source="Megatron-Core OptimizerConfig",
        megatron_fsdp=None
        if _megatron_fsdp_on(config) is None
        else megatron_fsdp_master(release, clears_preserve=True),
        release=release,
    )


def _precision(config: HydraConfig, facts: Facts) -> dict[str, Resolved] | None:
    """``parallelism.precision``, ``fp8_recipe``, ``fp8_param_gather`` and
    ``grad_reduce_in_fp32`` from ``mixed_precision`` (:func:`_precision_fields`: a named
    recipe's values or a mapping's over ``MixedPrecisionConfig``'s defaults, read by
    :func:`scenario_precision`); without a mixed-precision config,
    ``ddp.grad_reduce_in_fp32``. The 16-bit first and last layers of the current-scaling
    recipes are noted (no scenario field holds them), and so is an fp16 base under fp8 or fp4
    GEMMs (the ``fp16_with_*`` recipes, read as the low precision:
    :func:`~planner.launch.readers.nemo_common.fp16_base_note`). Returns the resolved
    ``MixedPrecisionConfig`` fields, None without one (or with a name it does not know)."""
    if config.value("mixed_precision") is None:
        found = config.lookup("ddp.grad_reduce_in_fp32")
        if found is not None and isinstance(found.value, bool):
            facts.set("parallelism.grad_reduce_in_fp32", found.value, found.source)
        return None
    fields = _precision_fields(config, facts)
    if fields is None:
        return None
    settings = scenario_precision({key: found.value for key, found in fields.items()})
    for name, (value, key) in settings.items():
        facts.set(f"parallelism.{name}", value, fields[key].source)
    precision = settings.get("precision", (None, ""))[0]
    if precision in _LOW_PRECISION and fields["fp16"].value is True:
        facts.note(fp16_base_note(str(precision), fields["fp16"].source))
    start, end = (fields[f"num_layers_at_{side}_in_bf16"].value for side in ("start", "end"))
    if (
        precision in _LOW_PRECISION
        and fields["first_last_layers_bf16"].value is True
        and (start or end)
    ):
        facts.note(sixteen_bit_layers_note(start, end, str(precision), "mixed_precision"))
    return fields


def _layout(run: _Run) -> str:
    parts = []
    for label, key in _LAYOUT:
        found = run.config.lookup(key)
        parts.append(f"{label} {found.value if found is not None else '?'}")
    return ", ".join(parts)


def _note_sweep(invocation: Invocation, run: _Run, context: ReadContext, facts: Facts) -> None:
    """Note the other runs of the same entry script in the launch (a layout sweep)."""
    others = []
    seen_first = False
    for sibling in context.invocations:
        unwrapped = _unwrap(sibling)
        if unwrapped is None:
            continue
        if sibling == invocation and not seen_first:
            seen_first = True
            continue
        others.append(_layout(_read_run(unwrapped, context, None)))
    if others:
        facts.note(
            f"the job runs {len(others) + 1} trainings in sequence; described: the first "
            f"({_layout(run)}); then: " + "; ".join(others)
        )


READER = MegatronBridgeReader()
