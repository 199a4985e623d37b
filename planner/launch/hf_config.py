"""A Hugging Face ``config.json`` read as the scenario format's ``model:`` fields, each with the
config key it came from (so a reader can cite ``config.json:<line>``).

Key names and the defaults of keys a file may leave out follow the ``transformers``
configuration classes (``src/transformers/models/<model_type>/configuration_<model_type>.py``:
``tie_word_embeddings`` False for Llama, Mistral, Mixtral, Qwen2/3 (+MoE), Phi-3, GPT-NeoX,
DeepSeek, gpt-oss and Llama 4, True for GPT-2, Gemma, Starcoder2, Falcon and the
``PretrainedConfig`` base; ``num_key_value_heads`` None = ``num_attention_heads`` for Llama,
Phi-3, OLMo, OLMo-2, OLMoE and Granite (``<family>/configuration_<family>.py@008e574``);
GPT-2 ``n_inner`` None = 4 x ``n_embd``) and, for MPT, llm-foundry's ``MPTConfig``
(``llmfoundry/models/mpt/configuration_mpt.py``: ``expansion_ratio`` 4, tied embeddings).

Families whose classes fill in other values (huggingface/transformers,
``src/transformers/models/``, at the stored commit; ``008e574`` is
``008e574391258935f3ecc3035c882e73bbcac419``). Where a class defaults ``num_key_value_heads``
to a number, a file that leaves the key out has that many KV heads, and an explicit null means
``num_attention_heads``:

* ``mistral/configuration_mistral.py@008e574``: ``num_key_value_heads`` 8, ``sliding_window``
  4096; ``mistral/modular_mistral.py@9db58ab``: ``MistralAttention`` passes the window to every
  layer, and its attention and MLP linears are built without bias whatever the file says.
* ``mixtral/configuration_mixtral.py@008e574``: ``num_key_value_heads`` 8,
  ``num_local_experts`` 8, ``num_experts_per_tok`` 2, ``sliding_window`` None.
* ``qwen2/configuration_qwen2.py@008e574``: ``num_key_value_heads`` 32 (the class's default
  head count); ``qwen2/modeling_qwen2.py@00d4b3d``: ``Qwen2Attention`` biases the query, key
  and value projections always (not the output projection).
* ``qwen3/configuration_qwen3.py@008e574``: ``num_key_value_heads`` 32, ``attention_bias``
  False; ``qwen3/modular_qwen3.py@02e8340`` and ``qwen3_moe/modular_qwen3_moe.py@00eb116``:
  their attention is ``LlamaAttention``'s (query, key, value and output projections biased by
  ``attention_bias``; ``qwen3_moe/configuration_qwen3_moe.py@008e574``: default False).
* ``llama/configuration_llama.py@008e574``: ``attention_bias`` and ``mlp_bias`` False;
  ``llama/modeling_llama.py@5dd4a63``: ``LlamaAttention`` biases q/k/v/o by ``attention_bias``,
  ``LlamaMLP`` gate/up/down by ``mlp_bias``; Granite the same
  (``granite/configuration_granite.py@008e574``; ``granite/modular_granite.py@023633d`` builds
  on Llama's attention and decoder layer).
* ``olmo/configuration_olmo.py@008e574``: ``attention_bias`` False;
  ``olmo/modular_olmo.py@00a98e7``: ``OlmoAttention`` is ``LlamaAttention``'s, ``OlmoMLP``
  unbiased.
* ``qwen2_moe/configuration_qwen2_moe.py@008e574``: ``qkv_bias`` True;
  ``qwen2_moe/modular_qwen2_moe.py@001f85b``: query, key and value biased by it.
* ``gpt_oss/configuration_gpt_oss.py@02b8f42``: ``num_key_value_heads`` 8, ``head_dim`` 64,
  ``num_local_experts`` 128, ``num_experts_per_tok`` 4, ``sliding_window`` 128 with
  ``layer_types`` None = even layers sliding, odd full, ``attention_bias`` True;
  ``gpt_oss/modular_gpt_oss.py@0261a46``: ``GptOssAttention`` biases q/k/v/o by it.
* ``olmoe/configuration_olmoe.py@008e574``: ``num_experts`` 64, ``num_experts_per_tok`` 8.
* ``gpt_neox/configuration_gpt_neox.py@008e574``: ``attention_bias`` True;
  ``gpt_neox/modular_gpt_neox.py@fbc8830``: ``GPTNeoXAttention`` biases ``query_key_value``
  and ``dense`` by it, ``GPTNeoXMLP`` builds both its linears with biases always.
* ``deepseek_v3/configuration_deepseek_v3.py@001f85b``: the DeepSeek-V2 latent ranks below,
  ``n_routed_experts`` 256, ``n_shared_experts`` 1, ``num_experts_per_tok`` 8,
  ``moe_intermediate_size`` 2048, ``first_k_dense_replace`` 3, ``n_group`` 8, ``topk_group``
  4, ``attention_bias`` False; ``deepseek_v3/modular_deepseek_v3.py@000c33f``: every layer from
  ``first_k_dense_replace`` on is MoE (the class has no ``moe_layer_freq``), routing always
  group-limited, ``attention_bias`` on the latent down-projections and the output projection;
  ``DeepseekV3Model`` skips the multi-token-prediction layer's weights, so none is assumed
  (``num_nextn_predict_layers`` is read only where the file gives it). Its
  ``num_key_value_heads`` (128) shapes nothing under latent attention and is not applied.

* ``falcon/configuration_falcon.py@5fd8eda``: ``num_kv_heads`` None = ``num_attention_heads``
  (read only with ``new_decoder_architecture``, default False; else ``multi_query``, default
  True, means one KV head), ``parallel_attn`` True, ``bias`` False, tied embeddings (base).
* ``cohere/configuration_cohere.py@032b32a``: ``tie_word_embeddings`` True,
  ``num_key_value_heads`` None = heads, ``use_qk_norm`` False; ``cohere/modular_cohere.py@7792ab1``
  ``CohereAttention`` normalises each query and key head (``q_norm`` / ``k_norm`` over
  ``(heads, head_dim)``) before the rotary embedding; ``logit_scale`` prices nothing.
* ``phi3/modular_phi3.py@2b6c089``: ``Phi3Attention`` passes ``sliding_window`` to every
  layer. ``phi/modeling_phi.py@0faeaf3``: biased linears, partial rotary (prices nothing).
* ``gemma/configuration_gemma.py@3676fc8``: ``head_dim`` 256, ``num_key_value_heads`` 16;
  ``gemma2/configuration_gemma2.py@19f5346``: ``head_dim`` 256, ``num_key_value_heads`` 4,
  ``sliding_window`` 4096; ``gemma3/configuration_gemma3.py@d98ac17`` (``Gemma3TextConfig``):
  the same and ``sliding_window_pattern`` 6 (``query_pre_attn_scalar`` and the soft-caps
  price nothing).
* ``starcoder2/configuration_starcoder2.py@77efc55``: ``num_key_value_heads`` 2, ``use_bias``
  True, ``sliding_window`` None; ``starcoder2/modeling_starcoder2.py@73faa33`` passes the
  window to every layer's attention.
* ``llama4/configuration_llama4.py@b17cfe4`` (``Llama4TextConfig``): ``num_key_value_heads``
  8, ``head_dim`` 128, ``intermediate_size_mlp`` 16384, ``num_local_experts`` 16,
  ``num_experts_per_tok`` 1, ``moe_layers`` None = every ``interleave_moe_layer_step``-th
  layer (default 1), ``attention_chunk_size`` 8192.
* ``qwen3/configuration_qwen3.py@1f3ae2b``: ``head_dim`` 128;
  ``qwen2_moe/configuration_qwen2_moe.py@765e4fb``: ``num_key_value_heads`` 16, 60 experts,
  top-4, ``moe_intermediate_size`` 1408, ``shared_expert_intermediate_size`` 5632;
  ``qwen3_moe/configuration_qwen3_moe.py@26f4b0f``: ``num_key_value_heads`` 4, 128 experts,
  top-8, ``moe_intermediate_size`` 768.
* ``deepseek_v2/configuration_deepseek_v2.py@43e8548``: ``kv_lora_rank`` 512, ``q_lora_rank``
  1536 (an explicit null: no query latent), ``qk_nope_head_dim`` 128, ``qk_rope_head_dim`` 64,
  ``v_head_dim`` 128: every DeepSeek-V2 attends through latents.
* A family default of ``num_key_value_heads`` belongs to the class's default size; where it
  does not divide the file's query heads the model cannot be built, a ``SpecError`` naming
  the key.
* Parallel attention/MLP blocks, which the scenario cannot say (:func:`hf_config_notes`):
  ``CohereDecoderLayer`` (``cohere/modeling_cohere.py@dbb5a50``) and ``PhiDecoderLayer``
  (``phi/modeling_phi.py@0faeaf3``) always; GPT-NeoX's ``use_parallel_residual``
  (``gpt_neox/configuration_gpt_neox.py@35aa9bd``, default True); Falcon's.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.errors import SpecError

__all__ = ["SUPPORTED_MODEL_TYPES", "config_model_type", "hf_config_fields", "hf_config_notes"]

Found = dict[str, tuple[object, str]]
"""Scenario field -> (value, the config key it was read or derived from)."""

_NON_GATED = frozenset(
    {"gpt2", "gpt_bigcode", "gpt_neox", "mpt", "starcoder2", "falcon", "phi", "nemotron"}
)
"""Families whose MLP has two matrices (up, down); every other family is gated (SwiGLU, or
GeGLU for Gemma: three matrices, the ``swiglu`` shape)."""
_TIED_BY_DEFAULT = frozenset(
    {"gpt2", "gpt_bigcode", "mpt", "gemma", "gemma2", "gemma3", "gemma3_text", "starcoder2"}
    | {"falcon", "cohere", ""}
)
_UNTIED_BY_DEFAULT = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "phi"}
    | {"gpt_neox", "deepseek", "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "llama4"}
    | {"llama4_text", "nemotron", "olmo", "olmo2", "olmoe", "granite"}
)
_PER_HEAD_QK_NORM = frozenset({"qwen3", "qwen3_moe", "gemma3", "gemma3_text"})
"""Families whose attention normalises every query and key head over ``head_dim`` before the
rotary embedding, whatever the config says (``qk_layernorm``): ``transformers``'
``Qwen3Attention``, ``Qwen3MoeAttention`` and ``Gemma3Attention`` build ``q_norm``/``k_norm``
as RMSNorms of ``head_dim``. OLMo-2 and OLMoE normalise the whole query and key projections
instead (``Olmo2Attention``: RMSNorm of ``num_attention_heads·head_dim``), not read as this."""
_GEMMA3_DEFAULTS: dict[str, object] = {
    "head_dim": 256,
    "num_key_value_heads": 4,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}
_LLAMA4_DEFAULTS: dict[str, object] = {
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size_mlp": 16384,
    "num_local_experts": 16,
    "num_experts_per_tok": 1,
    "attention_chunk_size": 8192,
}
_DEEPSEEK_LATENTS: dict[str, object] = {
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
_FAMILY_DEFAULTS: dict[str, dict[str, object]] = {
    "mistral": {"num_key_value_heads": 8, "sliding_window": 4096},
    "mixtral": {"num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2": {"num_key_value_heads": 32},
    "gemma": {"head_dim": 256, "num_key_value_heads": 16},
    "gemma2": {"head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096},
    "gemma3": _GEMMA3_DEFAULTS,
    "gemma3_text": _GEMMA3_DEFAULTS,
    "starcoder2": {"num_key_value_heads": 2},
    "qwen3": {"head_dim": 128, "num_key_value_heads": 32},
    "qwen2_moe": {
        "num_key_value_heads": 16,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
    },
    "qwen3_moe": {
        "num_key_value_heads": 4,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
    },
    "deepseek_v2": _DEEPSEEK_LATENTS,
    "deepseek_v3": {
        **_DEEPSEEK_LATENTS,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048,
        "first_k_dense_replace": 3,
        "n_group": 8,
        "topk_group": 4,
    },
    "olmoe": {"num_experts": 64, "num_experts_per_tok": 8},
    "gpt_oss": {
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "sliding_window": 128,
    },
    "llama4": _LLAMA4_DEFAULTS,
    "llama4_text": _LLAMA4_DEFAULTS,
}
"""Shape keys whose family's configuration class fills in a value other than the Llama
fallback (``num_key_value_heads`` = heads, ``head_dim`` = hidden / heads, no window, dense)
when a config file leaves them out (see the module docstring for the classes read)."""
_SLIDING_EVERY_LAYER = frozenset({"mistral", "mixtral", "starcoder2", "phi3"})
"""Families whose every layer attends through ``sliding_window`` when it is set
(``Starcoder2Attention`` and ``Phi3Attention`` pass ``config.sliding_window`` on every layer,
as Mistral's)."""
SUPPORTED_MODEL_TYPES = _TIED_BY_DEFAULT - {""} | _UNTIED_BY_DEFAULT
"""``model_type`` values read with their own family's keys and defaults."""


class _Keys:
    """Typed access to one config mapping; ``prefix`` (``text_config.``) names nested keys."""

    def __init__(
        self,
        config: Mapping[str, object],
        prefix: str = "",
        defaulted: frozenset[str] = frozenset(),
    ) -> None:
        self.config = config
        self.prefix = prefix
        self.defaulted = defaulted
        """Keys the file leaves out whose value is the family's default."""

    def key(self, name: str) -> str:
        return self.prefix + name

    def present(self, name: str) -> bool:
        return self.config.get(name) is not None

    def first(self, *names: str) -> str | None:
        """The first of ``names`` the file gives, else the first a family default fills."""
        given = [name for name in names if self.present(name)]
        return min(given, key=lambda name: name in self.defaulted, default=None)

    def positive(self, name: str) -> int:
        """The positive integer at ``name``; ``SpecError`` naming the key otherwise."""
        if not self.present(name):
            raise SpecError(self.key(name), "is missing; the model's shape needs it")
        number = self.integer(name)
        if number < 1:
            raise SpecError(self.key(name), f"must be a positive integer, got {number}")
        return number

    def optional(self, name: str, *, minimum: int = 1) -> int | None:
        """The integer at ``name`` (at least ``minimum``), or None when absent or null."""
        if not self.present(name):
            return None
        number = self.integer(name)
        if number < minimum:
            raise SpecError(self.key(name), f"must be an integer >= {minimum}, got {number}")
        return number

    def integer(self, name: str) -> int:
        value = self.config.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise SpecError(self.key(name), f"must be a positive integer, got {value!r}")

    def text(self, name: str) -> str:
        value = self.config.get(name)
        return value.lower() if isinstance(value, str) else ""

    def flag(self, name: str, default: bool) -> bool:
        value = self.config.get(name)
        return value if isinstance(value, bool) else default


def hf_config_fields(config: Mapping[str, object]) -> Found:
    """Scenario ``model:`` fields of a Hugging Face config mapping, each with its config key
    (see :func:`planner.launch.models.model_fields_from_hf_config`). ``SpecError(<key>, ...)``
    when a required key is missing or not a positive integer."""
    keys, model_type = _family_keys(config)
    if model_type in ("gpt2", "gpt_bigcode"):
        found = _gpt2(keys, model_type)
    elif model_type == "mpt":
        found = _mpt(keys)
    else:
        found = _decoder(keys, model_type)
    # A multimodal config may say it at the top level, its text_config, or both (text wins).
    outer = _Keys(config)
    tied = outer.flag("tie_word_embeddings", model_type not in _UNTIED_BY_DEFAULT)
    tied = keys.flag("tie_word_embeddings", tied)
    tie_key = "tie_word_embeddings"
    if keys.present(tie_key) or not outer.present(tie_key):
        tie_key = keys.key(tie_key)
    found["untie_embeddings"] = (not tied, tie_key)
    return found


_SEQUENTIAL = "the scenario format describes sequential attention and MLP blocks"
_NO_BIAS_FIELD = "the scenario format has no field for dense biases, so they are left out"
_BIAS = f"every linear layer carries a bias vector; {_NO_BIAS_FIELD}"
_QKV_BIASES = "the query, key and value projections carry bias vectors"
_ATTENTION_BIASES = "the query, key, value and output projections carry bias vectors"
_LLAMA_BIAS_SWITCHES = (
    ("attention_bias", False, _ATTENTION_BIASES),
    ("mlp_bias", False, "the MLP's gate, up and down projections carry bias vectors"),
)
_ATTENTION_BIAS_SWITCH = (("attention_bias", False, _ATTENTION_BIASES),)
"""``LlamaAttention``'s switch where the family's MLP takes no bias (Qwen3, OLMo)."""
_BIAS_SWITCHES: dict[str, tuple[tuple[str, bool, str], ...]] = {
    "llama": _LLAMA_BIAS_SWITCHES,
    "granite": _LLAMA_BIAS_SWITCHES,
    "qwen3": _ATTENTION_BIAS_SWITCH,
    "qwen3_moe": _ATTENTION_BIAS_SWITCH,
    "olmo": _ATTENTION_BIAS_SWITCH,
    "qwen2_moe": (("qkv_bias", True, _QKV_BIASES),),
    "gpt_oss": (("attention_bias", True, _ATTENTION_BIASES),),
    "gpt_neox": (("attention_bias", True, _ATTENTION_BIASES),),
    "deepseek_v3": (
        (
            "attention_bias",
            False,
            "the latent down-projections and the output projection carry bias vectors",
        ),
    ),
}
"""Per family, the config switches that give its dense linears bias vectors: ``(key, the
class's default, which linears)`` (see the module docstring for the classes read; Mistral's
and Mixtral's attention and MLP take no bias whatever the file says)."""
_ALWAYS_BIASED = {
    "qwen2": _QKV_BIASES,
    "gpt_neox": "the MLP's up and down projections carry bias vectors",
}
"""Families whose classes build these linears with biases whatever the config says."""
_PARALLEL_BLOCK = (
    "attention and MLP read the same normed input and add to one residual (parallel "
    f"block); {_SEQUENTIAL}, so the layer is priced as a sequential one"
)


def hf_config_notes(config: Mapping[str, object]) -> list[str]:
    """What the config's family builds that the scenario's ``model:`` fields cannot say, each
    a line for the launch's notes naming the key: parallel attention/MLP blocks (Falcon
    ``parallel_attn`` / ``new_decoder_architecture``, GPT-NeoX ``use_parallel_residual``, both
    default True; Cohere's ``CohereDecoderLayer`` and Phi-1/2's ``PhiDecoderLayer`` always),
    biased linears (Starcoder2 ``use_bias``, default True; Falcon ``bias``; Phi-1/2's
    ``PhiAttention`` and ``PhiMLP`` always; Qwen2's query/key/value and GPT-NeoX's MLP always;
    the switches of :data:`_BIAS_SWITCHES`: Llama/Granite ``attention_bias`` and ``mlp_bias``,
    Qwen3, OLMo and DeepSeek-V3 ``attention_bias``, all default False, gpt-oss and GPT-NeoX
    ``attention_bias`` and Qwen2-MoE ``qkv_bias``, default True), Llama 4's
    chunked local attention (``attention_chunk_size``, default 8192, on the RoPE layers) and
    OLMo-2's query/key norm over whole projections."""
    keys, model_type = _family_keys(config)
    notes: list[str] = []
    if model_type == "falcon":
        if keys.flag("new_decoder_architecture", False):
            notes.append(f"{keys.key('new_decoder_architecture')}: {_PARALLEL_BLOCK}")
        elif keys.flag("parallel_attn", True):
            notes.append(f"{keys.key('parallel_attn')}: {_PARALLEL_BLOCK}")
        if keys.flag("bias", False):
            notes.append(f"{keys.key('bias')}: {_BIAS}")
    elif model_type == "gpt_neox" and keys.flag("use_parallel_residual", True):
        notes.append(f"{keys.key('use_parallel_residual')}: {_PARALLEL_BLOCK}")
    elif model_type in ("cohere", "phi"):
        notes.append(f"{keys.key('model_type')} {model_type}: {_PARALLEL_BLOCK}")
        if model_type == "phi":
            notes.append(f"{keys.key('model_type')} phi: {_BIAS}")
    elif model_type == "starcoder2" and keys.flag("use_bias", True):
        notes.append(f"{keys.key('use_bias')}: {_BIAS}")
    elif model_type in ("llama4", "llama4_text"):
        chunk = keys.optional("attention_chunk_size")
        if chunk:
            notes.append(
                f"{keys.key('attention_chunk_size')}: the RoPE layers attend within chunks of "
                f"{chunk} tokens; the scenario format has no chunked attention, so they are "
                "priced as full causal attention"
            )
    elif model_type == "olmo2":
        notes.append(
            f"{keys.key('model_type')} olmo2: query and key are normalised over whole "
            "projections (Olmo2Attention), which model.qk_layernorm (per head) does not "
            "describe; left out"
        )
    if model_type in _ALWAYS_BIASED:
        biased = _ALWAYS_BIASED[model_type]
        notes.append(f"{keys.key('model_type')} {model_type}: {biased}; {_NO_BIAS_FIELD}")
    for name, default, linears in _BIAS_SWITCHES.get(model_type, ()):
        if keys.flag(name, default):
            notes.append(f"{keys.key(name)}: {linears}; {_NO_BIAS_FIELD}")
    return notes


def _family_keys(config: Mapping[str, object]) -> tuple[_Keys, str]:
    """The decoder's keys with its family's defaults under them (:data:`_FAMILY_DEFAULTS`;
    a key the file gives, null included, wins), and the ``model_type``."""
    keys = _decoder_keys(config)
    model_type = config_model_type(config)[0]
    defaults = _FAMILY_DEFAULTS.get(model_type)
    if defaults:
        filled = frozenset(name for name in defaults if name not in keys.config)
        keys = _Keys({**defaults, **keys.config}, keys.prefix, filled)
    return keys, model_type


def _decoder_keys(config: Mapping[str, object]) -> _Keys:
    """The decoder's keys: a multimodal config's ``text_config``, else the config itself."""
    text = config.get("text_config")
    return _Keys(text, "text_config.") if isinstance(text, Mapping) else _Keys(config)


def config_model_type(config: Mapping[str, object]) -> tuple[str, str]:
    """``(model_type, the key it was read from)`` of the decoder: the ``text_config``'s when a
    multimodal config has one, else the top level's; ``("", "model_type")`` when neither says."""
    keys = _decoder_keys(config)
    if keys.text("model_type"):
        return keys.text("model_type"), keys.key("model_type")
    return _Keys(config).text("model_type"), "model_type"


def _gpt2(keys: _Keys, model_type: str) -> Found:
    """GPT-2 / GPT-BigCode names: ``n_layer``, ``n_embd``, ``n_head``, ``n_inner`` (None: 4h),
    ``n_positions``; BigCode's ``multi_query`` (default True) means one KV head."""
    hidden = keys.positive("n_embd")
    heads = keys.positive("n_head")
    inner = keys.optional("n_inner")
    found: Found = {
        "num_layers": (keys.positive("n_layer"), keys.key("n_layer")),
        "hidden_size": (hidden, keys.key("n_embd")),
        "num_attention_heads": (heads, keys.key("n_head")),
        "num_query_groups": (heads, keys.key("n_head")),
        "ffn_hidden_size": (
            (inner, keys.key("n_inner")) if inner else (4 * hidden, keys.key("n_embd"))
        ),
        "vocab_size": (keys.positive("vocab_size"), keys.key("vocab_size")),
        "activation": ("gelu", keys.key("activation_function")),
    }
    if model_type == "gpt_bigcode" and keys.flag("multi_query", True):
        found["num_query_groups"] = (1, keys.key("multi_query"))
    _sequence(keys, found, "n_positions")
    return found


def _mpt(keys: _Keys) -> Found:
    """MPT names: ``n_layers``, ``d_model``, ``n_heads``, ``expansion_ratio`` (default 4),
    ``max_seq_len``; ``attn_config.kv_n_heads`` for grouped-query attention and
    ``ffn_config.ffn_type`` ``mptglu`` for a gated MLP."""
    hidden = keys.positive("d_model")
    heads = keys.positive("n_heads")
    ratio = keys.config.get("expansion_ratio", 4)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or ratio <= 0:
        raise SpecError(keys.key("expansion_ratio"), f"must be a positive number, got {ratio!r}")
    found: Found = {
        "num_layers": (keys.positive("n_layers"), keys.key("n_layers")),
        "hidden_size": (hidden, keys.key("d_model")),
        "num_attention_heads": (heads, keys.key("n_heads")),
        "num_query_groups": (heads, keys.key("n_heads")),
        "ffn_hidden_size": (round(hidden * ratio), keys.key("expansion_ratio")),
        "vocab_size": (keys.positive("vocab_size"), keys.key("vocab_size")),
        "activation": ("gelu", keys.key("ffn_config")),
    }
    attn = keys.config.get("attn_config")
    if isinstance(attn, Mapping):
        inner = _Keys(attn, keys.key("attn_config."))
        if inner.text("attn_type") == "grouped_query_attention" and inner.present("kv_n_heads"):
            found["num_query_groups"] = (inner.positive("kv_n_heads"), inner.key("kv_n_heads"))
        elif inner.text("attn_type") == "multiquery_attention":
            found["num_query_groups"] = (1, inner.key("attn_type"))
    ffn = keys.config.get("ffn_config")
    if isinstance(ffn, Mapping):
        inner = _Keys(ffn, keys.key("ffn_config."))
        if inner.text("ffn_type") == "mptglu":
            found["activation"] = ("swiglu", inner.key("ffn_type"))
        if inner.present("ffn_hidden_size"):
            width = inner.positive("ffn_hidden_size")
            found["ffn_hidden_size"] = (width, inner.key("ffn_hidden_size"))
    _sequence(keys, found, "max_seq_len")
    return found


def _decoder(keys: _Keys, model_type: str) -> Found:
    """The Llama key names most families share (``num_hidden_layers``, ``hidden_size``,
    ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``intermediate_size``,
    ``vocab_size``, ``max_position_embeddings``), then each family's MoE, MLA and window keys."""
    hidden = keys.positive("hidden_size")
    heads = keys.positive("num_attention_heads")
    layers = keys.positive("num_hidden_layers")
    found: Found = {
        "num_layers": (layers, keys.key("num_hidden_layers")),
        "hidden_size": (hidden, keys.key("hidden_size")),
        "num_attention_heads": (heads, keys.key("num_attention_heads")),
        "vocab_size": (keys.positive("vocab_size"), keys.key("vocab_size")),
        "activation": _activation(keys, model_type),
    }
    if model_type == "falcon":
        _falcon(keys, found, hidden, heads)
    else:
        kv_key = keys.first("num_key_value_heads") or "num_attention_heads"
        groups = keys.positive(kv_key)
        if heads % groups:
            said = (
                f"is missing, and its {model_type} default {groups}"
                if kv_key in keys.defaulted
                else f"({groups})"
            )
            raise SpecError(
                keys.key(kv_key), f"{said} does not divide num_attention_heads ({heads})"
            )
        found["num_query_groups"] = (groups, keys.key(kv_key))
        width = keys.positive("intermediate_size")
        found["ffn_hidden_size"] = (width, keys.key("intermediate_size"))
    head_dim = keys.optional("head_dim")
    if head_dim is not None and (hidden % heads or hidden // heads != head_dim):
        found["kv_channels"] = (head_dim, keys.key("head_dim"))
    _sequence(keys, found, "max_position_embeddings")
    _moe(keys, found, model_type, layers)
    if keys.present("kv_lora_rank"):
        _latent_attention(keys, found)
    _window(keys, found, model_type)
    if model_type in _PER_HEAD_QK_NORM:
        found["qk_layernorm"] = (True, keys.key("model_type"))
    elif model_type == "cohere" and keys.flag("use_qk_norm", False):
        found["qk_layernorm"] = (True, keys.key("use_qk_norm"))
    if model_type == "gpt_oss":
        _gpt_oss(keys, found)
    return found


def _gpt_oss(keys: _Keys, found: Found) -> None:
    """gpt-oss's layers as ``transformers``' ``modeling_gpt_oss.py`` builds them whatever the
    config says: ``GptOssExperts`` with ``gate_up_proj_bias`` / ``down_proj_bias``
    (``moe_expert_bias``), ``GptOssAttention`` with one learnt sink per head (``softmax_type``
    ``learnable``); the gate and linear halves clamped to ``swiglu_limit`` (``GptOssConfig``
    default 7.0); YaRN rotary scaling when ``rope_scaling`` says ``rope_type: yarn``."""
    model_type = keys.key("model_type")
    found["moe_expert_bias"] = (True, model_type)
    found["softmax_type"] = ("learnable", model_type)
    limit = keys.config.get("swiglu_limit")
    if isinstance(limit, int | float) and not isinstance(limit, bool):
        found["activation_func_clamp_value"] = (float(limit), keys.key("swiglu_limit"))
    else:
        found["activation_func_clamp_value"] = (7.0, model_type)
    scaling = keys.config.get("rope_scaling")
    if isinstance(scaling, Mapping) and str(scaling.get("rope_type", "")).lower() == "yarn":
        found["rope_type"] = ("yarn", keys.key("rope_scaling"))


def _falcon(keys: _Keys, found: Found, hidden: int, heads: int) -> None:
    """Falcon: with ``new_decoder_architecture``, ``num_kv_heads`` KV heads (``FalconConfig``:
    ``num_attention_heads`` when absent), else one KV head when ``multi_query`` (default True);
    ``ffn_hidden_size`` (None: 4h)."""
    if keys.flag("new_decoder_architecture", False):
        kv_key = keys.first("num_kv_heads") or "num_attention_heads"
        found["num_query_groups"] = (keys.positive(kv_key), keys.key(kv_key))
    elif keys.flag("multi_query", True):
        found["num_query_groups"] = (1, keys.key("multi_query"))
    else:
        found["num_query_groups"] = (heads, keys.key("num_attention_heads"))
    width = keys.optional("ffn_hidden_size")
    found["ffn_hidden_size"] = (
        (width, keys.key("ffn_hidden_size")) if width else (4 * hidden, keys.key("hidden_size"))
    )


def _activation(keys: _Keys, model_type: str) -> tuple[object, str]:
    name = keys.first("hidden_act", "hidden_activation", "activation") or "hidden_act"
    if model_type not in _NON_GATED:
        return "swiglu", keys.key(name)
    if keys.text(name) in ("relu2", "squared_relu"):
        return "squared_relu", keys.key(name)
    return "gelu", keys.key(name)


def _sequence(keys: _Keys, found: Found, name: str) -> None:
    length = keys.optional(name)
    if length is not None:
        found["seq_length"] = (length, keys.key(name))


def _moe(keys: _Keys, found: Found, model_type: str, layers: int) -> None:
    """Experts (``num_local_experts`` | ``num_experts`` | ``n_routed_experts``), top-k
    (``num_experts_per_tok`` | ``experts_per_token``), expert width (``moe_intermediate_size``,
    else ``intermediate_size``), shared experts and which layers are MoE (as
    ``moe_layer_freq``: one 0/1 per layer, where not every layer is)."""
    experts_key = keys.first("num_local_experts", "num_experts", "n_routed_experts")
    experts = keys.optional(experts_key, minimum=0) if experts_key else None
    if not experts_key or not experts:
        return
    found["num_experts"] = (experts, keys.key(experts_key))
    topk_key = keys.first("num_experts_per_tok", "experts_per_token") or "num_experts_per_tok"
    found["moe_router_topk"] = (keys.positive(topk_key), keys.key(topk_key))
    width_key = keys.first("moe_intermediate_size") or "intermediate_size"
    found["moe_ffn_hidden_size"] = (keys.positive(width_key), keys.key(width_key))
    pattern: list[int] | None = None
    if model_type in ("qwen2_moe", "qwen3_moe"):
        pattern = _qwen_moe(keys, found, layers)
    elif model_type == "llama4_text":
        pattern = _llama4_moe(keys, found, layers)
    else:
        pattern = _deepseek_moe(keys, found, layers)
    if pattern is not None:
        found["moe_layer_freq"] = (pattern, keys.key("moe_layer_freq"))


def _deepseek_moe(keys: _Keys, found: Found, layers: int) -> list[int] | None:
    """DeepSeek: ``n_shared_experts``, ``first_k_dense_replace`` leading dense layers, then
    every ``moe_layer_freq``-th layer MoE (HF ``DeepseekV3DecoderLayer``)."""
    if keys.present("n_shared_experts"):
        shared = keys.optional("n_shared_experts", minimum=0)
        found["num_shared_experts"] = (shared, keys.key("n_shared_experts"))
    if not keys.present("first_k_dense_replace"):
        return None
    dense = keys.optional("first_k_dense_replace", minimum=0)
    found["num_dense_layers"] = (dense, keys.key("first_k_dense_replace"))
    freq = keys.optional("moe_layer_freq") or 1
    return [int(i % freq == 0) for i in range(layers)] if freq > 1 else None


def _qwen_moe(keys: _Keys, found: Found, layers: int) -> list[int] | None:
    """Qwen MoE: layer ``i`` is MoE unless listed in ``mlp_only_layers`` and when
    ``(i + 1) % decoder_sparse_step == 0``; Qwen2-MoE's one shared expert is
    ``shared_expert_intermediate_size`` wide."""
    shared_width = keys.optional("shared_expert_intermediate_size", minimum=0)
    if shared_width:
        key = keys.key("shared_expert_intermediate_size")
        found["num_shared_experts"] = (1, key)
        found["moe_shared_expert_intermediate_size"] = (shared_width, key)
    step = keys.optional("decoder_sparse_step") or 1
    listed = keys.config.get("mlp_only_layers")
    dense = {i for i in listed if isinstance(i, int)} if isinstance(listed, list) else set()
    if step == 1 and not dense:
        return None
    return [int(i not in dense and (i + 1) % step == 0) for i in range(layers)]


def _llama4_moe(keys: _Keys, found: Found, layers: int) -> list[int] | None:
    """Llama 4: one shared expert as wide as the routed ones; the layers listed in
    ``moe_layers`` MoE (``Llama4TextConfig``: when absent, every
    ``interleave_moe_layer_step``-th layer), the others dense ``intermediate_size_mlp`` wide
    (then ``ffn_hidden_size`` is that dense width)."""
    found["num_shared_experts"] = (1, keys.key("num_local_experts"))
    listed = keys.config.get("moe_layers")
    if isinstance(listed, list):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in listed):
            raise SpecError(keys.key("moe_layers"), f"must list layer numbers, got {listed!r}")
        pattern = [int(i in listed) for i in range(layers)]
    else:
        step = keys.optional("interleave_moe_layer_step") or 1
        pattern = [int((i + 1) % step == 0) for i in range(layers)]
    if all(pattern):
        return None
    width = keys.positive("intermediate_size_mlp")
    found["ffn_hidden_size"] = (width, keys.key("intermediate_size_mlp"))
    return pattern


def _latent_attention(keys: _Keys, found: Found) -> None:
    """DeepSeek multi-latent attention: latent ranks and head widths; no query groups. Also the
    router's groups (``n_group``, ``topk_group``) and multi-token prediction layers."""
    found.pop("num_query_groups", None)
    found.pop("kv_channels", None)
    found["multi_latent_attention"] = (True, keys.key("kv_lora_rank"))
    for field, name in (
        ("q_lora_rank", "q_lora_rank"),
        ("kv_lora_rank", "kv_lora_rank"),
        ("qk_head_dim", "qk_nope_head_dim"),
        ("qk_pos_emb_head_dim", "qk_rope_head_dim"),
        ("v_head_dim", "v_head_dim"),
    ):
        value = keys.optional(name)
        if value is not None:
            found[field] = (value, keys.key(name))
    groups = keys.optional("n_group")
    if groups is not None and groups > 1 and "num_experts" in found:
        found["moe_router_num_groups"] = (groups, keys.key("n_group"))
        found["moe_router_group_topk"] = (keys.positive("topk_group"), keys.key("topk_group"))
    mtp = keys.optional("num_nextn_predict_layers", minimum=0)
    if mtp:
        found["mtp_num_layers"] = (mtp, keys.key("num_nextn_predict_layers"))


def _window(keys: _Keys, found: Found, model_type: str) -> None:
    """Sliding-window attention: ``window_size`` = ``sliding_window``; which layers keep full
    attention from ``layer_types`` (one full layer every N: ``window_attn_skip_freq`` N),
    Gemma 3's ``sliding_window_pattern``, Gemma 2's and gpt-oss's alternation (their classes'
    default ``layer_types``: even layers sliding), or none (Mistral, Mixtral, Starcoder2: all
    layers sliding). Qwen's ``use_sliding_window: false`` and a null window
    mean none."""
    window = keys.optional("sliding_window", minimum=0)
    if not window or not keys.flag("use_sliding_window", True):
        return
    key = keys.key("sliding_window")
    types = keys.config.get("layer_types")
    if isinstance(types, list) and types:
        full = [i for i, kind in enumerate(types) if kind != "sliding_attention"]
        if len(full) == len(types):
            return
        every = full[0] + 1 if full else 0
        if every and full != list(range(every - 1, len(types), every)):
            return  # an irregular pattern has no Megatron window setting
        found["window_size"] = (window, key)
        found["window_attn_skip_freq"] = (every, keys.key("layer_types"))
    elif model_type in ("gemma2", "gpt_oss"):
        found["window_size"] = (window, key)
        found["window_attn_skip_freq"] = (2, keys.key("model_type"))
    elif keys.present("sliding_window_pattern"):
        every = keys.positive("sliding_window_pattern")
        found["window_size"] = (window, key)
        found["window_attn_skip_freq"] = (every, keys.key("sliding_window_pattern"))
    elif model_type in _SLIDING_EVERY_LAYER:
        found["window_size"] = (window, key)
        found["window_attn_skip_freq"] = (0, key)
