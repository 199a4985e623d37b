"""Published values of built-in names the launch readers resolve (recipes, config names, model
flavors, framework defaults), one YAML file per framework, each value with its source."""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml

from planner.errors import SpecError

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it (10x faster on package data), else
PyYAML's own: the same documents either way."""

__all__ = ["load_data"]


@cache
def load_data(filename: str) -> dict[str, object]:
    """The mapping in ``planner/launch/data/<filename>`` (package data, read once per process).

    Raises ``SpecError`` when the file is not a mapping (a packaging error, not user input)."""
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    data = yaml.load(text, Loader=_SAFE_LOADER)
    if not isinstance(data, dict):
        raise SpecError(f"planner/launch/data/{filename}", "must be a mapping")
    return data
