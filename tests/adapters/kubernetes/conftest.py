"""Fixtures of the Kubernetes adapter tests: the constructed cluster and the fake API server."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s_fake import FakeKube

DATA = Path(__file__).resolve().parents[2] / "data" / "kubernetes"


def load_cluster() -> list[dict[str, Any]]:
    """The objects of ``tests/data/kubernetes/cluster.yaml`` (fresh copies)."""
    return [d for d in yaml.safe_load_all((DATA / "cluster.yaml").read_text()) if d]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The object of ``kind`` named ``name``."""
    return copy.deepcopy(
        next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    )


@pytest.fixture
def cluster() -> list[dict[str, Any]]:
    return load_cluster()


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    server = FakeKube(bookmark_interval_s=0.1, max_watch_s=1.0).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def loaded_fake(fake: FakeKube, cluster: list[dict[str, Any]]) -> FakeKube:
    for obj in cluster:
        fake.put(obj)
    return fake
