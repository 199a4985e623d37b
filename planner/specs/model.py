"""The transformer being trained (Megatron-LM argument names), as a frozen value object."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from planner.errors import SpecError
from planner.specs._checks import require_bool, require_int, require_number


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


class SoftmaxType(StrEnum):
    """The attention softmax (Megatron ``--softmax-type``, Megatron-Core
    ``TransformerConfig.softmax_type``): ``vanilla``; ``off_by_one`` (Megatron's
    ``off-by-one``: a fixed zero logit in each row's denominator) or ``learnable`` (one learnt
    logit per head, the attention sink of GPT-OSS: OpenAI 2025, gpt-oss model card,
    "Architecture"; Megatron-Core ``DotProductAttention.softmax_offset``)."""

    VANILLA = "vanilla"
    OFF_BY_ONE = "off_by_one"
    LEARNABLE = "learnable"


class RopeType(StrEnum):
    """The rotary embedding (Megatron ``--rope-type``): plain ``rope`` (Su et al. 2021) or
    ``yarn`` (Peng et al. 2023, YaRN: frequencies interpolated by band, attention scaled by
    ``mscale``)."""

    ROPE = "rope"
    YARN = "yarn"


MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")
"""Multi-latent attention's latent ranks and head widths (Megatron ``--q-lora-rank`` ...)."""
MOE_FLAG_FIELDS = (
    "moe_grouped_gemm",
    "moe_router_force_load_balancing",
    "moe_router_round_robin",
    "overlap_moe_expert_parallel_comm",
    "moe_expert_bias",
)
"""The MoE cost knobs that are true/false."""


class MoETokenDispatcher(StrEnum):
    """How an MoE layer moves tokens to the ranks of their experts (Megatron
    ``--moe-token-dispatcher-type``); ``code`` is the engine's array code.

    ``alltoall``: ``MoEAlltoAllTokenDispatcher``, every (token, expert) pair sent with NCCL
    all-to-all (a token routed to two experts of one rank travels twice); ``allgather``:
    ``MoEAllGatherTokenDispatcher``, every rank gathers all tokens of the expert-parallel group
    and reduce-scatters the outputs; ``flex``: ``MoEFlexTokenDispatcher`` over DeepEP
    (``--moe-enable-deepep``; DeepSeek-AI 2025, DeepEP), one copy per destination rank inside
    a node and one per destination node over RDMA, forwarded over NVLink there.
    """

    ALLTOALL = "alltoall"
    ALLGATHER = "allgather"
    FLEX = "flex"

    @property
    def code(self) -> int:
        """Array code: 0 alltoall, 1 allgather, 2 flex."""
        return tuple(MoETokenDispatcher).index(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer (GPT/Llama/MoE), field names as in Megatron-LM.

    ``num_query_groups`` is the number of KV heads (GQA/MQA; equal to ``num_attention_heads``
    for multi-head attention). ``kv_channels`` is the per-head width (Megatron ``--kv-channels``;
    ``hidden_size // num_attention_heads`` unless the model says otherwise, as Qwen3 does).
    MoE: ``num_experts`` routed experts of width ``moe_ffn_hidden_size``, ``moe_router_topk`` of
    them active per token, ``num_shared_experts`` always active (together
    ``moe_shared_expert_intermediate_size`` wide when set, Megatron
    ``--moe-shared-expert-intermediate-size``; else ``num_shared_experts · moe_ffn_hidden_size``),
    ``num_dense_layers`` leading dense layers and ``moe_layer_freq`` (Megatron
    ``--moe-layer-freq``: an int ``N``, every ``N``-th layer from the first is MoE, or one 0/1 per
    layer). ``num_experts == 0`` means a dense model.

    MoE cost knobs (Megatron names): ``moe_token_dispatcher_type`` (``MoETokenDispatcher``;
    default ``alltoall``), ``moe_grouped_gemm`` (all local experts in one grouped GEMM instead of
    one GEMM per expert, Megatron's default), ``moe_expert_capacity_factor`` (None: dropless;
    else tokens beyond ``factor x`` an expert's even share are dropped),
    ``moe_pad_expert_input_to_capacity`` (Megatron ``--moe-pad-expert-input-to-capacity``,
    drop-and-pad: every expert's input padded to its capacity, so the per-expert token counts
    are known on the host and no device-to-host read waits for them; needs a capacity factor),
    ``moe_router_force_load_balancing`` (every expert gets its even share: benchmarks' forced or
    fake balanced gates), ``moe_router_round_robin`` (no learned router: the ``t``-th token of a
    microbatch goes to the ``k`` consecutive experts ``k·t ... k·t+k-1 (mod E)``, NeMo
    Automodel's ``FakeBalancedGate``; every expert its even share, and a token's experts sit on
    the fewest ranks and nodes; excludes group-limited routing),
    ``moe_router_num_groups``/``moe_router_group_topk`` (group-limited
    routing: each token's experts from ``group_topk`` of the groups; DeepSeek-V3's
    node-limited routing; 0: unrestricted), ``moe_imbalance_factor`` (tokens on the busiest
    expert rank over the average under dropless routing; None: the efficiency model's
    documented default) and
    ``overlap_moe_expert_parallel_comm`` (the token exchange of one microbatch hides behind
    another's compute, Megatron ``--overlap-moe-expert-parallel-comm``) and
    ``moe_expert_bias`` (the routed experts' up and down projections carry bias vectors, as
    GPT-OSS's do: Hugging Face transformers ``GptOssExperts`` ``gate_up_proj_bias`` /
    ``down_proj_bias``; Megatron-Bridge ``GPTOSSProvider`` ``add_bias_linear``; NeMo Automodel's
    GPT-OSS ``MoEConfig(expert_bias=True)``). ``activation_func_clamp_value`` (Megatron-Core
    ``TransformerConfig.activation_func_clamp_value``; 0: none): the gated activation's inputs
    are clamped to it (the gate from above, the linear half both ways), GPT-OSS's
    ``swiglu_limit`` 7.0.

    Attention: ``multi_latent_attention`` (DeepSeek-V2/V3 MLA, Megatron
    ``--multi-latent-attention``): queries through a ``q_lora_rank`` latent (0: projected from
    the hidden state directly), keys/values through a ``kv_lora_rank`` latent, heads of
    ``qk_head_dim`` plus ``qk_pos_emb_head_dim`` rotary dimensions, values ``v_head_dim`` wide
    (DeepSeek-AI 2024, DeepSeek-V2 §2.1). ``window_size`` (tokens; 0: full causal attention)
    with ``window_attn_skip_freq`` ``N`` (one full-attention layer per ``N``, the others
    sliding-window; 0: all sliding) as Megatron ``--window-size``/``--window-attn-skip-freq``.
    ``softmax_type`` (``SoftmaxType``: an attention sink per head or not), ``rope_type``
    (``RopeType``; read only where the model has rotary embeddings). ``qk_layernorm``
    (Megatron ``--qk-layernorm``): every query and key head is normalised over its
    ``kv_channels`` by a norm of the model's kind (RMSNorm for RMSNorm models) before the
    rotary embedding, as Qwen3's ``q_norm``/``k_norm`` (Hugging Face transformers
    ``models/qwen3/modeling_qwen3.py`` ``Qwen3Attention``; Yang et al. 2025, Qwen3 Technical
    Report §2: "QK-Norm"); under MLA Megatron-Core's flag selects the latent norms, which MLA
    models always carry here, so it adds nothing there.
    ``mtp_num_layers`` multi-token-prediction modules (DeepSeek-V3 §2.2, Megatron-Core
    ``MultiTokenPredictionBlock``). Raises ``SpecError`` naming the ``model.<field>`` at fault.
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
    moe_layer_freq: int | tuple[int, ...] = 1
    moe_shared_expert_intermediate_size: int = 0
    moe_token_dispatcher_type: MoETokenDispatcher = MoETokenDispatcher.ALLTOALL
    moe_grouped_gemm: bool = False
    moe_expert_capacity_factor: float | None = None
    moe_pad_expert_input_to_capacity: bool = False
    moe_router_force_load_balancing: bool = False
    moe_router_round_robin: bool = False
    moe_imbalance_factor: float | None = None
    moe_router_num_groups: int = 0
    moe_router_group_topk: int = 0
    overlap_moe_expert_parallel_comm: bool = False
    moe_expert_bias: bool = False
    activation_func_clamp_value: float = 0.0
    multi_latent_attention: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_head_dim: int = 0
    qk_pos_emb_head_dim: int = 0
    v_head_dim: int = 0
    window_size: int = 0
    window_attn_skip_freq: int = 0
    softmax_type: SoftmaxType = SoftmaxType.VANILLA
    rope_type: RopeType = RopeType.ROPE
    qk_layernorm: bool = False
    mtp_num_layers: int = 0
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
            "moe_shared_expert_intermediate_size",
            "moe_router_num_groups",
            "moe_router_group_topk",
            *MLA_FIELDS,
            "window_size",
            "window_attn_skip_freq",
            "mtp_num_layers",
        ):
            require_int(f"model.{name}", getattr(self, name), minimum=0)
        require_bool("model.untie_embeddings", self.untie_embeddings)
        for name in (*MOE_FLAG_FIELDS, "multi_latent_attention", "qk_layernorm"):
            require_bool(f"model.{name}", getattr(self, name))
        self._check_attention()
        self._check_moe_knobs()
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
            self._check_moe_layer_freq()
        else:
            for name in (
                "moe_router_topk",
                "num_shared_experts",
                "num_dense_layers",
                "moe_shared_expert_intermediate_size",
            ):
                if getattr(self, name):
                    raise SpecError(
                        f"model.{name}",
                        "only applies to MoE models; set model.num_experts or drop this field",
                    )

    def _check_attention(self) -> None:
        """MLA needs its latent and head widths and has no query groups; a window needs a
        positive size."""
        if self.multi_latent_attention:
            for name in ("kv_lora_rank", "qk_head_dim", "v_head_dim"):
                if getattr(self, name) < 1:
                    raise SpecError(
                        f"model.{name}",
                        "must be positive with multi_latent_attention (Megatron defaults: "
                        "kv_lora_rank 32, qk_head_dim 128, v_head_dim 128)",
                    )
            if self.num_query_groups != self.num_attention_heads:
                raise SpecError(
                    "model.num_query_groups",
                    "multi-latent attention has no query groups (Megatron asserts "
                    "not --group-query-attention); drop num_query_groups",
                )
        else:
            for name in MLA_FIELDS:
                if getattr(self, name):
                    raise SpecError(
                        f"model.{name}",
                        "only applies with model.multi_latent_attention: true",
                    )
        if self.window_attn_skip_freq and not self.window_size:
            raise SpecError(
                "model.window_attn_skip_freq",
                "needs model.window_size (the sliding window of the other layers)",
            )

    def _check_moe_layer_freq(self) -> None:
        """``moe_layer_freq``: a positive int, or one 0/1 per layer with at least one MoE
        layer after the leading dense ones."""
        freq = self.moe_layer_freq
        if isinstance(freq, tuple):
            if len(freq) != self.num_layers or any(f not in (0, 1) for f in freq):
                raise SpecError(
                    "model.moe_layer_freq",
                    f"a list needs one 0 (dense) or 1 (MoE) per layer, {self.num_layers} "
                    f"entries; got {len(freq)}",
                )
        else:
            require_int("model.moe_layer_freq", freq)
        if self.num_moe_layers < 1:
            raise SpecError(
                "model.moe_layer_freq",
                "leaves no MoE layer; use num_experts: 0 for a dense model",
            )

    def _check_router_groups(self) -> None:
        """Group-limited routing: ``G`` groups divide the experts, ``g`` of them per token,
        at most ``k`` (Megatron's router asserts the same)."""
        groups, chosen = self.moe_router_num_groups, self.moe_router_group_topk
        if not groups and not chosen:
            return
        if self.moe_router_round_robin:
            raise SpecError(
                "model.moe_router_round_robin",
                "a round-robin gate picks no expert groups: leave moe_router_num_groups and "
                "moe_router_group_topk unset (0) with it",
            )
        if not groups or not chosen:
            raise SpecError(
                "model.moe_router_group_topk" if groups else "model.moe_router_num_groups",
                "group-limited routing needs both moe_router_num_groups and moe_router_group_topk",
            )
        if not self.is_moe or self.num_experts % groups:
            raise SpecError(
                "model.moe_router_num_groups",
                f"{groups} groups must divide model.num_experts={self.num_experts}",
            )
        if not 1 <= chosen <= min(groups, self.moe_router_topk):
            raise SpecError(
                "model.moe_router_group_topk",
                f"must be between 1 and min(moe_router_num_groups, moe_router_topk), got {chosen}",
            )

    def _check_moe_knobs(self) -> None:
        if not isinstance(self.rope_type, RopeType):
            raise SpecError(
                "model.rope_type", f"must be one of {', '.join(RopeType)}, got {self.rope_type!r}"
            )
        if not isinstance(self.softmax_type, SoftmaxType):
            raise SpecError(
                "model.softmax_type",
                f"must be one of {', '.join(SoftmaxType)}, got {self.softmax_type!r}",
            )
        self._check_router_groups()
        if not isinstance(self.moe_token_dispatcher_type, MoETokenDispatcher):
            raise SpecError(
                "model.moe_token_dispatcher_type",
                f"must be one of {', '.join(MoETokenDispatcher)}, "
                f"got {self.moe_token_dispatcher_type!r}",
            )
        if self.moe_expert_capacity_factor is not None:
            require_number("model.moe_expert_capacity_factor", self.moe_expert_capacity_factor)
        elif self.moe_pad_expert_input_to_capacity:
            raise SpecError(
                "model.moe_pad_expert_input_to_capacity",
                "pads each expert's input to its capacity: set model.moe_expert_capacity_factor "
                "too (Megatron-Core needs both)",
            )
        clamp = self.activation_func_clamp_value
        require_number("model.activation_func_clamp_value", clamp, positive=False)
        if clamp < 0:
            raise SpecError(
                "model.activation_func_clamp_value", f"must be 0 (no clamp) or more, got {clamp}"
            )
        if self.moe_imbalance_factor is not None:
            require_number("model.moe_imbalance_factor", self.moe_imbalance_factor)
            if self.moe_imbalance_factor < 1:
                raise SpecError(
                    "model.moe_imbalance_factor",
                    f"is the busiest expert rank's tokens over the average, at least 1; got "
                    f"{self.moe_imbalance_factor}",
                )

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model."""
        return self.num_experts > 0

    @property
    def moe_layer_pattern(self) -> tuple[bool, ...]:
        """Per decoder layer, True when its MLP is a routed MoE block: ``moe_layer_freq``
        (Megatron: layer ``i`` is MoE when ``i % N == 0``, or the 0/1 list) with the first
        ``num_dense_layers`` dense; all False for a dense model."""
        if not self.is_moe:
            return (False,) * self.num_layers
        freq = self.moe_layer_freq
        if isinstance(freq, tuple):
            pattern = [bool(f) for f in freq]
        else:
            pattern = [i % freq == 0 for i in range(self.num_layers)]
        return tuple(p and i >= self.num_dense_layers for i, p in enumerate(pattern))

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a routed MoE block."""
        if not self.is_moe:
            return 0
        if self.moe_layer_freq == 1:
            return self.num_layers - self.num_dense_layers
        return sum(self.moe_layer_pattern)

    @property
    def shared_expert_ffn_hidden_size(self) -> int:
        """Width of the always-active shared experts together: ``moe_shared_expert_intermediate_
        size`` when set, else ``num_shared_experts · moe_ffn_hidden_size`` (0: none)."""
        if self.moe_shared_expert_intermediate_size:
            return self.moe_shared_expert_intermediate_size
        return self.num_shared_experts * self.moe_ffn_hidden_size

    @property
    def num_mtp_moe_layers(self) -> int:
        """MTP modules whose transformer layer is MoE: all of them when the last decoder layer
        is (Megatron-Core builds the MTP layer with the decoder's last layer spec)."""
        if not self.mtp_num_layers or not self.is_moe:
            return 0
        return self.mtp_num_layers if self.moe_layer_pattern[-1] else 0

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
    def has_attention_sink(self) -> bool:
        """True when every attention head's softmax has a sink logit (``softmax_type``
        ``off_by_one`` or ``learnable``)."""
        return self.softmax_type is not SoftmaxType.VANILLA

    @property
    def yarn_rotary(self) -> bool:
        """True when rotary embeddings of ``rope_type`` ``yarn`` rotate the query and key heads
        outside multi-latent attention (MLA rotates its own ``qk_pos_emb_head_dim`` part)."""
        return (
            self.rope_type is RopeType.YARN
            and self.has_rotary_embeddings
            and not self.multi_latent_attention
        )

    @property
    def per_head_qk_norm(self) -> bool:
        """True when a norm over each query and key head's ``kv_channels`` runs between the
        QKV projection and the rotary embedding (``qk_layernorm`` outside MLA)."""
        return self.qk_layernorm and not self.multi_latent_attention

    @property
    def qk_norm_params(self) -> int:
        """Weights of one layer's per-head query and key norms: one ``kv_channels`` scale each,
        shared by every head (``Qwen3Attention.q_norm``/``k_norm``); 0 without them."""
        return 2 * self.kv_channels if self.per_head_qk_norm else 0

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

    # ---- attention widths the engine reads (MLA and GQA alike) ---------------------------------

    @property
    def attention_q_width(self) -> int:
        """Width of all query heads as the attention core sees them: ``query_width``, or with
        MLA ``heads · (qk_head_dim + qk_pos_emb_head_dim)``."""
        if self.multi_latent_attention:
            return self.num_attention_heads * (self.qk_head_dim + self.qk_pos_emb_head_dim)
        return self.query_width

    @property
    def attention_k_width(self) -> int:
        """Width of all key heads: ``kv_width`` (GQA), with MLA the query's width (keys are
        up-projected per head, the rotary part shared)."""
        return self.attention_q_width if self.multi_latent_attention else self.kv_width

    @property
    def attention_v_width(self) -> int:
        """Width of all value heads: ``kv_width``, with MLA ``heads · v_head_dim``."""
        if self.multi_latent_attention:
            return self.num_attention_heads * self.v_head_dim
        return self.kv_width

    @property
    def attention_out_width(self) -> int:
        """Width of the attention core's output (the output projection's input):
        ``query_width``, with MLA ``heads · v_head_dim``."""
        if self.multi_latent_attention:
            return self.num_attention_heads * self.v_head_dim
        return self.query_width

    @property
    def attention_in_width(self) -> int:
        """Output width of the tensor-parallel projection from the hidden state: Q, K and V
        together; with MLA the query projection when there is no query latent, else 0."""
        if not self.multi_latent_attention:
            return self.query_width + 2 * self.kv_width
        return 0 if self.q_lora_rank else self.attention_q_width

    @property
    def attention_down_width(self) -> int:
        """MLA's down projections from the hidden state (replicated on every tensor-parallel
        rank, Megatron ``parallel_mode="duplicated"``): ``q_lora_rank + kv_lora_rank +
        qk_pos_emb_head_dim`` (the shared rotary key); 0 without MLA."""
        if not self.multi_latent_attention:
            return 0
        return self.q_lora_rank + self.kv_lora_rank + self.qk_pos_emb_head_dim

    @property
    def kv_up_width(self) -> int:
        """MLA's key/value up projection output, ``heads · (qk_head_dim + v_head_dim)``."""
        if not self.multi_latent_attention:
            return 0
        return self.num_attention_heads * (self.qk_head_dim + self.v_head_dim)

    @property
    def attention_gemm_params(self) -> int:
        """Weights of one layer's attention GEMMs (no norms, no biases)."""
        h = self.hidden_size
        return (
            h * (self.attention_in_width + self.attention_down_width)
            + self.q_lora_rank * self.attention_q_width
            + self.kv_lora_rank * self.kv_up_width
            + self.attention_out_width * h
        )

    @property
    def attention_replicated_params(self) -> int:
        """Attention weights every tensor-parallel rank holds whole: MLA's down projections
        and latent norms, the per-head query and key norms."""
        return (
            self.hidden_size * self.attention_down_width
            + self.q_lora_rank
            + self.kv_lora_rank
            + self.qk_norm_params
        )

    @property
    def attention_params(self) -> int:
        """All weights of one layer's attention block with its two layer norms (and the
        per-head query and key norms where the model has them)."""
        return (
            self.attention_gemm_params
            + self.q_lora_rank
            + self.kv_lora_rank
            + self.qk_norm_params
            + 2 * self.hidden_size
        )

    @property
    def full_attention_fraction(self) -> float:
        """Share of the layers attending over the whole causal context: 1 without a window,
        ``1 / window_attn_skip_freq`` with one, 0 when every layer slides."""
        if not self.window_size:
            return 1.0
        return 1.0 / self.window_attn_skip_freq if self.window_attn_skip_freq else 0.0

    @property
    def mtp_params(self) -> int:
        """Weights of the MTP modules beyond their transformer layer: the ``2h -> h``
        projection and three norms each (the embedding and output layer are shared)."""
        h = self.hidden_size
        return self.mtp_num_layers * (2 * h * h + 3 * h)
