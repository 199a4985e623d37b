"""The Megatron argument table shared by the Megatron-LM flag parser
(:mod:`planner.scenario.megatron_args`) and the launch readers
(``planner.launch.readers.megatron`` / ``megatron_deepspeed``).

:func:`parse_megatron_args` turns tokens into ``{argument: value}`` (names without dashes);
:data:`INT_ARGS` lists integer arguments that are one scenario field each; the ``*_values``
functions turn the arguments of one concern (precision, MoE, attention, pipeline split,
recompute, gradient reduction) into :class:`ArgValue` rows: a dotted scenario field, its value
and the argument that sets it (``""`` where the value is Megatron-LM's default). Names and
semantics follow NVIDIA/Megatron-LM ``megatron/training/arguments.py`` (``validate_args``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from planner.errors import SpecError
from planner.launch.data import load_data
from planner.launch.release import release_at_least
from planner.scenario.numbers import number_or_value

__all__ = [
    "FP8_RECIPES",
    "INT_ARGS",
    "LIST_ARGS",
    "MEGATRON_FSDP_STAGES",
    "SWITCHES",
    "TOKENIZER_VOCAB",
    "ArgValue",
    "Args",
    "attention_values",
    "block_recompute_layers",
    "cuda_graph_values",
    "cuda_graphs_of",
    "ddp_sharding_strategy_default",
    "fp8_param_gather_refusal",
    "fp8_param_gather_values",
    "fp8_recipe",
    "fused_adam_keeps_remainders",
    "grad_reduce_in_bf16_ignored",
    "gradient_reduction_values",
    "known_tokenizer_vocab",
    "layer_pattern",
    "main_grads_bf16_refused",
    "megatron_fsdp_flag",
    "megatron_int",
    "moe_values",
    "optimizer_dtypes_refused",
    "optimizer_state_values",
    "padded_vocab_size",
    "parse_megatron_args",
    "pipeline_values",
    "precision_value",
    "recompute_values",
    "sharding_strategy_default",
    "swiglu_ffn_hidden_size",
    "zero_stage_value",
]

Args = Mapping[str, str | bool]
"""Parsed arguments: name without the leading dashes (``num-layers``) -> its value as written,
or True for a switch (``--bf16``)."""


class ArgValue(NamedTuple):
    """One scenario value read from Megatron arguments: ``field`` (dotted, ``model.num_experts``),
    ``value``, and ``arg``, the argument that sets it (``""``: Megatron-LM's default)."""

    field: str
    value: object
    arg: str


TOKENIZER_VOCAB = (
    (re.compile(r"llama-?3|llama3", re.I), 128256),
    (re.compile(r"llama-?2|llama2", re.I), 32000),
    (re.compile(r"mixtral-8x22b", re.I), 32768),
    (re.compile(r"mistral|mixtral", re.I), 32000),
    (re.compile(r"qwen", re.I), 151936),
    (re.compile(r"nemotron", re.I), 256000),
    (re.compile(r"gpt-?neox|pythia", re.I), 50277),
)
"""Vocabulary sizes of tokenizers named in ``--tokenizer-model`` (model cards / config.json)."""

SWITCHES = frozenset(
    {
        "swiglu",
        "squared-relu",
        "untie-embeddings-and-output-weights",
        "sequence-parallel",
        "use-distributed-optimizer",
        "use-torch-fsdp2",
        "use-megatron-fsdp",
        "use-custom-fsdp",
        "group-query-attention",
        "recompute-activations",
        "checkpoint-activations",
        "bf16",
        "fp16",
        "use-flash-attn",
        "overlap-grad-reduce",
        "overlap-param-gather",
        "tp-comm-overlap",
        "accumulate-allreduce-grads-in-fp32",
        "grad-reduce-in-bf16",
        "use-precision-aware-optimizer",
        "multi-latent-attention",
        "qk-layernorm",
        "qk-l2-norm",
        "moe-grouped-gemm",
        "moe-router-force-load-balancing",
        "moe-pad-expert-input-to-capacity",
        "overlap-moe-expert-parallel-comm",
        "moe-enable-deepep",
        "account-for-embedding-in-pipeline-split",
        "account-for-loss-in-pipeline-split",
        "deepspeed",
        "no-pipeline-parallel",
        "deepspeed-activation-checkpointing",
        "enable-expert-tensor-parallelism",
        "enable-cuda-graph",
        "external-cuda-graph",
        "disable-bias-linear",
    }
)
"""Arguments that take no value (argparse ``store_true``) of Megatron-LM and Megatron-DeepSpeed."""

LIST_ARGS = frozenset(
    {"recompute-modules", "rampup-batch-size", "cuda-graph-scope", "cuda-graph-modules"}
)
"""Megatron-LM arguments that take several values (argparse ``nargs``); their values are joined
by spaces. (Megatron-DeepSpeed adds ``--num-experts``, a list there.)"""

INT_ARGS: tuple[tuple[str, str], ...] = (
    ("num-layers", "model.num_layers"),
    ("hidden-size", "model.hidden_size"),
    ("num-attention-heads", "model.num_attention_heads"),
    ("ffn-hidden-size", "model.ffn_hidden_size"),
    ("kv-channels", "model.kv_channels"),
    ("moe-ffn-hidden-size", "model.moe_ffn_hidden_size"),
    ("mtp-num-layers", "model.mtp_num_layers"),
    ("tensor-model-parallel-size", "parallelism.tensor_parallel"),
    ("pipeline-model-parallel-size", "parallelism.pipeline_parallel"),
    ("context-parallel-size", "parallelism.context_parallel"),
    ("expert-model-parallel-size", "parallelism.expert_parallel"),
    ("expert-tensor-parallel-size", "parallelism.expert_tensor_parallel"),
    ("micro-batch-size", "parallelism.micro_batch_size"),
    ("global-batch-size", "parallelism.global_batch_size"),
    ("train-iters", "training.train_iters"),
)
"""Integer arguments that are one scenario field each, as Megatron-LM names them."""

_ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def parse_megatron_args(
    tokens: Iterable[str],
    *,
    switches: frozenset[str] = SWITCHES,
    lists: frozenset[str] = LIST_ARGS,
) -> dict[str, str | bool]:
    """``{argument: value}`` of a token sequence, as argparse reads Megatron's arguments:
    ``--name value`` and ``--name=value`` (underscores in names read as dashes), ``switches``
    without a value, ``lists`` with every value up to the next ``--`` argument (joined by
    spaces); a later occurrence wins. Shell assignments among the tokens (``N=8``) are kept as
    variables and expanded in later values (``$N``, ``${N:-8}``); other tokens are skipped."""
    variables: dict[str, str] = {}
    args: dict[str, str | bool] = {}
    items = list(tokens)

    def expand(value: str) -> str:
        def repl(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(3)
            default = match.group(2)
            return variables.get(name, default if default is not None else match.group(0))

        return _VAR.sub(repl, value)

    i = 0
    while i < len(items):
        token = items[i]
        i += 1
        assignment = _ASSIGNMENT.match(token)
        if assignment and not token.startswith("-"):
            name, value = assignment.group(1), assignment.group(2).strip("()")
            if value.startswith("--"):  # GPT_ARGS=--num-layers (quoted group was split)
                token = value
            else:
                variables[name] = expand(value)
                continue
        if not token.startswith("--") or len(token) == 2:
            continue
        key, eq, value = token[2:].partition("=")
        key = key.replace("_", "-")
        if key in lists and not eq:  # nargs: every value up to the next flag
            values = []
            while i < len(items) and not items[i].startswith("--"):
                values.append(expand(items[i]))
                i += 1
            args[key] = " ".join(values)
        elif eq:
            args[key] = expand(value)
        elif key in switches:
            args[key] = True
        elif i < len(items) and not items[i].startswith("--"):
            args[key] = expand(items[i])
            i += 1
        else:
            args[key] = True
    return args


def megatron_int(args: Args, key: str) -> int | None:
    """``args[key]`` as an integer (``"8"``, ``"8.0"``, ``"1e3"``), else None."""
    value = args.get(key)
    if not isinstance(value, str):
        return None
    try:
        return int(value)
    except ValueError:
        try:
            as_float = float(value)
        except ValueError:
            return None
        return int(as_float) if as_float.is_integer() else None


def known_tokenizer_vocab(text: str) -> int | None:
    """Vocabulary of a tokenizer named in ``text`` (a ``--tokenizer-model`` path or Hugging Face
    id) by :data:`TOKENIZER_VOCAB`, else None."""
    return next((size for pattern, size in TOKENIZER_VOCAB if pattern.search(text)), None)


def padded_vocab_size(vocab: int, divisible_by: int, tensor_parallel: int) -> int:
    """``vocab`` rounded up to a multiple of ``divisible_by`` x ``tensor_parallel``, as Megatron's
    ``vocab_size_with_padding`` does (integer arithmetic: no float overflow on huge values)."""
    multiple = max(1, divisible_by) * max(1, tensor_parallel)
    return -(-vocab // multiple) * multiple


def swiglu_ffn_hidden_size(hidden: int) -> int:
    """Megatron's FFN width for ``--swiglu`` without ``--ffn-hidden-size``:
    ``int((4 * hidden * 2 / 3) / 64) * 64`` (``validate_args``)."""
    return int((4 * hidden * 2 / 3) / 64) * 64


def precision_value(args: Args) -> ArgValue | None:
    """The training precision the arguments ask for (``--fp4-format`` nvfp4, ``--fp8-format``
    fp8 or mxfp8 with ``--fp8-recipe mxfp8``, ``--fp16``, ``--bf16``); None when none is given
    (Megatron then trains in fp32, which the scenario format does not model)."""
    recipe = str(args.get("fp8-recipe", "")).lower()
    for arg in ("fp4-format", "fp4"):
        if arg in args:
            return ArgValue("parallelism.precision", "nvfp4", arg)
    for arg in ("fp8-format", "fp8"):
        if arg in args:
            return ArgValue("parallelism.precision", "mxfp8" if recipe == "mxfp8" else "fp8", arg)
    if args.get("fp16") is True:
        return ArgValue("parallelism.precision", "fp16", "fp16")
    if args.get("bf16") is True:
        return ArgValue("parallelism.precision", "bf16", "bf16")
    return None


FP8_RECIPES = frozenset({"delayed", "tensorwise", "blockwise", "mxfp8"})
"""Megatron-Core's fp8 recipe names (``--fp8-recipe``, ``fp8_recipe`` of the mixed-precision
configs) that the scenario's ``fp8_recipe`` holds."""


def fp8_recipe(args: Args, precision: str) -> str | None:
    """``--fp8-recipe`` (Megatron: delayed, the default, tensorwise, blockwise, mxfp8) or
    ``--fp4-recipe nvfp4``, for a low-precision run; None otherwise (the precision's
    default)."""
    if precision == "nvfp4":
        return "nvfp4"
    recipe = str(args.get("fp8-recipe", "")).lower()
    if precision in ("fp8", "mxfp8") and recipe in FP8_RECIPES:
        return recipe
    return None


def layer_pattern(text: str) -> int | list[int] | None:
    """``--moe-layer-freq``: an int, or a Python list expression of 0/1 such as
    ``([0]*3+[1]*58)`` or ``[1,0,1,0]`` (evaluated over list literals, ``*`` and ``+`` only);
    None when it is neither."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None

    def value(node: ast.expr) -> list[int] | int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.List):
            items = [value(e) for e in node.elts]
            whole = [i for i in items if isinstance(i, int)]
            if len(whole) == len(items):
                return whole
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(node.op, ast.Mult):
                if isinstance(left, list) and isinstance(right, int) and 0 <= right <= 100_000:
                    return left * right
                if isinstance(right, list) and isinstance(left, int) and 0 <= left <= 100_000:
                    return right * left
        raise ValueError("not a layer pattern")

    try:
        result = value(tree.body)
    except (ValueError, RecursionError):
        return None
    return result


def moe_values(args: Args) -> list[ArgValue]:
    """MoE options (Megatron-LM / Megatron-Core names) other than the expert count, top-k and
    expert width. The dispatcher defaults to Megatron's ``allgather``; ``--moe-enable-deepep``
    means the ``flex`` dispatcher over DeepEP.

    Expert biases (``model.moe_expert_bias``): Megatron-Core's ``add_bias_linear`` defaults to
    true and ``--disable-bias-linear`` (``store_false``) turns it off; the experts'
    ``linear_fc1`` / ``linear_fc2`` are built with ``bias=add_bias_linear``, so a MoE launch
    without the flag trains biased experts (NVIDIA/Megatron-LM
    ``megatron/training/arguments.py`` and ``megatron/core/transformer/transformer_config.py``,
    ``megatron/core/transformer/moe/experts.py`` ``TEGroupedMLP`` / ``SequentialMLP`` @
    ``core_v0.15.0``, 0d7e02bd)."""
    out: list[ArgValue] = []
    if args.get("disable-bias-linear") is True:
        out.append(ArgValue("model.moe_expert_bias", False, "disable-bias-linear"))
    else:
        out.append(ArgValue("model.moe_expert_bias", True, ""))
    dispatcher = args.get("moe-token-dispatcher-type")
    if args.get("moe-enable-deepep") is True:
        out.append(ArgValue("model.moe_token_dispatcher_type", "flex", "moe-enable-deepep"))
    elif isinstance(dispatcher, str):
        out.append(
            ArgValue("model.moe_token_dispatcher_type", dispatcher, "moe-token-dispatcher-type")
        )
    else:
        out.append(ArgValue("model.moe_token_dispatcher_type", "allgather", ""))
    for flag in (
        "moe-grouped-gemm",
        "moe-router-force-load-balancing",
        "moe-pad-expert-input-to-capacity",
        "overlap-moe-expert-parallel-comm",
    ):
        if args.get(flag) is True:
            out.append(ArgValue(f"model.{flag.replace('-', '_')}", True, flag))
    factor = args.get("moe-expert-capacity-factor")
    if isinstance(factor, str):  # text that is no number: parse_scenario names the field
        out.append(
            ArgValue(
                "model.moe_expert_capacity_factor",
                number_or_value(factor),
                "moe-expert-capacity-factor",
            )
        )
    for arg in ("moe-router-num-groups", "moe-router-group-topk"):
        value = megatron_int(args, arg)
        if value:
            out.append(ArgValue(f"model.{arg.replace('-', '_')}", value, arg))
    shared = megatron_int(args, "moe-shared-expert-intermediate-size")
    if shared:
        arg = "moe-shared-expert-intermediate-size"
        out.append(ArgValue("model.moe_shared_expert_intermediate_size", shared, arg))
        out.append(ArgValue("model.num_shared_experts", 1, arg))
    freq = args.get("moe-layer-freq")
    if isinstance(freq, str):
        pattern = layer_pattern(freq)
        out.append(
            ArgValue(
                "model.moe_layer_freq", pattern if pattern is not None else freq, "moe-layer-freq"
            )
        )
    return out


def attention_values(args: Args) -> list[ArgValue]:
    """Multi-latent attention (``--multi-latent-attention`` with its ranks and head widths),
    sliding windows (``--window-size`` as ``left`` or ``(left, right)``,
    ``--window-attn-skip-freq``), and the layer's variants a launch may ask for: per-head query
    and key norms (``--qk-layernorm``), the attention softmax (``--softmax-type`` ``vanilla``,
    ``off-by-one`` or ``learnable``, as ``softmax_type`` spells them), the rotary embedding
    (``--rope-type`` ``rope`` or ``yarn``) and the clamped gated activation
    (``--activation-func-clamp-value``); each only where the launch passes it (Megatron-LM's
    defaults are the scenario's: NVIDIA/Megatron-LM ``megatron/training/arguments.py`` @
    ``core_v0.15.0``). A value that is not a number or not one of the choices goes through as
    written, for the scenario's own error naming the field."""
    out: list[ArgValue] = []
    if args.get("qk-layernorm") is True:
        out.append(ArgValue("model.qk_layernorm", True, "qk-layernorm"))
    for arg in ("softmax-type", "rope-type"):
        choice = args.get(arg)
        if isinstance(choice, str):
            field = f"model.{arg.replace('-', '_')}"
            out.append(ArgValue(field, choice.strip().lower().replace("-", "_"), arg))
    clamp = args.get("activation-func-clamp-value")
    if isinstance(clamp, str):  # text that is no number: parse_scenario names the field
        arg = "activation-func-clamp-value"
        out.append(ArgValue("model.activation_func_clamp_value", number_or_value(clamp), arg))
    if args.get("multi-latent-attention") is True:
        out.append(ArgValue("model.multi_latent_attention", True, "multi-latent-attention"))
        for arg in (
            "q-lora-rank",
            "kv-lora-rank",
            "qk-head-dim",
            "qk-pos-emb-head-dim",
            "v-head-dim",
        ):
            value = megatron_int(args, arg)
            if value is not None:
                out.append(ArgValue(f"model.{arg.replace('-', '_')}", value, arg))
    window = args.get("window-size")
    if isinstance(window, str):
        sizes = [int(t) for t in re.findall(r"-?\d+", window)[:2]]
        if sizes and sizes[0] > 0:
            out.append(ArgValue("model.window_size", sizes[0], "window-size"))
            skip = megatron_int(args, "window-attn-skip-freq")
            if skip:
                out.append(ArgValue("model.window_attn_skip_freq", skip, "window-attn-skip-freq"))
    return out


def pipeline_values(args: Args, layers: int, pp: int) -> list[ArgValue]:
    """The virtual pipeline degree and the uneven-split arguments of Megatron-LM
    (``--pipeline-model-parallel-layout``, ``--decoder-first/last-pipeline-num-layers``,
    ``--account-for-embedding/loss-in-pipeline-split``). The virtual degree:
    ``--num-virtual-stages-per-pipeline-rank``, or ``--num-layers-per-virtual-pipeline-stage``
    over each rank's share (``num_layers`` plus the ``account_for`` slots over ``pp``, as
    Megatron-LM's ``validate_args`` computes it)."""
    out: list[ArgValue] = []
    layout = args.get("pipeline-model-parallel-layout")
    if isinstance(layout, str) and layout:
        arg = "pipeline-model-parallel-layout"
        out.append(ArgValue("parallelism.pipeline_layout", layout.strip("'\""), arg))
    for arg in ("decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers"):
        value = megatron_int(args, arg)
        if value is not None:
            out.append(ArgValue(f"parallelism.{arg.replace('-', '_')}", value, arg))
    slots = 0
    for arg in ("account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split"):
        if args.get(arg) is True:
            out.append(ArgValue(f"parallelism.{arg.replace('-', '_')}", True, arg))
            slots += 1
    vp_arg = "num-virtual-stages-per-pipeline-rank"
    vp = megatron_int(args, vp_arg)
    per_stage = megatron_int(args, "num-layers-per-virtual-pipeline-stage")
    share = layers + slots
    if per_stage and pp > 0 and share % (pp * per_stage) == 0:
        vp, vp_arg = share // (pp * per_stage), "num-layers-per-virtual-pipeline-stage"
    if vp:
        out.append(ArgValue("parallelism.virtual_pipeline", vp, vp_arg))
    return out


def block_recompute_layers(granularity: object, method: object, layers: object) -> int | None:
    """``parallelism.recompute_num_layers`` from Megatron-Core's recompute settings: the
    ``recompute_num_layers`` first layers of each pipeline model chunk under ``full``
    granularity with the ``block`` method (``TransformerBlock._checkpointed_forward``); None
    otherwise (``uniform`` recomputes every layer, and a count that is no positive integer
    states nothing)."""
    if granularity != "full" or method != "block":
        return None
    if isinstance(layers, bool) or not isinstance(layers, int) or layers <= 0:
        return None
    return layers


def recompute_values(args: Args) -> list[ArgValue]:
    """``--recompute-granularity selective|full``, ``--recompute-activations`` (selective, as
    ``validate_args`` sets it), with selective ``--recompute-modules`` and with full
    ``--recompute-method block`` its ``--recompute-num-layers`` (the first layers of each
    pipeline model chunk recomputed, ``TransformerBlock._checkpointed_forward``; ``uniform``
    recomputes every layer: nothing more to state)."""
    out: list[ArgValue] = []
    granularity = args.get("recompute-granularity")
    if isinstance(granularity, str) and granularity in ("selective", "full"):
        out.append(ArgValue("parallelism.recompute", granularity, "recompute-granularity"))
    elif args.get("recompute-activations") is True:
        out.append(ArgValue("parallelism.recompute", "selective", "recompute-activations"))
    modules = args.get("recompute-modules")
    selective = bool(out) and out[0].value == "selective"
    if isinstance(modules, str) and modules.split() and selective:
        out.append(ArgValue("parallelism.recompute_modules", modules.split(), "recompute-modules"))
    layers = block_recompute_layers(
        out[0].value if out else None,
        args.get("recompute-method"),
        megatron_int(args, "recompute-num-layers"),
    )
    if layers is not None:
        out.append(ArgValue("parallelism.recompute_num_layers", layers, "recompute-num-layers"))
    return out


def cuda_graphs_of(impl: object, scopes: object, *, legacy: bool = False) -> str | None:
    """``training.cuda_graphs`` from Megatron-Core's CUDA-graph settings: ``impl`` the
    implementation (``cuda_graph_impl``: ``none``, ``local``, ``transformer_engine``,
    ``full_iteration``), ``scopes`` the scope names (``cuda_graph_scope`` /
    ``cuda_graph_modules``: one name, a list, or words), ``legacy`` true under
    ``--enable-cuda-graph`` (the local implementation before ``cuda_graph_impl``).
    ``full_iteration`` for the full-iteration implementation, or the scope of that name with
    the local implementation (Megatron-Core 0.14-0.15's spelling of it; a scope alone graphs
    nothing); ``per_layer`` for the other implementations; ``none`` for ``none``; None when
    nothing says.
    (NVIDIA/Megatron-LM ``megatron/training/arguments.py`` @ ``core_v0.14.0``,
    ``core_v0.15.0`` and ``d98e8a64dd``; ``transformer_config.py`` @ ``d98e8a64dd``.)"""
    if isinstance(scopes, str):
        words = scopes.replace(",", " ").split()
    elif isinstance(scopes, list | tuple):
        words = [str(each) for each in scopes]
    else:
        words = []
    name = str(impl).strip().lower() if isinstance(impl, str) else None
    local = name == "local" or (name is None and legacy)  # the only full-iteration capture
    if name == "full_iteration" or (local and "full_iteration" in words):
        return "full_iteration"
    if name in ("local", "transformer_engine") or legacy:
        return "per_layer"
    if name == "none":
        return "none"
    return None


def cuda_graph_values(args: Args) -> list[ArgValue]:
    """``training.cuda_graphs`` from ``--cuda-graph-impl``, ``--cuda-graph-scope`` /
    ``--cuda-graph-modules`` and the older switches (``--enable-cuda-graph``: the local
    implementation, ``--external-cuda-graph``: Transformer Engine's), by ``cuda_graphs_of``;
    nothing when none is given (Megatron-LM's default: no graphs, the scenario's default too)."""
    impl = args.get("cuda-graph-impl")
    impl_arg = "cuda-graph-impl" if isinstance(impl, str) else ""
    if not impl_arg and args.get("external-cuda-graph") is True:
        impl, impl_arg = "transformer_engine", "external-cuda-graph"
    legacy = not impl_arg and args.get("enable-cuda-graph") is True
    scope_arg = next((a for a in ("cuda-graph-scope", "cuda-graph-modules") if a in args), "")
    value = cuda_graphs_of(
        impl if impl_arg else None, args.get(scope_arg) if scope_arg else None, legacy=legacy
    )
    if value is None:
        return []
    arg = impl_arg or "enable-cuda-graph"
    if value == "full_iteration" and impl != "full_iteration":
        arg = scope_arg  # the scope of that name says it
    return [ArgValue("training.cuda_graphs", value, arg)]


def gradient_reduction_values(args: Args) -> list[ArgValue]:
    """Overlap of the gradient reduce and parameter gather (Megatron-LM leaves both off unless
    asked: training arguments, Megatron-Core DDP config), of the tensor-parallel collectives
    with the GEMMs (``--tp-comm-overlap``, off unless asked: ``ModelParallelConfig``
    ``tp_comm_overlap``) and the gradient-reduction precision,
    ``parallelism.grad_reduce_in_fp32``: the ``accumulate_allreduce_grads_in_fp32`` that
    ``validate_args`` leaves (Megatron-Core DDP's ``grad_reduce_in_fp32``; NVIDIA/Megatron-LM
    ``megatron/training/arguments.py`` at 10e7b74597b47a57449599bf2780bd9e82ef79ff, the
    commit of ``planner/launch/data/megatron.yaml``). ``--grad-reduce-in-bf16`` reduces in
    bf16 (false) under ``--bf16``, over ``--accumulate-allreduce-grads-in-fp32`` too, and with
    ``--use-megatron-fsdp`` in any precision (it sets ``megatron_fsdp_grad_comm_dtype`` to
    bf16); otherwise it changes nothing: fp16 and fp32 parameters' gradients are reduced in
    their own dtype (:func:`grad_reduce_in_bf16_ignored`). ``--accumulate-allreduce-grads-in-
    fp32`` reduces in fp32 (true). ``--main-grads-dtype bf16`` under ``--bf16`` reduces in bf16
    (false): ``validate_args`` sets ``accumulate_allreduce_grads_in_fp32`` for bf16 parameters
    only while ``main_grads_dtype`` is fp32 (its default), and stops a launch that asks for both
    fp32 accumulation and bf16 main gradients (:func:`main_grads_bf16_refused`). Neither: left
    to the framework's default (fp32 under bf16, as ``validate_args`` sets it; the parameters'
    dtype otherwise). ``--fp16`` under ``--fp8-format`` / ``--fp4-format``, read as the low
    precision, reduces in fp16 (false), as ``--fp16`` alone does."""
    out: list[ArgValue] = []
    for arg in ("overlap-grad-reduce", "overlap-param-gather", "tp-comm-overlap"):
        on = args.get(arg) is True
        out.append(ArgValue(f"parallelism.{arg.replace('-', '_')}", on, arg if on else ""))
    if args.get("grad-reduce-in-bf16") is True and not grad_reduce_in_bf16_ignored(args):
        out.append(ArgValue("parallelism.grad_reduce_in_fp32", False, "grad-reduce-in-bf16"))
    elif args.get("accumulate-allreduce-grads-in-fp32") is True:
        arg = "accumulate-allreduce-grads-in-fp32"
        out.append(ArgValue("parallelism.grad_reduce_in_fp32", True, arg))
    elif args.get("bf16") is True and args.get("main-grads-dtype") == "bf16":
        out.append(ArgValue("parallelism.grad_reduce_in_fp32", False, "main-grads-dtype"))
    elif args.get("fp16") is True and _fp16_under_low_precision(args):
        out.append(ArgValue("parallelism.grad_reduce_in_fp32", False, "fp16"))
    return out


def _fp16_under_low_precision(args: Args) -> bool:
    """``--fp16`` with ``--fp8-format`` / ``--fp4-format``: fp16 parameters under fp8 or fp4
    GEMMs, read as the low precision (:func:`precision_value`). Their gradients stay fp16
    (``validate_args`` sets ``accumulate_allreduce_grads_in_fp32`` only under ``--bf16``), which
    the scenario's fp8 / nvfp4 default (fp32 on a bf16 base) would not say."""
    row = precision_value(args)
    return row is not None and row.value in ("fp8", "mxfp8", "nvfp4")


def main_grads_bf16_refused(args: Args) -> bool:
    """Whether Megatron-LM's ``validate_args`` stops at ``args``: under ``--bf16``,
    ``--accumulate-allreduce-grads-in-fp32`` with ``--main-grads-dtype bf16`` fails its
    assertion ("--main-grads-dtype can only be fp32 when --accumulate-allreduce-grads-in-fp32
    is set"; NVIDIA/Megatron-LM ``megatron/training/arguments.py`` at
    10e7b74597b47a57449599bf2780bd9e82ef79ff)."""
    return (
        args.get("bf16") is True
        and args.get("accumulate-allreduce-grads-in-fp32") is True
        and args.get("main-grads-dtype") == "bf16"
    )


def grad_reduce_in_bf16_ignored(args: Args) -> bool:
    """Whether Megatron-LM's ``validate_args`` ignores ``--grad-reduce-in-bf16`` among
    ``args``: it acts only under ``--bf16`` (``accumulate_allreduce_grads_in_fp32 = False``)
    and with ``--use-megatron-fsdp`` (``megatron_fsdp_grad_comm_dtype = torch.bfloat16``)
    (NVIDIA/Megatron-LM ``megatron/training/arguments.py`` at
    10e7b74597b47a57449599bf2780bd9e82ef79ff)."""
    return args.get("bf16") is not True and args.get("use-megatron-fsdp") is not True


_MOMENT_DTYPES = ("fp32", "fp16", "bf16", "fp8")
_OPTIMIZER_DTYPE_ARGS = {
    "main-params-dtype": ("fp32", "fp16"),
    "exp-avg-dtype": _MOMENT_DTYPES,
    "exp-avg-sq-dtype": _MOMENT_DTYPES,
}
"""Megatron-LM's choices of each optimizer dtype argument (argparse refuses any other)."""


MEGATRON_FSDP_TWO_MASTERS_FROM = "26.02"
"""The first NeMo Framework container (Megatron Core 0.16.0, Megatron-Bridge 0.3.0,
NVIDIA-NeMo/Megatron-Bridge ``docs/releases/software-versions.md`` @ 067f987df03b) in which
neither Megatron-LM nor Megatron-Bridge clears Megatron-FSDP's ``preserve_fp32_weights`` under
the precision-aware optimizer: Megatron-LM's ``get_model`` does through core_v0.15.0
(``megatron/training/training.py``), Megatron-Bridge's ``ConfigContainer`` through v0.2.2
(``src/megatron/bridge/training/config.py`` @ v0.1.0rc3, v0.2.0, v0.2.2), neither from
core_v0.16.0 / v0.3.0 on."""

MEGATRON_FSDP_OWN_MASTER_FROM = "26.06"
"""The first NeMo Framework container (Megatron Core 0.18.0) whose Megatron-Core sets
Transformer Engine ``FusedAdam``'s ``master_weights`` false under Megatron-FSDP, the
optimizer stepping Megatron-FSDP's own main weights (``get_megatron_optimizer``,
NVIDIA/Megatron-LM ``megatron/core/optimizer/__init__.py`` @ core_v0.18.0 and d98e8a64dd;
absent at core_v0.17.1)."""


def megatron_fsdp_master(release: str | None, *, clears_preserve: bool) -> str:
    """Which master Adam keeps under Megatron-FSDP with the precision-aware optimizer, in the
    NeMo Framework container ``release`` (None: the newest Megatron-Core, main d98e8a64dd):

    * ``"megatron_fsdp"`` (``MEGATRON_FSDP_OWN_MASTER_FROM`` on): Megatron-FSDP's main weight
      buffer, in its ``megatron_fsdp_main_params_dtype`` (:func:`megatron_fsdp_main_dtype`);
      ``FusedAdam`` keeps no master, so no remainders, and the moments in the
      ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` it is given;
    * ``"optimizer"`` (before ``MEGATRON_FSDP_TWO_MASTERS_FROM``, where the framework clears
      ``preserve_fp32_weights``, ``clears_preserve``): Megatron-FSDP keeps no fp32 copy and
      ``FusedAdam`` the master, as the distributed optimizer's (the optimizer dtypes apply);
    * ``"both"`` (otherwise): Megatron-FSDP keeps its fp32 main weights and ``FusedAdam`` its
      own master of them, which no scenario field holds."""
    if release is None or release_at_least(release, MEGATRON_FSDP_OWN_MASTER_FROM):
        return "megatron_fsdp"
    if clears_preserve and not release_at_least(release, MEGATRON_FSDP_TWO_MASTERS_FROM):
        return "optimizer"
    return "both"


def megatron_fsdp_main_dtype(name: str | None, *, bf16: bool) -> str | None:
    """``parallelism.main_params_dtype`` for Megatron-FSDP's ``megatron_fsdp_main_params_dtype``
    ``name`` (``fp32``, ``fp16``, ``bf16``; None or ``auto``: no main weight buffer, the model's
    weights are the main weights, ``MixedPrecisionPolicy.main_params_dtype`` and
    ``ParamAndGradBuffer``, ``megatron/core/distributed/fsdp/src/megatron_fsdp/`` @
    d98e8a64dd): ``fp32`` / ``fp16`` a master of that width beside the 16-bit weights; no
    buffer over ``bf16`` weights is the scenario's ``bf16``. None where no scenario dtype says
    it: a ``bf16`` buffer beside the bf16 weights, or no buffer over other weights."""
    if name in ("fp32", "fp16"):
        return name
    if name in (None, "auto") and bf16:
        return "bf16"
    return None


def megatron_fsdp_optimizer_note(
    master: str, release: str | None, stated: bool, main_key: str
) -> str | None:
    """The note where the precision-aware optimizer's dtypes under Megatron-FSDP are left to
    the framework: ``master`` is :func:`megatron_fsdp_master`'s answer for ``release``,
    ``stated`` whether the master's dtype was read, ``main_key`` the setting naming
    Megatron-FSDP's main weight dtype; None where they were read."""
    where = "the newest release" if release is None else f"NeMo Framework container {release}"
    if master == "both":
        return (
            f"precision-aware optimizer under Megatron-FSDP in {where}: Megatron-FSDP keeps its "
            "fp32 main weights and Transformer Engine's FusedAdam its own master of them "
            "(Megatron Core 0.16-0.17), which no scenario field holds: the optimizer dtypes are "
            "read as the framework's"
        )
    if master == "megatron_fsdp" and not stated:
        return (
            f"precision-aware optimizer under Megatron-FSDP in {where}: the optimizer steps "
            f"Megatron-FSDP's main weights, whose {main_key} names no scenario dtype (a bf16 "
            "buffer beside bf16 weights, or none over fp16 or fp32 weights): the optimizer "
            "dtypes are read as the framework's"
        )
    return None


def optimizer_state_values(args: Args, release: str | None = None) -> list[ArgValue]:
    """What Adam keeps under ``--use-precision-aware-optimizer`` (none without it: the
    framework's fp32 master and moments): ``parallelism.main_params_dtype``, ``exp_avg_dtype``
    and ``exp_avg_sq_dtype`` from ``--main-params-dtype`` / ``--exp-avg-dtype`` /
    ``--exp-avg-sq-dtype`` (fp32 by default), and ``store_param_remainders``: Megatron-Core
    hands the master to Transformer Engine's ``FusedAdam`` unless it is fp32 under an FP8 recipe
    other than ``delayed`` (``OptimizerConfig.use_precision_aware_optimizer_no_fp8_or_ds_fp8``;
    ``fp8_recipe`` is ``delayed`` unless ``--fp8-recipe`` says otherwise,
    ``TransformerConfig``), and there keeps an fp32 master of bf16 weights as its 16-bit
    remainders (``OptimizerConfig.store_param_remainders``, default true, which it clears
    below Transformer Engine 2.1; ``FusedAdam`` allocates it as ``torch.int16``,
    NVIDIA/TransformerEngine ``transformer_engine/pytorch/optimizers/fused_adam.py`` @ v2.7);
    otherwise Megatron-Core keeps the whole fp32 master (false). Nothing under
    ``--optimizer-cpu-offload``, whose states live partly in host memory, which the scenario
    does not model, nor under ``--use-torch-fsdp2``: the framework's states. Under
    Megatron-FSDP (``--use-megatron-fsdp`` or its earlier name ``--use-custom-fsdp``,
    ``megatron_fsdp_flag``) as :func:`megatron_fsdp_master` says for the NeMo Framework
    container ``release`` (None: the newest): its own main weights in
    ``--megatron-fsdp-main-params-dtype`` (fp32 by default; "Replaces --main-params-dtype"),
    read by :func:`megatron_fsdp_main_dtype`, with the moments' flags and no remainders; the
    dtypes as above where Megatron-LM clears ``preserve_fp32_weights``; nothing where both
    masters are kept or the main dtype is no scenario dtype. NVIDIA/Megatron-LM
    ``megatron/training/arguments.py``, ``megatron/core/optimizer/optimizer_config.py`` at
    10e7b74597b47a57449599bf2780bd9e82ef79ff."""
    on = args.get("use-precision-aware-optimizer") is True
    elsewhere = ("optimizer-cpu-offload", "use-torch-fsdp2")
    if not on or any(args.get(arg) is True for arg in elsewhere):
        return []
    master = "optimizer"
    if megatron_fsdp_flag(args):
        master = megatron_fsdp_master(release, clears_preserve=True)
        if master == "both":
            return []
    out: list[ArgValue] = []
    for arg, choices in _OPTIMIZER_DTYPE_ARGS.items():
        value = str(args.get(arg, "fp32")).lower()
        if value not in choices:
            return []  # argparse stops (optimizer_dtypes_refused)
        out.append(
            ArgValue(f"parallelism.{arg.replace('-', '_')}", value, arg if arg in args else "")
        )
    if master == "megatron_fsdp":
        return _megatron_fsdp_master_values(args, out[1:])
    main = str(args.get("main-params-dtype", "fp32")).lower()
    if main == "fp32" and args.get("bf16") is True:
        if fused_adam_keeps_remainders(args.get("fp8-recipe", "delayed")):
            out.append(ArgValue("parallelism.store_param_remainders", True, ""))
        else:
            out.append(ArgValue("parallelism.store_param_remainders", False, "fp8-recipe"))
    return out


def fused_adam_keeps_remainders(fp8_recipe: object) -> bool:
    """Whether Megatron-Core's precision-aware optimizer hands an fp32 master of bf16 weights to
    Transformer Engine's ``FusedAdam``, which keeps it as 16-bit remainders
    (``OptimizerConfig.store_param_remainders``, default true): only while the config's
    ``fp8_recipe`` is None or ``delayed`` (``use_precision_aware_optimizer_no_fp8_or_ds_fp8``);
    with another recipe the distributed optimizer keeps the whole fp32 master. NVIDIA/Megatron-LM
    ``megatron/core/optimizer/optimizer_config.py`` at
    10e7b74597b47a57449599bf2780bd9e82ef79ff."""
    return fp8_recipe is None or str(fp8_recipe).lower() == "delayed"


def _megatron_fsdp_master_values(args: Args, moments: list[ArgValue]) -> list[ArgValue]:
    """The ``moments`` with Megatron-FSDP's main weights as the master
    (:func:`megatron_fsdp_master` ``"megatron_fsdp"``): ``--megatron-fsdp-main-params-dtype``
    (argparse default fp32) read by :func:`megatron_fsdp_main_dtype`, and no remainders of an
    fp32 master (``FusedAdam`` keeps none); nothing where that dtype is no scenario dtype."""
    arg = "megatron-fsdp-main-params-dtype"
    bf16 = args.get("bf16") is True
    main = megatron_fsdp_main_dtype(str(args.get(arg, "fp32")).lower(), bf16=bf16)
    if main is None:
        return []
    out = [ArgValue("parallelism.main_params_dtype", main, arg if arg in args else ""), *moments]
    if main == "fp32" and bf16:
        flag = megatron_fsdp_flag(args) or ""
        out.append(ArgValue("parallelism.store_param_remainders", False, flag))
    return out


def optimizer_dtypes_refused(args: Args) -> bool:
    """Whether Megatron-LM stops at ``args``: an optimizer dtype outside its choices
    (argparse), one other than fp32 without
    ``--use-precision-aware-optimizer`` ("... can only be fp32 when not using precision-aware
    optimizer", ``OptimizerConfig.__post_init__``), or the precision-aware optimizer without
    ``--use-distributed-optimizer`` ("--use-precision-aware-optimizer only supported with
    distributed optimizer", unless under Megatron-FSDP, ``megatron_fsdp_flag``, which runs on it:
    ``validate_args`` turns it on under ``--use-megatron-fsdp`` from core_v0.18.0); NVIDIA/
    Megatron-LM ``megatron/core/optimizer/optimizer_config.py`` at
    10e7b74597b47a57449599bf2780bd9e82ef79ff."""
    values = {arg: str(args.get(arg, "fp32")).lower() for arg in _OPTIMIZER_DTYPE_ARGS}
    if any(values[arg] not in choices for arg, choices in _OPTIMIZER_DTYPE_ARGS.items()):
        return True
    if args.get("use-precision-aware-optimizer") is True:
        return args.get("use-distributed-optimizer") is not True and not megatron_fsdp_flag(args)
    return any(value != "fp32" for value in values.values())


MEGATRON_FSDP_STAGES: Mapping[str, int] = {
    "no_shard": 0,
    "optim": 1,
    "optim_grads": 2,
    "optim_grads_params": 3,
}
"""Megatron-FSDP's ``--data-parallel-sharding-strategy`` -> the ZeRO stage it runs: what
``ParamAndGradBuffer._init_each_parameter_group_buffers`` distributes over the data-parallel
ranks. ``no_shard`` nothing; ``optim`` the fp32 main weights, on which the optimizer keeps its
states (``optimizer_named_parameters``); ``optim_grads`` those and the gradient buffer;
``optim_grads_params`` those and the model weights (NVIDIA/Megatron-LM
``megatron/core/distributed/custom_fsdp/param_and_grad_buffer.py`` @ core_v0.13.0,
``megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py`` @ core_v0.15.0
103851dcf4c3 and main d98e8a64ddf3). ``--use-distributed-optimizer`` shards nothing more under
Megatron-FSDP: ``DistributedOptimizer.__init__`` returns before building its own shards when
the DDP config uses it (``megatron/core/optimizer/distrib_optimizer.py``, same commits)."""


def fp8_param_gather_values(args: Args, precision: str) -> list[ArgValue]:
    """``parallelism.fp8_param_gather`` from ``--fp8-param-gather`` (off unless given), where
    ``precision`` is the scenario precision :func:`precision_value` reads: true under ``fp8`` or
    ``mxfp8``; false under ``--use-torch-fsdp2``, where ``validate_args`` turns it off with
    Transformer Engine 2.0 or later ("FSDP2 FP8 param gather is not supported yet in TE 2.0",
    NVIDIA/Megatron-LM ``megatron/training/arguments.py`` from core_v0.14.0,
    d2c22105f0507decf9982639a6065466534a8798, through d98e8a64ddf34856e74b24714e3bedb2f5a39553);
    nothing under another precision, where Megatron-Core stops (:func:`fp8_param_gather_refusal`)
    and the scenario format has no FP8 weights to state. A launch without a sharded optimizer
    keeps its ``true``: the scenario's layout rule then refuses it as Megatron-LM does
    (``planner.specs.feasibility.fp8_param_gather_rule``)."""
    field = "parallelism.fp8_param_gather"
    if args.get("fp8-param-gather") is not True:
        return []
    if args.get("use-torch-fsdp2") is True:
        return [ArgValue(field, False, "use-torch-fsdp2")]
    if precision not in ("fp8", "mxfp8"):
        return []
    return [ArgValue(field, True, "fp8-param-gather")]


def fp8_param_gather_refusal(args: Args, precision: str) -> str | None:
    """Why Megatron-LM stops at ``--fp8-param-gather`` among ``args`` (``precision`` as in
    :func:`fp8_param_gather_values`), or None where it runs (NVIDIA/Megatron-LM at
    d98e8a64ddf34856e74b24714e3bedb2f5a39553): without FP8 GEMMs ``TransformerConfig.
    __post_init__`` raises "fp8_param must be used together with fp8 mode" (the argument is
    its ``fp8_param``, ``megatron/training/argument_utils.py``; since
    062c833392); without the distributed optimizer, torch FSDP2 or Megatron-FSDP
    ``validate_args`` asserts "--fp8-param-gather only supported with distributed optimizer, torch
    fsdp2, megatron fsdp, or inference mode" (``planner.specs.feasibility.
    FP8_PARAM_GATHER_SOURCE``), the layout rule ``parse_scenario`` applies to ZeRO stage 0."""
    if args.get("fp8-param-gather") is not True or args.get("use-torch-fsdp2") is True:
        return None
    if precision not in ("fp8", "mxfp8"):
        return (
            f"--fp8-param-gather without FP8 GEMMs (precision {precision}): Megatron-Core stops "
            "(TransformerConfig: 'fp8_param must be used together with fp8 mode'); pass "
            "--fp8-format or drop --fp8-param-gather"
        )
    if args.get("use-distributed-optimizer") is True or megatron_fsdp_flag(args) is not None:
        return None
    return (
        "--fp8-param-gather without --use-distributed-optimizer, --use-torch-fsdp2 or "
        "--use-megatron-fsdp: Megatron-LM stops (validate_args: '--fp8-param-gather only "
        "supported with distributed optimizer, torch fsdp2, megatron fsdp, or inference mode')"
    )


def megatron_fsdp_flag(args: Args) -> str | None:
    """The argument that has Megatron-FSDP wrap the model: ``use-megatron-fsdp`` (core_v0.14.0
    on) or its earlier name ``use-custom-fsdp`` (core_v0.12.0, core_v0.13.0); None without
    either, or with ``--use-torch-fsdp2``, which ``get_model`` takes first
    (``megatron/training/training.py`` @ core_v0.15.0)."""
    if args.get("use-torch-fsdp2") is True:
        return None
    return next((f for f in ("use-megatron-fsdp", "use-custom-fsdp") if args.get(f) is True), None)


def _strategy_entry(*path: str) -> Mapping[str, object]:
    """The entry at ``path`` of ``planner/launch/data/megatron.yaml`` (``SpecError`` unless it
    is a mapping, a packaging error)."""
    node: object = load_data("megatron.yaml")
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        raise SpecError("planner/launch/data/megatron.yaml", f"{'.'.join(path)} is missing")
    return node


def _strategy(entry: Mapping[str, object], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or value not in MEGATRON_FSDP_STAGES:
        raise SpecError("planner/launch/data/megatron.yaml", f"{key} must be a sharding strategy")
    return value


def sharding_strategy_default(args: Args) -> str:
    """``--data-parallel-sharding-strategy``'s default for ``args``: the one of
    ``planner/launch/data/megatron.yaml``'s commit (``defaults.megatron_lm``), or under
    ``--use-custom-fsdp``, a name only core_v0.12.0-0.13.x take, those releases' (the file's
    ``release_defaults`` ``earlier``)."""
    key = "data_parallel_sharding_strategy"
    if megatron_fsdp_flag(args) == "use-custom-fsdp":
        return _strategy(_strategy_entry("release_defaults", "megatron_lm", key), "earlier")
    return _strategy(_strategy_entry("defaults", "megatron_lm", key), "value")


def ddp_sharding_strategy_default() -> tuple[str, str]:
    """Megatron-Core's ``DistributedDataParallelConfig.data_parallel_sharding_strategy``
    default, which Megatron-Bridge and NeMo 2.0 configs keep unless they set it, and where it
    is defined (``planner/launch/data/megatron.yaml``, ``ddp_config_defaults``)."""
    entry = _strategy_entry("ddp_config_defaults", "data_parallel_sharding_strategy")
    return _strategy(entry, "value"), str(entry.get("source", ""))


def zero_stage_value(args: Args, default_strategy: str) -> ArgValue:
    """``parallelism.zero_stage`` as Megatron-LM resolves the arguments: ``--use-torch-fsdp2`` 3
    (``fully_shard``); Megatron-FSDP (:func:`megatron_fsdp_flag`) the stage of its
    ``--data-parallel-sharding-strategy``, ``default_strategy`` when the argument is absent or
    not one of argparse's choices (:data:`MEGATRON_FSDP_STAGES`; ``arg`` then names the FSDP
    flag); else ``--use-distributed-optimizer`` 1, none 0 (``arg`` ``""``)."""
    field = "parallelism.zero_stage"
    if args.get("use-torch-fsdp2") is True:
        return ArgValue(field, 3, "use-torch-fsdp2")
    fsdp = megatron_fsdp_flag(args)
    if fsdp is not None:
        strategy = args.get("data-parallel-sharding-strategy")
        if isinstance(strategy, str) and strategy in MEGATRON_FSDP_STAGES:
            return ArgValue(
                field, MEGATRON_FSDP_STAGES[strategy], "data-parallel-sharding-strategy"
            )
        return ArgValue(field, MEGATRON_FSDP_STAGES[default_strategy], fsdp)
    if args.get("use-distributed-optimizer") is True:
        return ArgValue(field, 1, "use-distributed-optimizer")
    return ArgValue(field, 0, "")
