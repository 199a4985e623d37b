"""torchtitan model flavors -> scenario ``model.*`` fields.

A torchtitan job names its model by ``[model] name`` (a TrainSpec: ``llama3``, ``llama4``,
``deepseek_v3``, ``qwen3``, ``gpt_oss``) and ``flavor`` (a key of that spec's model-args dict,
e.g. ``8B``). ``planner/launch/data/torchtitan.yaml`` holds each family's model-args defaults and
each flavor's args as published in pytorch/torchtitan@238fa99; this module applies the family's
rules (FFN rounding, MoE layer interleave, MLA) to give the shape in scenario-format fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.launch.values import as_int, mapping_of

__all__ = ["family_of", "flavor_fields", "llama4_moe_ffn", "llama_ffn", "model_args_fields"]


def _round_up(value: int, multiple: int) -> int:
    return multiple * ((value + multiple - 1) // multiple)


def llama_ffn(dim: int, multiple_of: int, multiplier: float | None) -> int:
    """torchtitan's dense SwiGLU width: ``int(2 * 4 * dim / 3)``, times ``ffn_dim_multiplier``
    (truncated), rounded up to ``multiple_of`` (llama3/model/model.py FeedForward@238fa99)."""
    hidden = int(2 * (4 * dim) / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return _round_up(hidden, multiple_of)


def llama4_moe_ffn(dim: int, multiple_of: int, multiplier: float | None, denominator: int) -> int:
    """Llama 4 expert width: the dense rule before rounding, divided by ``top_k +
    num_shared_experts`` when ``auto_scale_hidden_dim`` (``denominator`` 1 otherwise), then
    rounded up to ``multiple_of`` (llama4/model/model.py TransformerBlock@238fa99)."""
    hidden = int(2 * (4 * dim) / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return _round_up(int(hidden / denominator), multiple_of)


def _args(family: Mapping[str, object], flavor: str) -> dict[str, object] | None:
    flavors = mapping_of(family.get("flavors"))
    entry = mapping_of(flavors.get(flavor))
    if not entry:
        return None
    same = entry.get("same_as")
    if isinstance(same, str):
        entry = mapping_of(flavors.get(same))
    return {**mapping_of(family.get("defaults")), **entry}


def _moe(args: Mapping[str, object], expert_width: object) -> dict[str, object]:
    return {
        "model.num_experts": args.get("num_experts"),
        "model.moe_router_topk": args.get("top_k"),
        "model.num_shared_experts": args.get("num_shared_experts"),
        "model.moe_ffn_hidden_size": expert_width,
    }


def family_of(data: Mapping[str, object], name: str) -> Mapping[str, object]:
    """The catalog's family of torchtitan model ``name`` (a TrainSpec name or one of its
    aliases); ``{}`` when the catalog does not hold it."""
    families = mapping_of(data.get("families"))
    family = mapping_of(families.get(name))
    if not family:
        for other in families.values():
            aliases = mapping_of(mapping_of(other).get("aliases"))
            if name in aliases:
                family = mapping_of(other)
    return family


def flavor_fields(
    data: Mapping[str, object], name: str, flavor: str
) -> tuple[dict[str, object], str] | str:
    """Scenario ``model.*`` fields of torchtitan model ``name`` flavor ``flavor`` and the
    catalog source to cite; a note (str) when the catalog does not hold it."""
    family = family_of(data, name)
    args = _args(family, flavor) if family else None
    if args is None:
        families = mapping_of(data.get("families"))
        known = ", ".join(
            f"{key}/{flv}"
            for key, fam in families.items()
            for flv in mapping_of(mapping_of(fam).get("flavors"))
        )
        return f"torchtitan: model {name} flavor {flavor} is not in the catalog ({known})"
    source = (
        f"catalog:torchtitan {name}/{flavor} ({data.get('repo', '')}/{family.get('path', '')}"
        f"@{str(data.get('commit', ''))[:7]})"
    )
    return model_args_fields(str(family.get("kind", "")), args), source


def model_args_fields(kind: str, args: Mapping[str, object]) -> dict[str, object]:
    """Scenario ``model.*`` fields of a torchtitan model-args mapping (a flavor's args over its
    family's defaults, or the args a job's log prints, with ``moe_args`` flattened) of family
    ``kind`` (``llama``, ``llama4``, ``deepseek``, ``qwen3``, ``gpt_oss``; another kind gets
    the shape every family shares). Values the args lack are left out."""
    dim = as_int(args.get("dim")) or 0
    heads = as_int(args.get("n_heads")) or 0
    fields: dict[str, object] = {
        "model.num_layers": as_int(args.get("n_layers")) or 0,
        "model.hidden_size": dim,
        "model.num_attention_heads": heads,
        "model.vocab_size": args.get("vocab_size"),
        "model.activation": "swiglu",
    }
    if kind != "deepseek":
        fields["model.num_query_groups"] = args.get("n_kv_heads") or heads
    if kind in {"qwen3", "gpt_oss"}:
        fields["model.kv_channels"] = args.get("head_dim")
    if kind == "llama":
        fields["model.ffn_hidden_size"] = llama_ffn(dim, *_ffn_rule(args))
    elif kind == "llama4":
        fields.update(_llama4(args, dim))
    elif kind == "deepseek":
        fields.update(_deepseek(args))
    elif kind == "qwen3":
        moe = bool(args.get("moe_enabled"))
        fields["model.ffn_hidden_size"] = args.get("moe_inter_dim" if moe else "hidden_dim")
        fields["model.untie_embeddings"] = not args.get("enable_weight_tying")
        if moe:
            fields.update(_moe(args, args.get("moe_inter_dim")))
    elif kind == "gpt_oss":
        fields["model.ffn_hidden_size"] = args.get("moe_inter_dim")
        fields.update(_moe(args, args.get("moe_inter_dim")))
        fields["model.window_size"] = args.get("sliding_window_size")
        fields["model.window_attn_skip_freq"] = 2
    return {key: value for key, value in fields.items() if value is not None}


def _ffn_rule(args: Mapping[str, object]) -> tuple[int, float | None]:
    """``multiple_of`` (default 256) and ``ffn_dim_multiplier`` of the SwiGLU width rule."""
    multiplier = args.get("ffn_dim_multiplier")
    ratio = float(multiplier) if isinstance(multiplier, int | float) else None
    return as_int(args.get("multiple_of")) or 256, ratio


def _llama4(args: Mapping[str, object], dim: int) -> dict[str, object]:
    """Llama 4: the expert width, MoE every ``interleave_moe_layer_step`` layers (the dense
    layers between keep the llama3 width)."""
    multiple, ratio = _ffn_rule(args)
    top_k = as_int(args.get("top_k")) or 1
    shared = as_int(args.get("num_shared_experts")) or 0
    scale = top_k + shared if args.get("auto_scale_hidden_dim") else 1
    expert = llama4_moe_ffn(dim, multiple, ratio, scale)
    step = as_int(args.get("interleave_moe_layer_step")) or 1
    fields: dict[str, object] = {
        "model.ffn_hidden_size": expert if step == 1 else llama_ffn(dim, multiple, ratio),
        **_moe(args, expert),
    }
    if step > 1:
        layers = as_int(args.get("n_layers")) or 0
        fields["model.moe_layer_freq"] = [1 if (i + 1) % step == 0 else 0 for i in range(layers)]
    return fields


def _deepseek(args: Mapping[str, object]) -> dict[str, object]:
    """DeepSeek-V3: dense layers of ``inter_dim`` below ``n_dense_layers``, MoE of
    ``moe_inter_dim`` per expert above, multi-latent attention."""
    fields: dict[str, object] = {
        "model.ffn_hidden_size": args.get("inter_dim"),
        **_moe(args, args.get("moe_inter_dim")),
        "model.num_dense_layers": args.get("n_dense_layers"),
        "model.multi_latent_attention": True,
    }
    for field, key in (
        ("q_lora_rank", "q_lora_rank"),
        ("kv_lora_rank", "kv_lora_rank"),
        ("qk_head_dim", "qk_nope_head_dim"),
        ("qk_pos_emb_head_dim", "qk_rope_head_dim"),
        ("v_head_dim", "v_head_dim"),
    ):
        fields[f"model.{field}"] = args.get(key)
    fields["model.moe_router_num_groups"] = args.get("num_expert_groups")
    fields["model.moe_router_group_topk"] = args.get("num_limited_groups")
    return fields
