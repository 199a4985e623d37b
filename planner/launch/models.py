"""Models named by a launch: a Hugging Face id (``meta-llama/Llama-3.1-8B``), a catalog preset
key (``llama3-8b``) or a local directory holding a ``config.json``, turned into the scenario
format's ``model.*`` facts, each with its source.

A local directory wins over a catalog name (as ``from_pretrained`` reads a local directory
before asking the Hub); names are resolved through the catalog's presets and the Hugging Face
ids they answer to (``planner/catalog/models.yaml``). Nothing is downloaded: a name the catalog
does not know is reported with how to help (a local ``config.json`` or a scenario).
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Callable, Mapping

from planner.catalog import (
    model_preset,
    model_preset_hf_ids,
    model_preset_hf_model_type,
    model_preset_key_for_name,
    model_preset_keys,
)
from planner.errors import SpecError
from planner.launch.configs import load_config
from planner.launch.hf_config import config_model_type, hf_config_fields, hf_config_notes
from planner.launch.types import Facts, LaunchFiles, resolve_path

__all__ = ["model_fields_from_hf_config", "resolve_model"]

_HF_SCHEME = "hf://"
_HF_CACHE_DIR = re.compile(r"^models--([^/]+?)--([^/]+)$")


def model_fields_from_hf_config(config: Mapping[str, object]) -> dict[str, object]:
    """Scenario-format ``model:`` fields of a Hugging Face ``config.json`` mapping.

    Reads the decoder's shape (``num_layers``, ``hidden_size``, ``num_attention_heads``,
    ``num_query_groups`` (KV heads; heads for MHA; absent for multi-latent attention),
    ``kv_channels`` (when the head width is not hidden/heads), ``ffn_hidden_size``,
    ``vocab_size`` (the embedding rows), ``seq_length`` (``max_position_embeddings``: the
    model's context, not a training length), ``activation``, ``untie_embeddings``), the MoE
    fields (``num_experts``, ``moe_router_topk``, ``moe_ffn_hidden_size``,
    ``num_shared_experts``, ``num_dense_layers``, ``moe_layer_freq``), multi-latent attention
    ranks and sliding windows, for the families of
    :data:`planner.launch.hf_config.SUPPORTED_MODEL_TYPES` (a multimodal config's
    ``text_config`` is read for its decoder). Unknown ``model_type`` values are read with the
    Llama key names.

    Raises ``SpecError(<config key>, ...)`` when a required key is missing or is not a positive
    integer.
    """
    return {name: value for name, (value, _key) in hf_config_fields(config).items()}


def resolve_model(
    reference: str, *, facts: Facts, files: LaunchFiles, cwd: str | None, source: str
) -> bool:
    """Fill ``model.*`` plus ``launch.model_name`` / ``launch.hf_id`` for the model a launch
    names, and return True; return False with a note when the name is unknown.

    ``reference`` is, in order of precedence:

    1. a local directory holding ``config.json`` (relative to ``cwd`` or absolute, read through
       ``files``): the values of that file, each sourced ``<reference>/config.json:<line>``;
    2. a Hugging Face id (case-insensitive; ``hf://`` prefix allowed), a catalog preset key, or
       a path whose last components name one preset unambiguously (``/models/Qwen3-8B``,
       ``/ckpt/meta-llama/Llama-3.1-8B``, a Hub cache ``models--Qwen--Qwen3-8B`` directory):
       the preset's values, sourced ``catalog:<key> (<hf id>)``.

    The ``model_type`` of the model's ``config.json`` (the file's, or the catalog's
    ``hf_model_type``) goes to ``launch.hf_model_type`` when known: it names the
    ``transformers`` model code (:mod:`planner.launch.model_code`).

    The model's own length (its context or pretraining sequence) goes to
    ``launch.model_seq_length``, not ``model.seq_length``: it is not the training sequence.
    Readers set that (from the config or the framework's default); :func:`finish
    <planner.launch.describe.finish>` assumes the model's length only when nothing else gave
    one. Every other field is set with ``facts.set``, so a reader applies its own model
    settings after this call. ``source`` is where the reference came from (``train.yaml:3``),
    used for ``launch.*`` and in notes.

    Raises ``SpecError`` naming the file and key when a local ``config.json`` is not valid JSON
    or lacks a required shape value, and ``SourceError`` when ``files`` refuses it. Never
    downloads anything.
    """
    written = reference.strip()
    if not written:
        facts.note(f"{source}: the model name is empty; name a model or give a scenario")
        return False
    hub = written.lower().startswith(_HF_SCHEME)
    if not hub and _resolve_local(written, facts=facts, files=files, cwd=cwd):
        facts.set("launch.model_name", written, source)
        return True
    name = (written[len(_HF_SCHEME) :] if hub else written).rstrip("/")
    found = _preset_for_name(name)
    if found is None:
        facts.note(
            f"model {written!r} ({source}) is not in the catalog and no config.json was found "
            f"for it; {_did_you_mean(name)}point the launch at a local directory holding the "
            "model's config.json, or describe the job with a scenario (model.preset or the "
            "model: fields)"
        )
        return False
    key, hf_id, how = found
    cited = f"catalog:{key} ({hf_id})" if hf_id else f"catalog:{key}"
    _apply(model_preset(key), facts, lambda _field: cited)
    facts.set("launch.model_name", written, source)
    if hf_id:
        facts.set("launch.hf_id", hf_id, source)
    facts.set("launch.hf_model_type", model_preset_hf_model_type(key) or None, cited)
    if how:
        facts.note(f"model {written!r} ({source}) read as {how}: catalog preset {key!r}")
    return True


def _apply(fields: Mapping[str, object], facts: Facts, cite: Callable[[str], str]) -> None:
    """Set each ``model.<field>``; ``num_query_groups`` = heads for MHA (not for MLA);
    ``seq_length`` as ``launch.model_seq_length`` (the model's length, not the training's)."""
    for field, value in fields.items():
        if field == "seq_length":
            facts.set("launch.model_seq_length", value, cite(field))
        else:
            facts.set(f"model.{field}", value, cite(field))
    if "num_query_groups" not in fields and fields.get("multi_latent_attention") is not True:
        heads = fields.get("num_attention_heads")
        facts.set("model.num_query_groups", heads, cite("num_attention_heads"))


def _resolve_local(reference: str, *, facts: Facts, files: LaunchFiles, cwd: str | None) -> bool:
    """Read ``<reference>/config.json`` (or ``reference`` itself when it names a ``.json``
    file) when it exists; False when there is none."""
    target = resolve_path(reference, cwd)
    if not posixpath.isabs(target):
        return False
    if target.endswith(".json"):
        path, cited = target, reference
    else:
        path, cited = posixpath.join(target, "config.json"), f"{reference.rstrip('/')}/config.json"
    if not files.exists(path):
        return False
    tree = load_config(files.read_text(path), cited, "json")
    try:
        found = hf_config_fields(tree.data)
    except SpecError as exc:
        raise SpecError(
            cited,
            f"{exc.field}: {exc.message}; fix the file, or name the model by a catalog id",
        ) from None
    keys = {field: key for field, (_value, key) in found.items()}

    def cite(field: str) -> str:
        line = tree.lines.get(keys.get(field, ""))
        return f"{cited}:{line}" if line else cited

    _apply({field: value for field, (value, _key) in found.items()}, facts, cite)
    model_type, type_key = config_model_type(tree.data)
    keys["hf_model_type"] = type_key
    facts.set("launch.hf_model_type", model_type or None, cite("hf_model_type"))
    for note in hf_config_notes(tree.data):
        facts.note(f"{cited}: {note}")
    return True


def _preset_for_name(name: str) -> tuple[str, str, str] | None:
    """``(preset key, hf id as the catalog spells it, how it was matched)`` for a name, or
    None. ``how`` is empty for an exact id or key, else says which part of a path matched."""
    key = model_preset_key_for_name(name)
    if key is not None:
        return key, _spelled_id(key, name), ""
    parts = [part for part in name.split("/") if part and part != "."]
    if not parts:
        return None
    for part in reversed(parts):  # .../models--Qwen--Qwen3-8B/snapshots/<revision>
        cache = _HF_CACHE_DIR.match(part)
        if cache:
            candidate = f"{cache.group(1)}/{cache.group(2)}"
            key = model_preset_key_for_name(candidate)
            if key is not None:
                return key, _spelled_id(key, candidate), f"a Hugging Face cache entry ({part})"
    if len(parts) >= 2:
        candidate = "/".join(parts[-2:])
        key = model_preset_key_for_name(candidate)
        if key is not None:
            return key, _spelled_id(key, candidate), f"the id in its path ({candidate})"
    matches = _presets_by_last_component(parts[-1])
    if len(matches) == 1:
        key, hf_id = next(iter(matches.items()))
        return key, hf_id, f"its last component ({parts[-1]}, the name of {hf_id})"
    return None


def _did_you_mean(name: str) -> str:
    """``did you mean 'x'? `` for the closest catalog name, or empty."""
    names = {
        known.lower(): known
        for key in model_preset_keys()
        for known in (key, *model_preset_hf_ids(key))
    }
    close = difflib.get_close_matches(name.lower(), list(names), n=1, cutoff=0.8)
    return f"did you mean {names[close[0]]!r}? " if close else ""


def _spelled_id(key: str, name: str) -> str:
    """The catalog's spelling of ``name`` among the preset's ids, else its first id."""
    ids = model_preset_hf_ids(key)
    for hf_id in ids:
        if hf_id.lower() == name.strip().lower():
            return hf_id
    return ids[0] if ids else ""


def _presets_by_last_component(component: str) -> dict[str, str]:
    """Presets with an id whose name part (after the organisation) is ``component``,
    case-insensitively: preset key -> that id."""
    wanted = component.lower()
    matches: dict[str, str] = {}
    for key in model_preset_keys():
        for hf_id in model_preset_hf_ids(key):
            if hf_id.rsplit("/", 1)[-1].lower() == wanted:
                matches.setdefault(key, hf_id)
    return matches
