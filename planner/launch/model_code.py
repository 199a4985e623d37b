"""Whether the model code a launch runs projects query, key and value with separate linears and
a gated MLP's gate and up with separate linears: the scenario's
``parallelism.separate_qkv_projections`` and ``parallelism.separate_gate_up_projections``
(:mod:`planner.perf.frameworks` field notes), stated by the readers of launches whose model code
is known, by model family.

* Hugging Face ``transformers`` model code (HF Trainer / TRL / accelerate, Axolotl,
  LLaMA-Factory without mcore_adapter, plain FSDP scripts built on ``AutoModelForCausalLM``):
  :data:`TRANSFORMERS`, keyed by the config's ``model_type``.
* torchtune's model builders: :data:`TORCHTUNE`, keyed by the builder's family
  (``torchtune.models.<family>.<builder>``).

A family not in its table states nothing (the framework profile's fused default stays), with a
note. The gate/up field is left unset for a family without a dense gated MLP (GPT-NeoX's MLP is
not gated; Mixtral's and gpt-oss's layers are all experts), since it describes the dense MLP
only (:mod:`planner.perf.operators`), and for Qwen3-MoE, whose dense layers' MLP was not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.launch.types import Facts

__all__ = [
    "TORCHTUNE",
    "TRANSFORMERS",
    "Projections",
    "state_projections",
    "state_transformers_projections",
]


@dataclass(frozen=True, slots=True)
class Projections:
    """How one family's model code builds its projections: ``qkv`` true for separate query, key
    and value linears (false: one fused QKV linear); ``gate_up`` true for separate gate and up
    linears of the dense gated MLP (false: one fused linear; None: not stated, the family has
    no dense gated MLP or its code was not read);
    ``source``: the class and file read, with repository and commit."""

    qkv: bool
    gate_up: bool | None
    source: str


_HF = "huggingface/transformers"
TRANSFORMERS: dict[str, Projections] = {
    "llama": Projections(
        True,
        True,
        f"{_HF}/src/transformers/models/llama/modeling_llama.py@0022728: LlamaAttention "
        "q_proj/k_proj/v_proj, LlamaMLP gate_proj/up_proj",
    ),
    "mistral": Projections(
        True,
        True,
        f"{_HF}/src/transformers/models/mistral/modular_mistral.py@0096ba4: MistralAttention "
        "q_proj/k_proj/v_proj, MistralMLP gate_proj/up_proj",
    ),
    "mixtral": Projections(
        True,
        None,
        f"{_HF}/src/transformers/models/mixtral/modular_mixtral.py@008f5c8: MixtralAttention "
        "(MistralAttention) q_proj/k_proj/v_proj; every layer's MLP is the sparse MoE block",
    ),
    "qwen2": Projections(
        True,
        True,
        f"{_HF}/src/transformers/models/qwen2/modular_qwen2.py@022c4a9: Qwen2Attention "
        "q_proj/k_proj/v_proj, Qwen2MLP gate_proj/up_proj",
    ),
    "qwen3": Projections(
        True,
        True,
        f"{_HF}/src/transformers/models/qwen3/modeling_qwen3.py@000c33f: Qwen3Attention "
        "q_proj/k_proj/v_proj, Qwen3MLP gate_proj/up_proj",
    ),
    "qwen3_moe": Projections(
        True,
        None,
        f"{_HF}/src/transformers/models/qwen3_moe/modular_qwen3_moe.py@00eb116: "
        "Qwen3MoeAttention (Qwen3Attention) q_proj/k_proj/v_proj; its dense Qwen3MoeMLP "
        "(mlp_only_layers) not read",
    ),
    "gpt_oss": Projections(
        True,
        None,
        f"{_HF}/src/transformers/models/gpt_oss/modular_gpt_oss.py@0261a46: GptOssAttention "
        "q_proj/k_proj/v_proj; every layer's MLP is GptOssExperts",
    ),
    "phi3": Projections(
        False,
        False,
        f"{_HF}/src/transformers/models/phi3/modular_phi3.py@06053b8: Phi3Attention qkv_proj, "
        "Phi3MLP gate_up_proj",
    ),
    "gpt_neox": Projections(
        False,
        None,
        f"{_HF}/src/transformers/models/gpt_neox/modular_gpt_neox.py@00dcc6d: GPTNeoXAttention "
        "query_key_value; GPTNeoXMLP is not gated",
    ),
}
"""``transformers`` model code by ``model_type`` (the families read; others state nothing)."""

_TT = "pytorch/torchtune"
_TT_LINEARS = "q_proj/k_proj/v_proj nn.Linear; FeedForward gate_proj (w1) / up_proj (w3)"
_TT_FEED_FORWARD = f"{_TT}/torchtune/modules/feed_forward.py@bd2a0fc"


def _torchtune(family: str, component: str) -> Projections:
    return Projections(
        True,
        True,
        f"{_TT}/torchtune/models/{component}/_component_builders.py@bd2a0fc ({family}): "
        f"{_TT_LINEARS} ({_TT_FEED_FORWARD})",
    )


TORCHTUNE: dict[str, Projections] = {
    family: _torchtune(family, component)
    for family, component in (
        ("gemma", "gemma"),
        ("gemma2", "gemma2"),
        ("llama2", "llama2"),
        ("llama3", "llama3"),
        ("llama3_1", "llama3_1"),
        ("llama3_2", "llama3_2"),
        ("llama3_3", "llama3_1"),  # llama3_3/_model_builders.py builds llama3_1's decoder
        ("llama4", "llama4"),
        ("mistral", "mistral"),
        ("phi3", "phi3"),
        ("phi4", "phi3"),  # phi4/_model_builders.py builds phi3's decoder
        ("qwen2", "qwen2"),
        ("qwen2_5", "qwen2"),  # qwen2_5/_model_builders.py builds qwen2's decoder
        ("qwen3", "qwen3"),
    )
}
"""torchtune 0.7 (@bd2a0fc) decoders by builder family: every one projects with separate
``q_proj`` / ``k_proj`` / ``v_proj`` linears and a ``FeedForward`` of separate ``gate_proj`` /
``up_proj`` linears (its ``w1`` / ``w3``); Llama 4's MoE layers use ``GroupedExperts``, its
dense layers ``FeedForward``."""


def state_projections(
    facts: Facts,
    table: dict[str, Projections],
    family: str,
    *,
    code: str,
    skip_qkv: bool = False,
    skip_gate_up: bool = False,
) -> None:
    """State both fields for ``family`` as ``table`` gives them (``code`` names the model code
    in the sources and notes: ``transformers``, ``torchtune``); a family not in ``table``
    states nothing and is noted. ``skip_qkv`` / ``skip_gate_up``: the launch replaces that
    part of the model code (its reader notes why), so the field stays unset."""
    found = table.get(family)
    if found is None:
        facts.note(
            f"{code} model code for {family!r}: whether it projects query/key/value and "
            "gate/up with separate linears is not known to the planner; the framework's fused "
            "default stays (state parallelism.separate_qkv_projections / "
            "separate_gate_up_projections where it does)"
        )
        return
    source = f"derived: {code} model code, {found.source}"
    if not skip_qkv:
        facts.set("parallelism.separate_qkv_projections", found.qkv, source)
    if found.gate_up is not None and not skip_gate_up:
        facts.set("parallelism.separate_gate_up_projections", found.gate_up, source)


def state_transformers_projections(
    facts: Facts, *, skip_qkv: bool = False, skip_gate_up: bool = False
) -> None:
    """:func:`state_projections` from :data:`TRANSFORMERS` for the ``model_type`` the model
    resolved to (``launch.hf_model_type``, :func:`planner.launch.models.resolve_model`);
    nothing when the model is unknown."""
    model_type = facts.get("launch.hf_model_type")
    if isinstance(model_type, str) and model_type:
        state_projections(
            facts,
            TRANSFORMERS,
            model_type,
            code="transformers",
            skip_qkv=skip_qkv,
            skip_gate_up=skip_gate_up,
        )
