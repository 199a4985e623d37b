"""Without Ray installed, asking for it is a clear error and nothing else changes."""

from __future__ import annotations

import importlib

import pytest

from planner.errors import SourcePermanentError


def test_missing_ray_names_the_extra(monkeypatch):
    from adapters.ray import executor

    real = importlib.import_module

    def no_ray(name: str, *args: object) -> object:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real(name, *args)

    monkeypatch.setattr(executor.importlib, "import_module", no_ray)
    with pytest.raises(SourcePermanentError, match=r"llm-capacity-planner\[ray\]"):
        executor.RayExecutor("127.0.0.1:6379")


def test_planner_capacity_does_not_import_ray_or_plotly():
    """The pure core and the review command load without the optional extra."""
    import subprocess
    import sys

    code = (
        "import sys, planner.capacity, planner.cli; "
        "print('ray' in sys.modules, 'plotly' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
