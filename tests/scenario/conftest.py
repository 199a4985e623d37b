"""Shared scenario documents for the scenario tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

BASE: dict[str, Any] = {
    "name": "llama3-70b-h100-1024",
    "model": {"preset": "llama3-70b"},
    "hardware": {"gpu": "h100-sxm", "num_gpus": 1024},
    "parallelism": {
        "tensor_parallel": 8,
        "pipeline_parallel": 4,
        "global_batch_size": 512,
    },
    "training": {"total_tokens": 1.5e13},
}


@pytest.fixture
def base_doc() -> dict[str, Any]:
    """A fresh, valid scenario document (mutate freely)."""
    return copy.deepcopy(BASE)
