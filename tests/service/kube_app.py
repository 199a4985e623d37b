"""The service watching the fake API server loaded with tests/data/kubernetes/cluster.yaml:
shared by the Kubernetes service tests (publishing, simulate, ingest)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.logs import LogTailer
from planner.service.main import create_app
from planner.service.settings import KubernetesSettings, PublishSettings, Settings, Toggle
from planner.service.store.sql import SqlStore
from tests.adapters.kubernetes.conftest import load_cluster
from tests.k8s_fake import FakeKube


def wait(what: str, probe: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


@contextlib.contextmanager
def cluster_server() -> Iterator[FakeKube]:
    """The fake API server holding the recorded cluster."""
    server = FakeKube(bookmark_interval_s=0.1, max_watch_s=1.0).start()
    try:
        for obj in load_cluster():
            server.put(obj)
        yield server
    finally:
        server.stop()


def kube_app(
    fake: FakeKube,
    db: Path,
    publish: PublishSettings | None = None,
    *,
    kube: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """The service watching ``fake`` (cluster k8s-test, replica-a), loops driven by hand;
    ``kube`` overrides Kubernetes settings, ``kwargs`` other settings."""
    kubernetes = {
        "enabled": Toggle.ON,
        "cluster": "k8s-test",
        "lease_namespace": "default",
        "identity": "replica-a",
        "publish": publish or PublishSettings(),
        **(kube or {}),
    }
    settings = Settings(
        database_url=f"sqlite:///{db}", kubernetes=KubernetesSettings(**kubernetes), **kwargs
    )
    return create_app(
        settings,
        store=SqlStore(settings.database_url),
        sources=[],
        reader=LogTailer(),
        kube_api_client=fake.api_client(),
        start_loops=False,
    )


def ingest(state: Any) -> None:
    """Wait for the caches and the lease, then run one ingest cycle."""
    wait("informer caches", lambda: state.kube.source.wait_synced(0.1))
    wait("leadership", lambda: state.kube.is_leader)
    state.run_cycle()
