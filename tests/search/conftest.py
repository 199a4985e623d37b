"""Small explore documents: spaces of ~10^4-10^5 candidates that sweep in well under a second."""

from __future__ import annotations

import copy
from typing import Any

import pytest

SMALL: dict[str, Any] = {
    "name": "small",
    "model": {
        "num_layers": 8,
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "seq_length": 1024,
        "vocab_size": 32000,
    },
    "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
    "parallelism": {"global_batch_size": 64},
    "training": {"total_tokens": 1.0e9},
}


@pytest.fixture
def small() -> dict[str, Any]:
    """A fresh copy of the small dense explore document (all knobs open)."""
    return copy.deepcopy(SMALL)
