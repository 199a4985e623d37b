"""Megatron-LM command lines and batch scripts -> scenario documents.

Reads the arguments of ``pretrain_gpt.py`` (and Megatron-Core based launchers) from a command
line or a whole sbatch script: backslash continuations, quotes, ``--arg=value`` and
``--arg value``, bash variables assigned in the script (``NUM_LAYERS=32`` ... ``$NUM_LAYERS``),
bash arrays (``GPT_ARGS=( --num-layers 32 ... )``). Later occurrences win, as with argparse.
Megatron's own defaults apply where the scenario format's defaults differ: tied embeddings unless
``--untie-embeddings-and-output-weights``, no distributed optimizer (ZeRO 0) unless
``--use-distributed-optimizer``, no sequence parallel unless ``--sequence-parallel``,
``num_query_groups`` only with ``--group-query-attention``. Uneven pipeline stages
(``--pipeline-model-parallel-layout``, ``--decoder-first/last-pipeline-num-layers``,
``--account-for-embedding/loss-in-pipeline-split``) and MoE parallel folding
(``--expert-tensor-parallel-size``) become the scenario fields of the same names.
"""

from __future__ import annotations

import ast
import re
import shlex

from planner.catalog import gpu_key_for_gres_type

__all__ = ["DEFAULT_VOCAB_SIZE", "scenario_document_from_megatron_args"]

DEFAULT_VOCAB_SIZE = 50257
"""Vocabulary assumed when the script names no size nor a known tokenizer: GPT-2 BPE (Megatron's
``GPT2BPETokenizer``), then padded like Megatron (``--make-vocab-size-divisible-by`` x tp)."""

_TOKENIZER_VOCAB = (
    (re.compile(r"llama-?3|llama3", re.I), 128256),
    (re.compile(r"llama-?2|llama2", re.I), 32000),
    (re.compile(r"mixtral-8x22b", re.I), 32768),
    (re.compile(r"mistral|mixtral", re.I), 32000),
    (re.compile(r"qwen", re.I), 151936),
    (re.compile(r"nemotron", re.I), 256000),
    (re.compile(r"gpt-?neox|pythia", re.I), 50277),
)
"""Vocabulary sizes of tokenizers named in ``--tokenizer-model`` (model cards / config.json)."""

_FLAGS = frozenset(
    {
        "swiglu",
        "squared-relu",
        "untie-embeddings-and-output-weights",
        "sequence-parallel",
        "use-distributed-optimizer",
        "use-torch-fsdp2",
        "group-query-attention",
        "recompute-activations",
        "bf16",
        "fp16",
        "use-flash-attn",
        "overlap-grad-reduce",
        "overlap-param-gather",
        "tp-comm-overlap",
        "accumulate-allreduce-grads-in-fp32",
        "grad-reduce-in-bf16",
        "multi-latent-attention",
        "moe-grouped-gemm",
        "moe-router-force-load-balancing",
        "overlap-moe-expert-parallel-comm",
        "moe-enable-deepep",
        "account-for-embedding-in-pipeline-split",
        "account-for-loss-in-pipeline-split",
    }
)

_LIST_ARGS = frozenset({"recompute-modules"})
"""Arguments that take several values (argparse ``nargs="*"``)."""

_ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _split(text: str) -> list[str]:
    joined = re.sub(r"\\\r?\n", " ", text)
    tokens: list[str] = []
    for line in joined.splitlines():
        try:
            parts = shlex.split(line, comments=True)
        except ValueError:  # unbalanced quotes: fall back to whitespace
            parts = line.split("#", 1)[0].split()
        for part in parts:
            # a quoted group of args ("--num-layers 24 --hidden-size 1024") is split again
            tokens.extend(part.split() if " " in part.strip() else [part])
    return tokens


def _collect(tokens: list[str]) -> dict[str, str | bool]:
    variables: dict[str, str] = {}
    args: dict[str, str | bool] = {}

    def expand(value: str) -> str:
        def repl(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(3)
            default = match.group(2)
            return variables.get(name, default if default is not None else match.group(0))

        return _VAR.sub(repl, value)

    i = 0
    while i < len(tokens):
        token = tokens[i]
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
        if key in _LIST_ARGS and not eq:  # nargs="*": every value up to the next flag
            values = []
            while i < len(tokens) and not tokens[i].startswith("--"):
                values.append(expand(tokens[i]))
                i += 1
            args[key] = " ".join(values)
        elif eq:
            args[key] = expand(value)
        elif key in _FLAGS:
            args[key] = True
        elif i < len(tokens) and not tokens[i].startswith("--"):
            args[key] = expand(tokens[i])
            i += 1
        else:
            args[key] = True
    return args


def _int_arg(args: dict[str, str | bool], key: str) -> int | None:
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


def _vocab(args: dict[str, str | bool], tp: int) -> int:
    padded = _int_arg(args, "padded-vocab-size")
    if padded:
        return padded
    vocab = _int_arg(args, "vocab-size")
    if vocab is None:
        tokenizer = " ".join(
            str(args.get(k, "")) for k in ("tokenizer-model", "tokenizer-type", "vocab-file")
        )
        vocab = next(
            (size for pattern, size in _TOKENIZER_VOCAB if pattern.search(tokenizer)),
            DEFAULT_VOCAB_SIZE,
        )
    multiple = (_int_arg(args, "make-vocab-size-divisible-by") or 128) * tp
    return -(-vocab // multiple) * multiple  # integer ceiling: no float overflow on huge values


def _precision(args: dict[str, str | bool]) -> str:
    recipe = str(args.get("fp8-recipe", "")).lower()
    if "fp4-format" in args or "fp4" in args:
        return "nvfp4"
    if "fp8-format" in args or "fp8" in args:
        return "mxfp8" if recipe == "mxfp8" else "fp8"
    if args.get("fp16") is True:
        return "fp16"
    return "bf16"


_FP8_RECIPES = frozenset({"delayed", "tensorwise", "blockwise", "mxfp8"})


def _recipe(args: dict[str, str | bool], precision: str) -> str | None:
    """``--fp8-recipe`` (Megatron: delayed, the default, tensorwise, blockwise, mxfp8) or
    ``--fp4-recipe nvfp4``, for a low-precision run; None otherwise (the precision's
    default)."""
    if precision == "nvfp4":
        return "nvfp4"
    recipe = str(args.get("fp8-recipe", "")).lower()
    if precision in ("fp8", "mxfp8") and recipe in _FP8_RECIPES:
        return recipe
    return None


def _layer_pattern(text: str) -> int | list[int] | None:
    """``--moe-layer-freq``: an int, or a Python list expression of 0/1 such as
    ``([0]*3+[1]*58)`` or ``[1,0,1,0]`` (evaluated over list literals, ``*`` and ``+`` only);
    None when it is neither."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.expr) -> list[int] | int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.List):
            items = [value(e) for e in node.elts]
            if all(isinstance(i, int) for i in items):
                return [int(i) for i in items]  # type: ignore[arg-type]
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
    except ValueError:
        return None
    return result


def _moe_fields(args: dict[str, str | bool]) -> dict[str, object]:
    """MoE options (Megatron-LM / Megatron-Core names). The dispatcher defaults to Megatron's
    ``allgather``; ``--moe-enable-deepep`` means the ``flex`` dispatcher over DeepEP."""
    out: dict[str, object] = {}
    dispatcher = args.get("moe-token-dispatcher-type")
    if args.get("moe-enable-deepep") is True:
        out["moe_token_dispatcher_type"] = "flex"
    elif isinstance(dispatcher, str):
        out["moe_token_dispatcher_type"] = dispatcher
    else:
        out["moe_token_dispatcher_type"] = "allgather"  # Megatron-LM's default
    for flag, field in (
        ("moe-grouped-gemm", "moe_grouped_gemm"),
        ("moe-router-force-load-balancing", "moe_router_force_load_balancing"),
        ("overlap-moe-expert-parallel-comm", "overlap_moe_expert_parallel_comm"),
    ):
        if args.get(flag) is True:
            out[field] = True
    factor = args.get("moe-expert-capacity-factor")
    if isinstance(factor, str):
        try:
            out["moe_expert_capacity_factor"] = float(factor)
        except ValueError:
            out["moe_expert_capacity_factor"] = factor  # parse_scenario names the field
    for arg, field in (
        ("moe-router-num-groups", "moe_router_num_groups"),
        ("moe-router-group-topk", "moe_router_group_topk"),
    ):
        value = _int_arg(args, arg)
        if value:
            out[field] = value
    shared = _int_arg(args, "moe-shared-expert-intermediate-size")
    if shared:
        out["moe_shared_expert_intermediate_size"] = shared
        out["num_shared_experts"] = 1
    freq = args.get("moe-layer-freq")
    if isinstance(freq, str):
        pattern = _layer_pattern(freq)
        out["moe_layer_freq"] = pattern if pattern is not None else freq
    return out


def _attention_fields(args: dict[str, str | bool]) -> dict[str, object]:
    """Multi-latent attention (``--multi-latent-attention`` with its ranks and head widths)
    and sliding windows (``--window-size`` as ``left`` or ``(left, right)``,
    ``--window-attn-skip-freq``)."""
    out: dict[str, object] = {}
    if args.get("multi-latent-attention") is True:
        out["multi_latent_attention"] = True
        for arg, field in (
            ("q-lora-rank", "q_lora_rank"),
            ("kv-lora-rank", "kv_lora_rank"),
            ("qk-head-dim", "qk_head_dim"),
            ("qk-pos-emb-head-dim", "qk_pos_emb_head_dim"),
            ("v-head-dim", "v_head_dim"),
        ):
            value = _int_arg(args, arg)
            if value is not None:
                out[field] = value
    window = args.get("window-size")
    if isinstance(window, str):
        sizes = [int(t) for t in re.findall(r"-?\d+", window)]
        if sizes and sizes[0] > 0:
            out["window_size"] = sizes[0]
            skip = _int_arg(args, "window-attn-skip-freq")
            if skip:
                out["window_attn_skip_freq"] = skip
    return out


def _pipeline_split(
    args: dict[str, str | bool], layers: int, pp: int, parallelism: dict[str, object]
) -> None:
    """The virtual pipeline degree and the uneven-split arguments of Megatron-LM
    (``--pipeline-model-parallel-layout``, ``--decoder-first/last-pipeline-num-layers``,
    ``--account-for-embedding/loss-in-pipeline-split``), into ``parallelism``. The virtual
    degree: ``--num-virtual-stages-per-pipeline-rank``, or ``--num-layers-per-virtual-pipeline-
    stage`` over each rank's share (``num_layers`` plus the ``account_for`` slots over ``pp``,
    as Megatron-LM's ``validate_args`` computes it), or the layout's stages over ``pp``."""
    layout = args.get("pipeline-model-parallel-layout")
    if isinstance(layout, str) and layout:
        parallelism["pipeline_layout"] = layout.strip("'\"")
    for arg, key in (
        ("decoder-first-pipeline-num-layers", "decoder_first_pipeline_num_layers"),
        ("decoder-last-pipeline-num-layers", "decoder_last_pipeline_num_layers"),
    ):
        value = _int_arg(args, arg)
        if value is not None:
            parallelism[key] = value
    slots = 0
    for arg, key in (
        ("account-for-embedding-in-pipeline-split", "account_for_embedding_in_pipeline_split"),
        ("account-for-loss-in-pipeline-split", "account_for_loss_in_pipeline_split"),
    ):
        if args.get(arg) is True:
            parallelism[key] = True
            slots += 1
    vp = _int_arg(args, "num-virtual-stages-per-pipeline-rank")
    per_stage = _int_arg(args, "num-layers-per-virtual-pipeline-stage")
    share = layers + slots
    if per_stage and share % (pp * per_stage) == 0:
        vp = share // (pp * per_stage)
    if vp:
        parallelism["virtual_pipeline"] = vp


def scenario_document_from_megatron_args(
    text: str, *, num_gpus: int | None, gpu: str | None, name: str | None = None
) -> dict[str, object] | None:
    """A scenario document (scenario-format dict, unvalidated) from Megatron-LM arguments.

    ``text`` is a command line or a batch script. Returns None when it lacks any of
    ``--num-layers``, ``--hidden-size``, ``--num-attention-heads``. ``num_gpus`` and ``gpu``
    (a catalog key or a Slurm/Kubernetes GPU type name, mapped by ``gpu_key_for_gres_type``)
    fill the ``hardware`` section; with ``num_gpus`` the
    ``data_parallel`` degree is derived as ``num_gpus / (tp·pp·cp)`` (left out when it does not
    divide, so ``parse_scenario`` reports the problem). Vocabulary: ``--padded-vocab-size``,
    else ``--vocab-size`` or a known ``--tokenizer-model``, else GPT-2's 50257
    (``DEFAULT_VOCAB_SIZE``), padded to a multiple of 128·tp as Megatron does.
    Pass the result to ``parse_scenario`` to validate it.
    """
    args = _collect(_split(text))
    layers = _int_arg(args, "num-layers")
    hidden = _int_arg(args, "hidden-size")
    heads = _int_arg(args, "num-attention-heads")
    if layers is None or hidden is None or heads is None:
        return None
    tp = _int_arg(args, "tensor-model-parallel-size") or 1
    pp = _int_arg(args, "pipeline-model-parallel-size") or 1
    cp = _int_arg(args, "context-parallel-size") or 1
    ep = _int_arg(args, "expert-model-parallel-size") or 1

    model: dict[str, object] = {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "vocab_size": _vocab(args, tp),
        "activation": "swiglu"
        if args.get("swiglu") is True
        else "squared_relu"
        if args.get("squared-relu") is True
        else "gelu",
        "untie_embeddings": args.get("untie-embeddings-and-output-weights") is True,
    }
    seq = _int_arg(args, "seq-length") or _int_arg(args, "max-position-embeddings")
    if seq is not None:
        model["seq_length"] = seq
    for arg, field in (
        ("ffn-hidden-size", "ffn_hidden_size"),
        ("kv-channels", "kv_channels"),
        ("num-experts", "num_experts"),
        ("moe-ffn-hidden-size", "moe_ffn_hidden_size"),
    ):
        value = _int_arg(args, arg)
        if value is not None:
            model[field] = value
    if args.get("group-query-attention") is True:
        groups = _int_arg(args, "num-query-groups")
        if groups is not None:
            model["num_query_groups"] = groups
    num_experts = _int_arg(args, "num-experts") or 0
    if num_experts:
        model["moe_router_topk"] = _int_arg(args, "moe-router-topk") or 2
        model.update(_moe_fields(args))
    model.update(_attention_fields(args))
    mtp = _int_arg(args, "mtp-num-layers")
    if mtp:
        model["mtp_num_layers"] = mtp

    parallelism: dict[str, object] = {
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "context_parallel": cp,
        "expert_parallel": ep,
        "sequence_parallel": args.get("sequence-parallel") is True and tp > 1,
        "micro_batch_size": _int_arg(args, "micro-batch-size") or 1,
        "precision": _precision(args),
        "zero_stage": 3
        if args.get("use-torch-fsdp2") is True
        else 1
        if args.get("use-distributed-optimizer") is True
        else 0,
    }
    recipe = _recipe(args, str(parallelism["precision"]))
    if recipe is not None:
        parallelism["fp8_recipe"] = recipe
    # Megatron-LM leaves both off unless asked (training arguments, Megatron-Core DDP config)
    parallelism["overlap_grad_reduce"] = args.get("overlap-grad-reduce") is True
    parallelism["overlap_param_gather"] = args.get("overlap-param-gather") is True
    if args.get("grad-reduce-in-bf16") is True:
        parallelism["grad_reduce_in_fp32"] = False
    elif args.get("accumulate-allreduce-grads-in-fp32") is True:
        parallelism["grad_reduce_in_fp32"] = True
    _pipeline_split(args, layers, pp, parallelism)
    etp = _int_arg(args, "expert-tensor-parallel-size")
    if etp is not None:
        parallelism["expert_tensor_parallel"] = etp
    granularity = args.get("recompute-granularity")
    if isinstance(granularity, str) and granularity in ("selective", "full"):
        parallelism["recompute"] = granularity
    elif args.get("recompute-activations") is True:
        parallelism["recompute"] = "selective"
    modules = args.get("recompute-modules")
    if isinstance(modules, str) and modules.split() and parallelism.get("recompute") == "selective":
        parallelism["recompute_modules"] = modules.split()
    if num_gpus is not None and num_gpus % (tp * pp * cp) == 0:
        parallelism["data_parallel"] = num_gpus // (tp * pp * cp)
    global_batch = _int_arg(args, "global-batch-size")
    if global_batch is None and "data_parallel" in parallelism:
        global_batch = int(parallelism["micro_batch_size"]) * int(parallelism["data_parallel"])  # type: ignore[call-overload]
    if global_batch is not None:
        parallelism["global_batch_size"] = global_batch

    hardware: dict[str, object] = {}
    if gpu is not None:
        hardware["gpu"] = gpu_key_for_gres_type(gpu) or gpu
    if num_gpus is not None:
        hardware["num_gpus"] = num_gpus
    training: dict[str, object] = {"framework": "megatron"}
    iters = _int_arg(args, "train-iters")
    if iters is not None:
        training["train_iters"] = iters
    samples = _int_arg(args, "train-samples")
    if samples is not None and seq is not None:
        training["total_tokens"] = float(samples) * seq

    doc: dict[str, object] = {}
    if name is not None:
        doc["name"] = name
    doc.update(model=model, hardware=hardware, parallelism=parallelism, training=training)
    return doc
