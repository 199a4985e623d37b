"""Shared fixtures: the published runs as cases (built once per test session)."""

from __future__ import annotations

import pytest

from benchmarks.accuracy.convert import Dataset, build_dataset


@pytest.fixture(scope="session")
def dataset() -> Dataset:
    """Every ground-truth configuration converted, de-duplicated and split."""
    return build_dataset()
