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
note. The gate/up field is left unset for a family without a dense gated MLP (the MLPs of
GPT-NeoX, GPT-2, Falcon, Phi-1/2 and Starcoder2 are not gated; Mixtral's and gpt-oss's layers
are all experts), since it describes the dense MLP only (:mod:`planner.perf.operators`,
:mod:`planner.perf.tensor`: it counts with ``gated_linear_unit`` and for the dense layers). The
MoE families with dense layers (Qwen2-MoE and Qwen3-MoE off their sparse step, DeepSeek-V2/V3,
Llama 4) state it for those layers' MLP; their experts' weights are priced by the expert path
(:mod:`planner.perf.moe_mlp`) whatever the code fuses there. The
q/k/v field is left unset, with a note, for multi-latent attention (DeepSeek-V2/V3), whose
low-rank projections the planner prices by their own shapes (:mod:`planner.perf.attention`
ignores ``separate_qkv_projections`` under MLA).
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
    and value linears (false: one fused QKV linear; None: not stated, the attention is not
    built of query/key/value projections of the hidden state); ``gate_up`` true for separate
    gate and up linears of the dense gated MLP (false: one fused linear; None: not stated, the
    family has no dense gated MLP or its code was not read);
    ``source``: the class and file read, with repository and commit; ``note``: why a field is
    left unstated, said in the launch's notes (empty: nothing to say)."""

    qkv: bool | None
    gate_up: bool | None
    source: str
    note: str = ""


_HF = "huggingface/transformers"
_MODELS = f"{_HF}/src/transformers/models"
_MLA_NOTE = (
    "its attention is multi-latent (low-rank query and key/value down and up projections), "
    "which parallelism.separate_qkv_projections does not describe: the planner prices those "
    "projections by their own shapes, so the field is left unstated"
)


def _separate(
    file: str, commit: str, attention: str, mlp: str, *, mlp_where: str = ""
) -> Projections:
    """Separate ``q_proj``/``k_proj``/``v_proj`` and ``gate_proj``/``up_proj`` linears, as read
    in ``models/<file>`` at ``commit`` (``mlp_where``: which layers build ``mlp``)."""
    where = f" ({mlp_where})" if mlp_where else ""
    return Projections(
        True,
        True,
        f"{_MODELS}/{file}@{commit}: {attention} q_proj/k_proj/v_proj, "
        f"{mlp}{where} gate_proj/up_proj",
    )


def _ungated(file: str, commit: str, attention: str, mlp: str, *, qkv: bool) -> Projections:
    """Attention of separate query/key/value linears (``qkv``) or of the one fused linear
    ``attention`` names, and an MLP of two linears ``mlp``, no gate: the gate/up field stays
    unset."""
    return Projections(
        qkv,
        None,
        f"{_MODELS}/{file}@{commit}: {attention}; {mlp} is not gated",
    )


def _multi_latent(file: str, commit: str, attention: str, query: str, mlp: str) -> Projections:
    """Multi-latent attention whose query comes from ``query`` (q/k/v unstated,
    :data:`_MLA_NOTE`) and dense layers of separate ``gate_proj``/``up_proj`` linears (the first
    ``first_k_dense_replace`` layers and the shared experts)."""
    return Projections(
        None,
        True,
        f"{_MODELS}/{file}@{commit}: {attention} (multi-latent: {query}, "
        f"kv_a_proj_with_mqa/kv_b_proj), {mlp} (dense layers below first_k_dense_replace, "
        "shared experts) gate_proj/up_proj",
        _MLA_NOTE,
    )


_GEMMA3 = _separate(
    "gemma3/modeling_gemma3.py",
    "f14d0cb",
    "Gemma3Attention",
    "Gemma3MLP",
    mlp_where="Gemma3TextModel's layers, the multimodal Gemma3Model's language_model",
)
_LLAMA4 = _separate(
    "llama4/modeling_llama4.py",
    "63210d0",
    "Llama4TextAttention",
    "Llama4TextMLP",
    mlp_where="layers outside moe_layers and the shared expert; Llama4TextExperts' one "
    "gate_up_proj parameter is the experts'",
)
TRANSFORMERS: dict[str, Projections] = {
    "llama": _separate("llama/modeling_llama.py", "0022728", "LlamaAttention", "LlamaMLP"),
    "mistral": _separate("mistral/modular_mistral.py", "0096ba4", "MistralAttention", "MistralMLP"),
    "mixtral": Projections(
        True,
        None,
        f"{_MODELS}/mixtral/modular_mixtral.py@008f5c8: MixtralAttention "
        "(MistralAttention) q_proj/k_proj/v_proj; every layer's MLP is the sparse MoE block",
    ),
    "qwen2": _separate("qwen2/modular_qwen2.py", "022c4a9", "Qwen2Attention", "Qwen2MLP"),
    "qwen3": _separate("qwen3/modeling_qwen3.py", "000c33f", "Qwen3Attention", "Qwen3MLP"),
    "qwen2_moe": _separate(
        "qwen2_moe/modeling_qwen2_moe.py",
        "1c35131",
        "Qwen2MoeAttention",
        "Qwen2MoeMLP",
        mlp_where="mlp_only_layers and layers off decoder_sparse_step, the shared expert",
    ),
    "qwen3_moe": _separate(
        "qwen3_moe/modular_qwen3_moe.py",
        "b282e23",
        "Qwen3MoeAttention (Qwen3Attention)",
        "Qwen3MoeMLP",
        mlp_where="mlp_only_layers and layers off decoder_sparse_step",
    ),
    "gpt_oss": Projections(
        True,
        None,
        f"{_MODELS}/gpt_oss/modular_gpt_oss.py@0261a46: GptOssAttention "
        "q_proj/k_proj/v_proj; every layer's MLP is GptOssExperts",
    ),
    "gemma": _separate("gemma/modeling_gemma.py", "c4cdd1a", "GemmaAttention", "GemmaMLP"),
    "gemma2": _separate("gemma2/modeling_gemma2.py", "9a80143", "Gemma2Attention", "Gemma2MLP"),
    "gemma3": _GEMMA3,
    "gemma3_text": _GEMMA3,
    "olmo": _separate("olmo/modeling_olmo.py", "38e888f", "OlmoAttention", "OlmoMLP"),
    "olmo2": _separate("olmo2/modeling_olmo2.py", "7264638", "Olmo2Attention", "Olmo2MLP"),
    "granite": _separate(
        "granite/modeling_granite.py", "b6dd89b", "GraniteAttention", "GraniteMLP"
    ),
    "cohere": _separate("cohere/modeling_cohere.py", "dbb5a50", "CohereAttention", "CohereMLP"),
    "llama4": _LLAMA4,
    "llama4_text": _LLAMA4,
    "deepseek_v2": _multi_latent(
        "deepseek_v2/modeling_deepseek_v2.py",
        "03eac6f",
        "DeepseekV2Attention",
        "q_proj without q_lora_rank, else q_a_proj/q_b_proj",
        "DeepseekV2MLP",
    ),
    "deepseek_v3": _multi_latent(
        "deepseek_v3/modeling_deepseek_v3.py",
        "f5a9ec5",
        "DeepseekV3Attention",
        "q_a_proj/q_b_proj",
        "DeepseekV3MLP",
    ),
    "phi3": Projections(
        False,
        False,
        f"{_MODELS}/phi3/modular_phi3.py@06053b8: Phi3Attention qkv_proj, Phi3MLP gate_up_proj",
    ),
    "gpt_neox": _ungated(
        "gpt_neox/modular_gpt_neox.py",
        "00dcc6d",
        "GPTNeoXAttention query_key_value",
        "GPTNeoXMLP",
        qkv=False,
    ),
    "starcoder2": _ungated(
        "starcoder2/modeling_starcoder2.py",
        "73faa33",
        "Starcoder2Attention q_proj/k_proj/v_proj",
        "Starcoder2MLP c_fc/c_proj",
        qkv=True,
    ),
    "phi": _ungated(
        "phi/modeling_phi.py",
        "0faeaf3",
        "PhiAttention q_proj/k_proj/v_proj",
        "PhiMLP fc1/fc2",
        qkv=True,
    ),
    "falcon": _ungated(
        "falcon/modeling_falcon.py",
        "4427208",
        "FalconAttention query_key_value (one FalconLinear)",
        "FalconMLP dense_h_to_4h/dense_4h_to_h",
        qkv=False,
    ),
    "gpt2": _ungated(
        "gpt2/modeling_gpt2.py",
        "c44b2d9",
        "GPT2Attention c_attn (one Conv1D of 3 x hidden)",
        "GPT2MLP c_fc/c_proj",
        qkv=False,
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
    in the sources and notes: ``transformers``, ``torchtune``), and note why one is left
    unstated where the table says; a family not in ``table`` states nothing and is noted.
    ``skip_qkv`` / ``skip_gate_up``: the launch replaces that part of the model code (its
    reader notes why), so the field stays unset."""
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
    if found.qkv is not None and not skip_qkv:
        facts.set("parallelism.separate_qkv_projections", found.qkv, source)
    if found.gate_up is not None and not skip_gate_up:
        facts.set("parallelism.separate_gate_up_projections", found.gate_up, source)
    if found.note:
        facts.note(f"{code} model code for {family!r}: {found.note} ({found.source})")


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
