"""GRES and TRES strings as Slurm prints them → GPU counts and types (pure functions).

GRES (``gpu:h100:8``, ``gpu:h100:2(IDX:0-1)``) comes from ``sinfo``'s ``gres``/``gres_used`` and
``squeue``'s ``tres_per_*``/``gres_detail``; TRES (``cpu=1,mem=1G,gres/gpu=2``) from
``tres_req_str``/``tres_alloc_str``/``tres``. Unreadable counts raise ``ValueError``; the JSON
parsers turn that into a :class:`~planner.errors.SourcePermanentError` naming the field.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GresItem:
    """One GRES entry: ``name`` (e.g. ``"gpu"``), ``type`` (``"h100"`` or None), ``count``."""

    name: str
    type: str | None
    count: int


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` on ``sep`` outside ``[...]`` and ``(...)``; empty parts are dropped."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth = max(0, depth - 1)
        if ch == sep and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def parse_gres(text: str) -> list[GresItem]:
    """Parse a GRES list as squeue/sinfo print it → items.

    Handles ``gpu:h100:8``, ``gpu:8``, ``gpu`` (count 1), ``gpu:h100:2(IDX:0-1)``,
    ``gpu:h100:8(S:0-1)``, the ``gres:``/``gres/`` prefixes of ``tres_per_node``/``tres_per_job``
    (``gres:gpu:h100:2``, ``gres/gpu:2``), and comma-separated lists (commas inside parentheses
    such as ``(IDX:0,3)`` are kept). ``"N/A"``/``"(null)"``/empty give ``[]``. Count suffixes
    K/M/G (×1024ⁿ) are accepted. Raises ``ValueError`` on an unreadable count.
    """
    items: list[GresItem] = []
    for raw in split_top_level(text.strip()):
        entry = re.sub(r"\(.*\)$", "", raw).strip()
        if not entry or entry.upper() in {"N/A", "(NULL)", "NONE"}:
            continue
        if entry.startswith(("gres:", "gres/")):
            entry = entry[5:]
        fields = entry.split(":")
        name = fields[0]
        gres_type: str | None = None
        count = 1
        if len(fields) == 2:
            if _is_count(fields[1]):
                count = _parse_count(fields[1])
            else:
                gres_type = fields[1]
        elif len(fields) >= 3:
            gres_type = fields[1] or None
            count = _parse_count(fields[2])
        items.append(GresItem(name=name, type=gres_type, count=count))
    return items


def _is_count(text: str) -> bool:
    return re.fullmatch(r"\d+[KMGkmg]?", text) is not None


def _parse_count(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMGkmg]?)", text.strip())
    if match is None:
        raise ValueError(f"GRES count {text!r} is not a number")
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2).upper()]
    return int(match.group(1)) * scale


@functools.lru_cache(maxsize=8192)  # a 10,000-job squeue repeats a few hundred strings
def gpus_from_gres(text: str) -> tuple[int, str | None]:
    """Total GPU count and GPU type of a GRES list (``gpu:h100:2(IDX:0-1)`` → ``(2, "h100")``).

    The type is ``None`` when no entry names one or entries name different types.
    """
    gpus = [item for item in parse_gres(text) if item.name == "gpu"]
    return sum(item.count for item in gpus), single_gpu_type(item.type for item in gpus)


def parse_tres(text: str) -> dict[str, str]:
    """Split a TRES string (``cpu=1,mem=1G,node=1,gres/gpu=2,gres/gpu:h100=2``) into key → value.

    Values stay strings (``mem`` carries a unit suffix). Entries without ``=`` are ignored.
    """
    result: dict[str, str] = {}
    for part in split_top_level(text.strip()):
        key, sep, value = part.partition("=")
        if sep:
            result[key.strip()] = value.strip()
    return result


@functools.lru_cache(maxsize=8192)
def gpus_from_tres(text: str) -> tuple[int, str | None]:
    """GPU count and type from a TRES string: ``gres/gpu=2`` → ``(2, None)``;
    ``gres/gpu=2,gres/gpu:h100=2`` → ``(2, "h100")``; only typed entries → their sum.
    Raises ``ValueError`` on an unreadable count.
    """
    tres = parse_tres(text)
    typed = {
        k.split(":", 1)[1]: _parse_count(v) for k, v in tres.items() if k.startswith("gres/gpu:")
    }
    gpu_type = next(iter(typed)) if len(typed) == 1 else None
    if "gres/gpu" in tres:
        return _parse_count(tres["gres/gpu"]), gpu_type
    return sum(typed.values()), gpu_type


def single_gpu_type(types: Iterable[str | None]) -> str | None:
    """The one GPU type among ``types`` (``None``/empty ignored); ``None`` if none or several."""
    found = {t for t in types if t}
    return found.pop() if len(found) == 1 else None
