"""The transformer being trained (Megatron-LM argument names), as a frozen value object."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from planner.errors import SpecError
from planner.specs._checks import require_bool, require_int


class Activation(StrEnum):
    """MLP activation. ``swiglu`` is gated (three weight matrices: Megatron ``--swiglu``);
    ``gelu`` and ``squared_relu`` (Nemotron-4) use two."""

    GELU = "gelu"
    SWIGLU = "swiglu"
    SQUARED_RELU = "squared_relu"

    @property
    def is_gated(self) -> bool:
        """True when the MLP has a gate projection (three matrices instead of two)."""
        return self is Activation.SWIGLU


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer (GPT/Llama/MoE), field names as in Megatron-LM.

    ``num_query_groups`` is the number of KV heads (GQA/MQA; equal to ``num_attention_heads``
    for multi-head attention). ``kv_channels`` is the per-head width (Megatron ``--kv-channels``;
    ``hidden_size // num_attention_heads`` unless the model says otherwise, as Qwen3 does).
    MoE: ``num_experts`` routed experts of width ``moe_ffn_hidden_size``, ``moe_router_topk`` of
    them active per token, ``num_shared_experts`` always active, ``num_dense_layers`` leading
    dense layers. ``num_experts == 0`` means a dense model. Raises ``SpecError`` naming the
    ``model.<field>`` at fault.
    """

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    ffn_hidden_size: int
    vocab_size: int
    seq_length: int
    kv_channels: int
    activation: Activation = Activation.GELU
    untie_embeddings: bool = True
    num_experts: int = 0
    moe_router_topk: int = 0
    moe_ffn_hidden_size: int = 0
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    preset: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "num_layers",
            "hidden_size",
            "num_attention_heads",
            "num_query_groups",
            "ffn_hidden_size",
            "vocab_size",
            "seq_length",
            "kv_channels",
        ):
            require_int(f"model.{name}", getattr(self, name))
        for name in (
            "num_experts",
            "moe_router_topk",
            "moe_ffn_hidden_size",
            "num_shared_experts",
            "num_dense_layers",
        ):
            require_int(f"model.{name}", getattr(self, name), minimum=0)
        require_bool("model.untie_embeddings", self.untie_embeddings)
        if not isinstance(self.activation, Activation):
            raise SpecError(
                "model.activation",
                f"must be one of {', '.join(a.value for a in Activation)}, got {self.activation!r}",
            )
        if self.num_attention_heads % self.num_query_groups:
            raise SpecError(
                "model.num_query_groups",
                f"{self.num_query_groups} does not divide num_attention_heads="
                f"{self.num_attention_heads}; each KV group serves a whole number of query heads",
            )
        if self.num_experts == 1:
            raise SpecError(
                "model.num_experts", "1 routed expert is not MoE; use 0 (dense) or at least 2"
            )
        if self.num_experts:
            if not 1 <= self.moe_router_topk <= self.num_experts:
                raise SpecError(
                    "model.moe_router_topk",
                    f"must be between 1 and num_experts={self.num_experts}, "
                    f"got {self.moe_router_topk}",
                )
            if self.moe_ffn_hidden_size < 1:
                raise SpecError("model.moe_ffn_hidden_size", "must be positive for an MoE model")
            if self.num_dense_layers >= self.num_layers:
                raise SpecError(
                    "model.num_dense_layers",
                    f"{self.num_dense_layers} leaves no MoE layer out of num_layers="
                    f"{self.num_layers}; use fewer dense layers or num_experts: 0",
                )
        else:
            for name in ("moe_router_topk", "num_shared_experts", "num_dense_layers"):
                if getattr(self, name):
                    raise SpecError(
                        f"model.{name}",
                        "only applies to MoE models; set model.num_experts or drop this field",
                    )

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model."""
        return self.num_experts > 0

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a routed MoE block."""
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def gated_linear_unit(self) -> bool:
        """True when the MLP's first linear layer is gated (SwiGLU: three weight matrices
        instead of two; Megatron-Core ``TransformerConfig.gated_linear_unit``)."""
        return self.activation is Activation.SWIGLU

    @property
    def has_dropout(self) -> bool:
        """True when the model trains with hidden and attention dropout.

        Derived from the activation, as the scenario format has no dropout field: GeLU models
        follow GPT-2/GPT-3 and Megatron-LM's GPT defaults (``--hidden-dropout 0.1``,
        ``--attention-dropout 0.1``); Llama-style SwiGLU models (Touvron et al. 2023) and
        Nemotron-4's squared ReLU train without dropout.
        """
        return self.activation is Activation.GELU

    @property
    def has_biases(self) -> bool:
        """True when the linear layers (QKV, output projection, MLP) carry bias vectors.

        Derived from the activation, as the scenario format has no bias field: GeLU models
        follow GPT-2/GPT-3 and Megatron-LM's GPT defaults (``add_bias_linear``: true); Llama-style
        SwiGLU models (Touvron et al. 2023, bias-free dense layers as in PaLM, Chowdhery et al.
        2022) and Nemotron-4 (``--disable-bias-linear``) have none. Only the ZeRO-3 per-tensor
        collective count uses it: parameter counts and FLOPs leave biases out (``O(h)`` per
        layer).
        """
        return self.activation is Activation.GELU

    @property
    def has_rotary_embeddings(self) -> bool:
        """True when attention applies rotary position embeddings (RoPE) to queries and keys.

        Derived from the activation, as the scenario format has no position-embedding field:
        SwiGLU models follow Llama (Touvron et al. 2023; Megatron
        ``--position-embedding-type rope``); GeLU models follow GPT-2/GPT-3's learned absolute
        position embeddings (Megatron's GPT default). Squared-ReLU models are modelled without
        the rotary kernel as well (Nemotron-4 does use RoPE; its rotary traffic is ``O(tok·q)``
        memory-bound work the engine leaves out for them).
        """
        return self.activation is Activation.SWIGLU

    @property
    def query_width(self) -> int:
        """Width of all query heads together, ``num_attention_heads * kv_channels``."""
        return self.num_attention_heads * self.kv_channels

    @property
    def kv_width(self) -> int:
        """Width of all key (or value) heads together, ``num_query_groups * kv_channels``."""
        return self.num_query_groups * self.kv_channels
