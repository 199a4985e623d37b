"""GPU SKUs and model presets shipped as package data, each value with its public source.

``gpus.yaml`` stores human units (TFLOP/s, GiB, GB/s, Gbit/s, us); this loader is the
only place that converts them to SI (FLOP/s, bytes, bytes/s, s). ``models.yaml`` stores
presets in the scenario format's ``model:`` fields. Both files are read once per process
(package data, no other I/O).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType

import yaml

from planner.errors import SpecError
from planner.specs.hardware import GpuSpec, Precision

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it (10x faster on package data), else
PyYAML's own: the same documents either way."""

__all__ = [
    "get_gpu",
    "gpu_catalog",
    "gpu_key_for_gres_type",
    "model_preset",
    "model_preset_hf_ids",
    "model_preset_hf_model_type",
    "model_preset_key_for_name",
    "model_preset_keys",
    "model_preset_source",
]

_TERA = 1e12
_GIGA = 1e9
_GIBI = float(2**30)
_MICRO = 1e-6

_GPU_VALUE_FIELDS = (
    "dense_peak_tflop_per_s",
    "hbm_gib",
    "hbm_bandwidth_gb_per_s",
    "scale_up_bandwidth_gb_per_s",
    "nvlink_domain_size",
    "gpus_per_node",
    "scale_out_gbit_per_s",
    "architecture",
    "num_sms",
    "scale_up_latency_us",
    "scale_out_latency_us",
)


def _read_yaml(filename: str) -> dict[str, object]:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    data = yaml.load(text, Loader=_SAFE_LOADER)
    if not isinstance(data, dict):
        raise SpecError(f"catalog/{filename}", "must be a mapping of keys to entries")
    return data


def _gpu_entries() -> dict[str, Mapping[str, object]]:
    """The entries of ``gpus.yaml`` by key; ``SpecError`` naming an entry that is not a
    mapping of fields."""
    entries: dict[str, Mapping[str, object]] = {}
    for key, entry in _read_yaml("gpus.yaml").items():
        if not isinstance(entry, Mapping):
            raise SpecError(f"catalog/gpus.yaml:{key}", "must be a mapping of fields")
        entries[key] = entry
    return entries


def _number(key: str, field: str, value: object) -> float:
    """``value`` of ``field`` of GPU ``key`` as a float; ``SpecError`` when not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"catalog/gpus.yaml:{key}", f"{field} must be a number, got {value!r}")
    return float(value)


def _mapping(key: str, field: str, value: object) -> Mapping[object, object]:
    """``value`` of ``field`` of GPU ``key``; ``SpecError`` when not a mapping."""
    if not isinstance(value, Mapping):
        raise SpecError(f"catalog/gpus.yaml:{key}", f"{field} must be a mapping")
    return value


def _optional(
    key: str,
    entry: Mapping[str, object],
    sources: Mapping[object, object],
    field: str,
    unit: float,
) -> float | None:
    """Optional ``field`` of GPU ``key`` times ``unit`` (to SI), None where the entry leaves it
    out; ``SpecError`` when it is given without a source."""
    if field not in entry:
        return None
    if field not in sources:
        raise SpecError(f"catalog/gpus.yaml:{key}", f"missing source for ['{field}']")
    return _number(key, field, entry[field]) * unit


def _gpu_from_entry(key: str, entry: Mapping[str, object]) -> GpuSpec:
    sources = _mapping(key, "sources", entry.get("sources", {}))
    missing = [f for f in _GPU_VALUE_FIELDS if f not in entry or f not in sources]
    if missing:
        raise SpecError(f"catalog/gpus.yaml:{key}", f"missing value or source for {missing}")

    def number(field: str) -> float:
        return _number(key, field, entry[field])

    peaks = tuple(
        (Precision(str(p)), _number(key, f"dense_peak_tflop_per_s.{p}", tflops) * _TERA)
        for p, tflops in _mapping(
            key, "dense_peak_tflop_per_s", entry["dense_peak_tflop_per_s"]
        ).items()
    )
    return GpuSpec(
        key=key,
        name=str(entry["name"]),
        dense_peak_flop_per_s=peaks,
        hbm_bytes=number("hbm_gib") * _GIBI,
        hbm_bandwidth_bytes_per_s=number("hbm_bandwidth_gb_per_s") * _GIGA,
        scale_up_bandwidth_bytes_per_s=number("scale_up_bandwidth_gb_per_s") * _GIGA,
        nvlink_domain_size=int(number("nvlink_domain_size")),
        gpus_per_node=int(number("gpus_per_node")),
        scale_out_bandwidth_bytes_per_s=number("scale_out_gbit_per_s") * _GIGA / 8.0,
        architecture=str(entry["architecture"]),
        num_sms=int(number("num_sms")),
        scale_up_latency_s=number("scale_up_latency_us") * _MICRO,
        scale_out_latency_s=number("scale_out_latency_us") * _MICRO,
        host_link_bandwidth_bytes_per_s=_optional(
            key, entry, sources, "host_link_bandwidth_gb_per_s", _GIGA
        ),
        sfu_exp2_per_s=_optional(key, entry, sources, "sfu_exp2_tera_per_s", _TERA),
        sources=tuple((str(k), str(v)) for k, v in sources.items()),
    )


@cache
def gpu_catalog() -> Mapping[str, GpuSpec]:
    """All catalog GPUs by key (e.g. ``"h100-sxm"``), values in SI units; read-only mapping."""
    return MappingProxyType(
        {key: _gpu_from_entry(key, entry) for key, entry in _gpu_entries().items()}
    )


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}? " if close else ""


def _normalized_gpu_name(name: str) -> str:
    """Lower case, spaces and ``_`` as ``-`` (``"H100 SXM5"`` -> ``"h100-sxm5"``)."""
    return re.sub(r"[\s_-]+", "-", name.strip().lower()).strip("-")


@cache
def _gpu_names() -> Mapping[str, str]:
    """Every name a catalog GPU answers to (its key and its ``aliases``) -> its key."""
    names: dict[str, str] = {}
    for key, entry in _gpu_entries().items():
        aliases = entry.get("aliases") or []
        if not isinstance(aliases, list):
            raise SpecError(f"catalog/gpus.yaml:{key}", "'aliases' must be a list of names")
        for name in (key, *aliases):
            normalized = _normalized_gpu_name(str(name))
            if names.setdefault(normalized, key) != key:
                raise SpecError(
                    f"catalog/gpus.yaml:{key}",
                    f"{name!r} is also a name of GPU {names[normalized]!r}",
                )
    return MappingProxyType(names)


_GPU_FAMILY = re.compile(r"[a-z]+\d+[a-z]*")


def _family(name: str) -> str:
    match = _GPU_FAMILY.match(name)
    return match[0] if match else ""


def _gpu_suggestions(word: str) -> list[str]:
    """Catalog keys close to ``word``, best first: the keys of the same GPU family (the first
    letters-and-digits token: ``h100``, ``a100``, ``mi300x``) when there are any, ranked by how
    close their names are; otherwise the closest names of any GPU (difflib, ratio >= 0.5)."""
    names = _gpu_names()
    family = _family(word)
    same = [n for n in names if family and _family(n) == family]
    pool = same or list(names)
    ranked = difflib.get_close_matches(word, pool, n=len(pool), cutoff=0.0 if same else 0.5)
    return list(dict.fromkeys(names[n] for n in ranked))


def get_gpu(key: str, *, field: str = "hardware.gpu") -> GpuSpec:
    """The catalog entry for ``key``: a catalog key or one of its ``aliases`` in ``gpus.yaml``
    (``H100``, ``H100-80GB``, ``H100 SXM5``, ``h100_sxm``: case, spaces and ``_`` ignored).

    Scheduler type names are not guessed here (a typo must not silently pick a GPU): only
    exact names resolve; map free-form GRES types with ``gpu_key_for_gres_type`` first. Raises
    ``SpecError(field, ...)`` with did-you-mean hints (GPUs of the same family first) and the
    known keys when the GPU is unknown.
    """
    catalog = gpu_catalog()
    normalized = _normalized_gpu_name(key)
    found = _gpu_names().get(normalized)
    if found is not None:
        return catalog[found]
    known = sorted(catalog)
    close = _gpu_suggestions(normalized)[:2]
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise SpecError(field, f"unknown GPU {key!r}; {hint}known GPUs: {', '.join(known)}")


# Ordered: the first pattern found in the normalized name wins (gb300 before b300, gh200 before
# h200, ...). Names are lower-cased with ``_`` and spaces turned into ``-``.
_GRES_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), key)
    for pattern, key in (
        (r"gb300", "gb300"),
        (r"gb200", "gb200"),
        (r"gh200", "gh200"),
        (r"(?<![a-z])b300", "b300"),
        (r"(?<![a-z])b200", "b200"),
        (r"(?<![a-z])h200", "h200"),
        (r"(?<![a-z])h100.*(pcie|nvl)", "h100-pcie"),
        (r"(?<![a-z])h100.*(?<![0-9])96-?gb?", "h100-sxm-96gb"),
        (r"(?<![a-z])h100", "h100-sxm"),
        (r"(?<![a-z])a100.*40-?gb?", "a100-40gb"),
        (r"(?<![a-z])a100", "a100-80gb"),
        (r"mi325x", "mi325x"),
        (r"mi300x", "mi300x"),
    )
)


def gpu_key_for_gres_type(gres_type: str) -> str | None:
    """Catalog key for a scheduler's GPU type name, or None when unknown.

    Accepts Slurm GRES types (``"h100"``, ``"a100"``, ``"h100_80gb"``, ``"a100-sxm4-80gb"``),
    Kubernetes ``nvidia.com/gpu.product`` labels (``"NVIDIA-H100-80GB-HBM3"``,
    ``"NVIDIA-A100-SXM4-40GB"``) and catalog keys, case-insensitively. A bare ``"a100"`` maps to
    ``a100-80gb`` and a bare ``"h100"`` to ``h100-sxm`` (the training-cluster variants); an
    H100 named with 96 GB (``"h100_96gb"``) to ``h100-sxm-96gb``.
    """
    normalized = re.sub(r"[\s_]+", "-", gres_type.strip().lower())
    if not normalized:
        return None
    if normalized in gpu_catalog():
        return normalized
    for pattern, key in _GRES_PATTERNS:
        if pattern.search(normalized):
            return key
    return None


_PRESET_METADATA = frozenset({"source", "hf_ids", "aliases", "hf_model_type"})
"""Preset entries that describe the preset rather than hold ``model:`` fields: ``source``, the
Hugging Face ids (``hf_ids``) and other names (``aliases``) the preset answers to, and the
``model_type`` of those ids' ``config.json`` (``hf_model_type``)."""


@cache
def _model_presets() -> Mapping[str, Mapping[str, object]]:
    data = _read_yaml("models.yaml")
    presets: dict[str, Mapping[str, object]] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict) or not entry.get("source"):
            raise SpecError(f"catalog/models.yaml:{key}", "every preset needs a 'source'")
        presets[key] = MappingProxyType(dict(entry))
    return MappingProxyType(presets)


def model_preset_keys() -> tuple[str, ...]:
    """Keys of all model presets, sorted."""
    return tuple(sorted(_model_presets()))


def model_preset(key: str, *, field: str = "model.preset") -> dict[str, object]:
    """A fresh dict of the preset's ``model:`` fields (without ``source``), ready to override.

    Raises ``SpecError(field, ...)`` with a did-you-mean hint for an unknown key.
    """
    presets = _model_presets()
    normalized = key.strip().lower()
    if normalized not in presets:
        known = sorted(presets)
        raise SpecError(
            field,
            f"unknown model preset {key!r}; {_did_you_mean(normalized, known)}"
            f"known presets: {', '.join(known)}",
        )
    return {k: v for k, v in presets[normalized].items() if k not in _PRESET_METADATA}


def model_preset_source(key: str) -> str:
    """Public source (paper / model card) of a preset's values."""
    return str(_model_presets()[key]["source"])


def model_preset_hf_ids(key: str) -> tuple[str, ...]:
    """The Hugging Face ids (``meta-llama/Llama-3.1-8B``) of preset ``key``, as the catalog
    spells them; the first is the id its values were read from. Empty when none."""
    return _preset_list(key, "hf_ids")


def model_preset_hf_model_type(key: str) -> str:
    """The ``model_type`` of preset ``key``'s Hugging Face ``config.json`` (``llama``,
    ``qwen2``), which names the ``transformers`` model code that loads it; empty when the
    catalog gives none."""
    return str(_model_presets()[key].get("hf_model_type") or "")


def _preset_list(key: str, entry: str) -> tuple[str, ...]:
    names = _model_presets()[key].get(entry) or ()
    if not isinstance(names, list | tuple):
        raise SpecError(f"catalog/models.yaml:{key}", f"'{entry}' must be a list of names")
    return tuple(str(name) for name in names)


@cache
def _preset_names() -> Mapping[str, str]:
    names: dict[str, str] = {}
    for key in _model_presets():
        for name in (key, *_preset_list(key, "hf_ids"), *_preset_list(key, "aliases")):
            normalized = name.strip().lower()
            if names.setdefault(normalized, key) != key:
                raise SpecError(
                    f"catalog/models.yaml:{key}",
                    f"{name!r} is also a name of preset {names[normalized]!r}",
                )
    return MappingProxyType(names)


def model_preset_key_for_name(name: str) -> str | None:
    """The preset a model name denotes, or None: a preset key, one of its ``hf_ids``
    (``Qwen/Qwen3-8B``, ``meta-llama/Meta-Llama-3.1-8B-Instruct``) or ``aliases`` (torchtune
    builder names such as ``llama3_1_8b``), case-insensitively, surrounding spaces ignored.
    Exact names only: partial names are the caller's to judge."""
    return _preset_names().get(name.strip().lower())
