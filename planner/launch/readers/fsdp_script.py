"""Plain PyTorch FSDP training scripts in the style of the AWS "awsome-distributed-training"
example (``3.test_cases/pytorch/FSDP/src/train.py``): a ``.py`` program whose argparse flags
describe the model (``--model_type llama_v3|mixtral|...``, ``--hidden_width``, ``--num_layers``,
``--num_heads``, ``--num_key_value_heads``, ``--intermediate_size``, ``--max_context_width``,
``--vocab_size``) and the run (``--train_batch_size``, ``--max_steps``, ``--bf16``,
``--sharding_strategy``, ``--activation_checkpointing``).

Flags left out take the script's argparse defaults; ``--model_type`` picks the Hugging Face config
``get_model_config`` builds (matched by substring, in the script's order), with what that config
hard-codes (Mixtral's 8 experts, top-2). Two things the flags do not say
(``planner/launch/data/fsdp_script.yaml``, each with its repo, path and commit):

* the training sequence is the streaming dataloader's default block size (4096):
  ``--max_context_width`` only sets ``max_position_embeddings``;
* there is no gradient accumulation: global batch = ``--train_batch_size`` x ranks, and every
  rank shards the model (FSDP2 ``fully_shard`` with ``reshard_after_forward``, also for
  ``--sharding_strategy hybrid``, which passes no mesh).

The script builds the model with ``AutoModelForCausalLM.from_config``, so it runs the
``transformers`` model code of the config's ``model_type``, whose separate or fused
projections are stated as :mod:`planner.launch.model_code` gives them.

The script is recognised by its flags (``--model_type`` with ``--max_context_width``,
``--hidden_width``, ``--num_layers`` or ``--num_heads``), not by its file name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from planner.errors import SpecError
from planner.launch.data import load_data
from planner.launch.model_code import TRANSFORMERS, state_projections
from planner.launch.reader import ReadContext
from planner.launch.readers.hf_args import flag_args
from planner.launch.types import Facts, Invocation
from planner.launch.values import as_int

__all__ = ["READER", "FsdpScriptReader"]

_SHAPE_FLAGS = frozenset({"max_context_width", "hidden_width", "num_layers", "num_heads"})
_ALIASES = {"max_training_steps": "max_steps"}


def _flags(args: Sequence[str]) -> dict[str, tuple[object, str]]:
    """argparse ``--name value`` / ``--name=value`` flags as name -> (value, the argument); a
    later flag wins, as with argparse."""
    found = flag_args(args).values
    return {_ALIASES.get(name, name): value for name, value in found.items()}


class _Script:
    """The script's flags over its argparse defaults, each with its source."""

    def __init__(self, flags: Mapping[str, tuple[object, str]]) -> None:
        self.flags = flags
        self.data = load_data("fsdp_script.yaml")
        arguments = self.data.get("arguments")
        if not isinstance(arguments, Mapping):
            raise SpecError("planner/launch/data/fsdp_script.yaml", "arguments is missing")
        self.defaults: Mapping[str, object] = arguments

    def location(self, key: str) -> str:
        """``<repo>/<path>@<short commit>`` of the data file's path ``key``."""
        commit = str(self.data.get("commit"))
        return f"{self.data.get('repo')}/{self.data.get(key)}@{commit[:7]}"

    def cite(self, key: str) -> str:
        """``default of <framework> (<repo>/<path>@<short commit>)``."""
        return f"default of {self.data.get('framework')} ({self.location(key)})"

    def get(self, name: str) -> tuple[object, str, bool]:
        """``(value, source, given on the command line)``."""
        if name in self.flags:
            value, argument = self.flags[name]
            return value, f"override: {argument}", True
        return self.defaults.get(name), self.cite("arguments_path"), False


def _put(facts: Facts, name: str, value: object, source: str, given: bool) -> None:
    if given:
        facts.set(name, value, source)
    else:
        facts.default(name, value, source)


class FsdpScriptReader:
    """Reads AWS-style FSDP ``train.py`` launches (module docstring)."""

    name = "fsdp_script"

    def recognises(self, invocation: Invocation) -> bool:
        """A ``.py`` program given ``--model_type`` and one of the model-shape flags."""
        if not invocation.program.endswith(".py"):
            return False
        names = set(_flags(invocation.args))
        return "model_type" in names and bool(names & _SHAPE_FLAGS)

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the script trains; raises nothing for odd flags (they are noted)."""
        facts = Facts()
        facts.set("training.framework", "fsdp", "launch: PyTorch FSDP script")
        facts.set(
            "training.mode",
            "pretrain",
            "derived: the script builds a randomly initialised model from its config",
        )
        script = _Script(_flags(invocation.args))
        self._model(script, facts)
        self._run(script, facts)
        self._world(invocation, context, facts)
        return facts

    def _model(self, script: _Script, facts: Facts) -> None:
        kind, kind_source, _given = script.get("model_type")
        entry = _model_entry(script.data, str(kind))
        if entry is None:
            facts.note(
                f"--model_type {kind} ({kind_source}) is not one the script builds; "
                "the model shape is unknown"
            )
            return
        where = script.location("train_utils_path")
        built = f"{entry.get('config')} built by get_model_config ({where})"
        facts.set("launch.model_name", f"{kind} ({entry.get('config')})", kind_source)
        state_projections(
            facts, TRANSFORMERS, str(entry.get("hf_model_type", "")), code="transformers"
        )
        for flag, name in (
            ("num_layers", "model.num_layers"),
            ("hidden_width", "model.hidden_size"),
            ("num_heads", "model.num_attention_heads"),
            ("vocab_size", "model.vocab_size"),
        ):
            value, source, given = script.get(flag)
            _put(facts, name, as_int(value), source, given)
        heads, heads_source, heads_given = script.get("num_heads")
        kv, kv_source, kv_given = script.get("num_key_value_heads")
        if entry.get("key") == "gpt_neox" or as_int(kv) is None:
            _put(facts, "model.num_query_groups", as_int(heads), heads_source, heads_given)
        else:
            _put(facts, "model.num_query_groups", as_int(kv), kv_source, kv_given)
        hidden = as_int(script.get("hidden_width")[0])
        if entry.get("ffn") == "four_times_hidden":
            if hidden:
                facts.set("model.ffn_hidden_size", 4 * hidden, f"derived: 4 x hidden ({built})")
        else:
            value, source, given = script.get("intermediate_size")
            _put(facts, "model.ffn_hidden_size", as_int(value), source, given)
        facts.set("model.activation", entry.get("activation"), built)
        facts.set("model.untie_embeddings", entry.get("untie_embeddings") is True, built)
        experts = as_int(entry.get("num_experts"))
        if experts:
            facts.set("model.num_experts", experts, built)
            facts.set("model.moe_router_topk", as_int(entry.get("moe_router_topk")), built)
            value, source, given = script.get("intermediate_size")
            _put(facts, "model.moe_ffn_hidden_size", as_int(value), source, given)
            facts.note(
                f"{kind}: {experts} experts, top-{entry.get('moe_router_topk')}, are "
                "hard-coded in get_model_config, not flags; experts are FSDP-sharded "
                "like dense weights (no expert parallelism)"
            )
            facts.set("parallelism.expert_parallel", 1, built)
        seq = as_int(script.data.get("dataloader_seq_length"))
        facts.set(
            "model.seq_length",
            seq,
            f"derived: the dataloader's default block size "
            f"(create_streaming_dataloader, {script.location('train_utils_path')})",
        )
        width, width_source, width_given = script.get("max_context_width")
        if width_given and as_int(width) != seq:
            facts.note(
                f"{width_source} only sets max_position_embeddings ({width}); "
                f"train.py's dataloader cuts {seq}-token sequences"
            )

    def _run(self, script: _Script, facts: Facts) -> None:
        value, source, given = script.get("train_batch_size")
        _put(facts, "parallelism.micro_batch_size", as_int(value), source, given)
        facts.set(
            "launch.gradient_accumulation",
            as_int(script.data.get("gradient_accumulation")),
            f"derived: one optimizer step per batch ({script.location('train_path')})",
        )
        value, source, given = script.get("max_steps")
        _put(facts, "training.train_iters", as_int(value), source, given)
        value, source, given = script.get("bf16")
        if value:
            _put(facts, "parallelism.precision", "bf16", source, given)
        else:
            facts.note(
                f"bf16 off ({source}): fp32 training, which the scenario format does not model"
            )
        value, source, given = script.get("activation_checkpointing")
        if value:
            _put(facts, "parallelism.recompute", "full", source, given)
        value, source, given = script.get("sharding_strategy")
        facts.set("parallelism.zero_stage", 3, f"derived: fully_shard ({source})")
        if str(value) == "hybrid":
            facts.note(
                "--sharding_strategy hybrid: train.py passes no device mesh, so "
                "fully_shard still shards over every rank"
            )
        for flag, what in (
            ("cpu_offload", "parameters offloaded to CPU"),
            ("offload_activations", "activations offloaded to CPU"),
        ):
            value, source, _given = script.get(flag)
            if value:
                facts.note(f"{what} ({source})")

    def _world(self, invocation: Invocation, context: ReadContext, facts: Facts) -> None:
        """Every rank is a data-parallel FSDP shard: ``launch.fsdp_shard`` = the world size
        (the launcher's, else ``torchrun``'s ``--nnodes`` x ``--nproc_per_node``)."""
        allocation = context.allocation
        world = allocation.int("launch.world_size")
        if world:
            facts.set("launch.fsdp_shard", world, "derived: FSDP over every rank (launch)")
            return
        options = invocation.launcher_args
        per_node = as_int(options.get("nproc_per_node", ""))
        nodes = as_int(options.get("nnodes", "1"))
        if per_node and nodes:
            source = f"launch: {invocation.launcher} --nnodes x --nproc_per_node"
            facts.set("hardware.num_gpus", per_node * nodes, source)
            facts.set("hardware.gpus_per_node", per_node, source)
            facts.set("launch.num_nodes", nodes, source)
            facts.set("launch.fsdp_shard", per_node * nodes, "derived: FSDP over every rank")
            return
        gpus = allocation.int("hardware.num_gpus") or context.launch.num_gpus
        if gpus:
            facts.set("launch.fsdp_shard", gpus, "derived: FSDP over every allocated GPU")


def _model_entry(data: Mapping[str, object], kind: str) -> Mapping[str, object] | None:
    """The first ``model_types`` entry whose key is a substring of ``--model_type``."""
    entries = data.get("model_types")
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and str(entry.get("key")) in kind:
            return entry
    return None


READER = FsdpScriptReader()
