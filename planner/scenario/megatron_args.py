"""Megatron-LM command lines and batch scripts -> scenario documents, plus the Megatron rules the
launch readers (``planner.launch.readers.megatron`` / ``megatron_deepspeed``) share with it:
sample-based step counts (:func:`train_iters_from_samples`) and ``--yaml-cfg`` files read as
arguments (:func:`arguments_from_yaml`). The argument table itself is
:mod:`planner.scenario.megatron_table`.

Reads the arguments of ``pretrain_gpt.py`` (and Megatron-Core based launchers) from a command
line or a whole sbatch script: backslash continuations, quotes, ``--arg=value`` and
``--arg value``, bash variables assigned in the script (``NUM_LAYERS=32`` ... ``$NUM_LAYERS``),
bash arrays (``GPT_ARGS=( --num-layers 32 ... )``). Later occurrences win, as with argparse.
Megatron's own defaults apply where the scenario format's defaults differ: tied embeddings unless
``--untie-embeddings-and-output-weights``, no distributed optimizer (ZeRO 0) unless
``--use-distributed-optimizer`` (ZeRO 1) or FSDP (``--use-torch-fsdp2``: ZeRO 3; Megatron-FSDP,
``--use-megatron-fsdp``: the stage of its ``--data-parallel-sharding-strategy``, unset the newest
Megatron-LM default, ``optim_grads_params``, or ``no_shard`` under ``--use-custom-fsdp``, its name
in core 0.12-0.13, as the Megatron-LM launch reader reads them when the launch names no release),
no sequence parallel unless ``--sequence-parallel``, ``num_query_groups`` only with
``--group-query-attention``. Uneven pipeline stages (``--pipeline-model-parallel-layout``,
``--decoder-first/last-pipeline-num-layers``, ``--account-for-embedding/loss-in-pipeline-split``)
and MoE parallel folding (``--expert-tensor-parallel-size``) become the scenario fields of the
same names, as does ``--fp8-param-gather`` under an FP8 or MXFP8 precision (false under
``--use-torch-fsdp2``, which turns it off: ``megatron_table.fp8_param_gather_values``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

from planner.catalog import gpu_key_for_gres_type
from planner.scenario.megatron_table import (
    INT_ARGS,
    Args,
    ArgValue,
    attention_values,
    cuda_graph_values,
    fp8_param_gather_values,
    fp8_recipe,
    gradient_reduction_values,
    known_tokenizer_vocab,
    megatron_fsdp_flag,
    megatron_int,
    moe_values,
    optimizer_state_values,
    padded_vocab_size,
    parse_megatron_args,
    pipeline_values,
    precision_value,
    recompute_values,
    sharding_strategy_default,
    zero_stage_value,
)

__all__ = [
    "DEFAULT_VOCAB_SIZE",
    "arguments_from_yaml",
    "scenario_document_from_megatron_args",
    "train_iters_from_samples",
]

DEFAULT_VOCAB_SIZE = 50257
"""Vocabulary assumed when the script names no size nor a known tokenizer: GPT-2 BPE (Megatron's
``GPT2BPETokenizer``), then padded like Megatron (``--make-vocab-size-divisible-by`` x tp)."""


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


def _vocab(args: Args, tp: int) -> int:
    padded = megatron_int(args, "padded-vocab-size")
    if padded:
        return padded
    vocab = megatron_int(args, "vocab-size")
    if vocab is None:
        tokenizer = " ".join(
            str(args.get(k, "")) for k in ("tokenizer-model", "tokenizer-type", "vocab-file")
        )
        vocab = known_tokenizer_vocab(tokenizer) or DEFAULT_VOCAB_SIZE
    return padded_vocab_size(vocab, megatron_int(args, "make-vocab-size-divisible-by") or 128, tp)


_MAX_RAMPUP_INCREMENTS = 100_000


def train_iters_from_samples(
    train_samples: int,
    global_batch: int,
    rampup: tuple[int, int, int] | None = None,
    *,
    stop_at_train_samples: bool = True,
) -> int:
    """Optimizer steps of sample-based training, by Megatron's ``update_train_iters``:
    ``train_samples // global_batch`` with a constant batch; with ``rampup`` = (start batch,
    increment, ramp-up samples) the ramp-up phase is stepped through as Megatron's
    ``RampupBatchsizeNumMicroBatchesCalculator`` sizes each batch (``start + int(consumed /
    (ramp_samples / increments)) * increment`` until ``consumed > ramp_samples``), then the
    rest of the samples go at the full batch (a partial last batch is dropped).
    ``stop_at_train_samples``: Megatron-LM also ends the ramp-up loop once ``train_samples``
    are consumed; Megatron-DeepSpeed does not. The ramp-up is walked one batch size at a time
    (arithmetic, not one step at a time).

    Raises ``ValueError`` for values Megatron rejects (non-positive sizes, a ramp that does not
    reach ``global_batch`` in whole increments) or a ramp of over 100,000 increments.
    """
    if train_samples < 0 or global_batch <= 0:
        raise ValueError("train samples and global batch must be positive")
    if rampup is None:
        return train_samples // global_batch
    start, increment, ramp_samples = rampup
    if start <= 0 or increment <= 0 or ramp_samples <= 0 or global_batch < start:
        raise ValueError(
            "rampup-batch-size needs a start <= the global batch, a positive step and samples"
        )
    if (global_batch - start) % increment:
        raise ValueError("rampup-batch-size: global batch - start is not a multiple of the step")
    increments = (global_batch - start) // increment
    if increments == 0 or increments > _MAX_RAMPUP_INCREMENTS:
        raise ValueError(f"rampup-batch-size: {increments} increments (1 to 100,000 taken)")
    per_increment = ramp_samples / increments

    def batch_at(consumed: int) -> int:
        if consumed > ramp_samples:
            return global_batch
        return start + int(consumed / per_increment) * increment

    limit = min(ramp_samples, train_samples) if stop_at_train_samples else ramp_samples
    iterations = consumed = 0
    while consumed <= limit:
        batch = batch_at(consumed)
        # the last consumed count that still gives this batch size (found arithmetically, then
        # checked against the exact float rule Megatron uses)
        step = int(consumed / per_increment) + 1
        change = min(int(step * per_increment) + 1, ramp_samples + 1)
        last = min(limit, change)
        steps = max(1, (last - consumed) // batch + 1)
        while steps > 1 and (
            batch_at(consumed + (steps - 1) * batch) != batch
            or consumed + (steps - 1) * batch > limit
        ):
            steps -= 1
        while consumed + steps * batch <= limit and batch_at(consumed + steps * batch) == batch:
            steps += 1
        consumed += steps * batch
        iterations += steps
    if train_samples > consumed or not stop_at_train_samples:
        iterations += (train_samples - consumed) // global_batch
    return iterations


_YAML_SECTIONS = ("language_model", "model_parallel")
_YAML_RENAMES = {"num_moe_experts": "num-experts", "fp8": "fp8-format"}
_YAML_IGNORED = frozenset({"swiglu", "squared_relu", "group_query_attention"})
"""Top-level keys ``validate_yaml`` does not read for the model (the activation comes from
``language_model.activation_func``, grouped-query attention from
``language_model.num_query_groups``)."""


def arguments_from_yaml(data: Mapping[str, object]) -> tuple[dict[str, str | bool], dict[str, str]]:
    """A Megatron-LM ``--yaml-cfg`` file (NVIDIA/Megatron-LM
    ``megatron/training/yaml_arguments.py``) as arguments: ``({argument: value}, {argument:
    dotted YAML key})``. Keys are argparse names at the top level and under ``language_model``
    and ``model_parallel``; ``null`` and ``false`` values are left out (an argument not given),
    ``true`` is a switch, lists are joined by spaces. ``activation_func: swiglu`` /
    ``squaredrelu`` read as ``--swiglu`` / ``--squared-relu``; a ``num_query_groups`` value as
    ``--group-query-attention --num-query-groups N`` (the YAML path uses it as given);
    ``num_moe_experts`` as ``--num-experts``; ``fp8`` as ``--fp8-format``; ``add_bias_linear:
    false`` as ``--disable-bias-linear``."""
    args: dict[str, str | bool] = {}
    keys: dict[str, str] = {}

    def put(arg: str, value: str | bool, dotted: str) -> None:
        args[arg] = value
        keys[arg] = dotted

    items: list[tuple[str, str, object]] = []
    for key, value in data.items():
        name = str(key)
        if name in _YAML_SECTIONS and isinstance(value, Mapping):
            items.extend((str(k), f"{name}.{k}", v) for k, v in value.items())
        elif name not in _YAML_IGNORED:
            items.append((name, name, value))
    for key, dotted, value in items:
        if key == "activation_func":
            flag = {"swiglu": "swiglu", "squaredrelu": "squared-relu"}.get(str(value))
            if flag:
                put(flag, True, dotted)
            continue
        if key == "add_bias_linear":  # the TransformerConfig field --disable-bias-linear clears
            if value is False:
                put("disable-bias-linear", True, dotted)
            continue
        arg = _YAML_RENAMES.get(key, key.replace("_", "-"))
        if value is None or value is False or isinstance(value, Mapping):
            continue
        if value is True:
            put(arg, True, dotted)
        elif isinstance(value, list):
            put(arg, " ".join(str(item) for item in value), dotted)
        elif isinstance(value, int | float | str):
            put(arg, str(value), dotted)
        if key == "num_query_groups":
            put("group-query-attention", True, dotted)
    return args, keys


def _as_dict(values: Iterable[ArgValue]) -> dict[str, object]:
    return {row.field.partition(".")[2]: row.value for row in values}


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
    args = parse_megatron_args(_split(text))
    ints = {field: megatron_int(args, arg) for arg, field in INT_ARGS}
    layers = ints["model.num_layers"]
    hidden = ints["model.hidden_size"]
    heads = ints["model.num_attention_heads"]
    if layers is None or hidden is None or heads is None:
        return None
    tp = ints["parallelism.tensor_parallel"] or 1
    pp = ints["parallelism.pipeline_parallel"] or 1
    cp = ints["parallelism.context_parallel"] or 1
    ep = ints["parallelism.expert_parallel"] or 1

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
    seq = megatron_int(args, "seq-length") or megatron_int(args, "max-position-embeddings")
    if seq is not None:
        model["seq_length"] = seq
    for field in (
        "model.ffn_hidden_size",
        "model.kv_channels",
        "model.moe_ffn_hidden_size",
    ):
        if ints[field] is not None:
            model[field.partition(".")[2]] = ints[field]
    num_experts = megatron_int(args, "num-experts")
    if num_experts is not None:
        model["num_experts"] = num_experts
    if args.get("group-query-attention") is True:
        groups = megatron_int(args, "num-query-groups")
        if groups is not None:
            model["num_query_groups"] = groups
    if num_experts:
        model["moe_router_topk"] = megatron_int(args, "moe-router-topk") or 2
        model.update(_as_dict(moe_values(args)))
    model.update(_as_dict(attention_values(args)))
    mtp = ints["model.mtp_num_layers"]
    if mtp:
        model["mtp_num_layers"] = mtp

    precision = precision_value(args)
    micro_batch = ints["parallelism.micro_batch_size"] or 1
    parallelism: dict[str, object] = {
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "context_parallel": cp,
        "expert_parallel": ep,
        "sequence_parallel": args.get("sequence-parallel") is True and tp > 1,
        "micro_batch_size": micro_batch,
        "precision": precision.value if precision is not None else "bf16",
        "zero_stage": zero_stage_value(args, sharding_strategy_default(args)).value,
    }
    if megatron_fsdp_flag(args) is not None:
        parallelism["megatron_fsdp"] = True
    recipe = fp8_recipe(args, str(parallelism["precision"]))
    if recipe is not None:
        parallelism["fp8_recipe"] = recipe
    parallelism.update(_as_dict(fp8_param_gather_values(args, str(parallelism["precision"]))))
    parallelism.update(_as_dict(gradient_reduction_values(args)))
    parallelism.update(_as_dict(optimizer_state_values(args)))
    parallelism.update(_as_dict(pipeline_values(args, layers, pp)))
    etp = ints["parallelism.expert_tensor_parallel"]
    if etp is not None:
        parallelism["expert_tensor_parallel"] = etp
    parallelism.update(_as_dict(recompute_values(args)))
    global_batch = ints["parallelism.global_batch_size"]
    if num_gpus is not None and num_gpus % (tp * pp * cp) == 0:
        data_parallel = num_gpus // (tp * pp * cp)
        parallelism["data_parallel"] = data_parallel
        if global_batch is None:
            global_batch = micro_batch * data_parallel
    if global_batch is not None:
        parallelism["global_batch_size"] = global_batch

    hardware: dict[str, object] = {}
    if gpu is not None:
        hardware["gpu"] = gpu_key_for_gres_type(gpu) or gpu
    if num_gpus is not None:
        hardware["num_gpus"] = num_gpus
    training: dict[str, object] = {"framework": "megatron"}
    iters = ints["training.train_iters"]
    if iters is not None:
        training["train_iters"] = iters
    samples = megatron_int(args, "train-samples")
    if samples is not None and seq is not None:
        training["total_tokens"] = float(samples) * seq
    training.update(_as_dict(cuda_graph_values(args)))

    doc: dict[str, object] = {}
    if name is not None:
        doc["name"] = name
    doc.update(model=model, hardware=hardware, parallelism=parallelism, training=training)
    return doc
