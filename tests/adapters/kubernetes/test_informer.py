"""Informers with the real ``kubernetes`` client against the fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapters.kubernetes.client import NODES, PODS, WORKLOADS, KubeApi, NotFoundError
from adapters.kubernetes.informer import Informer
from tests.k8s_fake import FakeKube, Fault, wait_for


def _node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }


@pytest.fixture
def informers() -> Iterator[list[Informer]]:
    started: list[Informer] = []
    yield started
    for informer in started:
        informer.stop(2.0)


def _start(fake: FakeKube, started: list[Informer], res: Any = NODES, **kwargs: Any) -> Informer:
    options: dict[str, Any] = {
        "watch_timeout_s": 1,
        "backoff_initial_s": 0.02,
        "backoff_max_s": 0.2,
    }
    options.update(kwargs)
    informer = Informer(KubeApi(fake.api_client(), request_timeout_s=2.0), res, **options)
    informer.start()
    started.append(informer)
    return informer


def _names(informer: Informer) -> set[str]:
    return {o["metadata"]["name"] for o in informer.items()}


def test_list_then_watch_converges(fake: FakeKube, informers: list[Informer]) -> None:
    fake.put(_node("a"))
    informer = _start(fake, informers)
    assert informer.wait_synced(10.0)
    assert _names(informer) == {"a"}
    fake.put(_node("b"))
    fake.put(_node("a", gpus=4))
    fake.remove(_node("b"))
    fake.put(_node("c"))
    assert wait_for(lambda: _names(informer) == {"a", "c"})
    assert wait_for(lambda: informer.get("a")["status"]["allocatable"]["nvidia.com/gpu"] == "4")  # type: ignore[index]
    assert informer.resource_version == str(fake.resource_version)
    stats = informer.stats
    assert stats.lists == 1
    assert stats.events == 4
    assert stats.errors == 0


def test_paged_list(fake: FakeKube, informers: list[Informer]) -> None:
    for n in range(7):
        fake.put(_node(f"n{n}"))
    informer = _start(fake, informers, page_size=3)
    assert informer.wait_synced(10.0)
    assert len(informer.items()) == 7
    assert sum("continue=" in path for _m, path in fake.requests) == 2


def test_bookmarks_move_the_resource_version(fake: FakeKube, informers: list[Informer]) -> None:
    fake.put(_node("a"))
    informer = _start(fake, informers, res=PODS)  # no pods: only bookmarks move the version
    assert informer.wait_synced(10.0)
    fake.put(_node("b"))  # another resource changes the global version
    assert wait_for(lambda: informer.stats.bookmarks > 0)
    assert wait_for(lambda: informer.resource_version == str(fake.resource_version))
    assert any("allowWatchBookmarks=true" in path for _m, path in fake.requests)


def test_gone_410_relists(fake: FakeKube, informers: list[Informer]) -> None:
    fake.put(_node("a"))
    informer = _start(fake, informers)
    assert informer.wait_synced(10.0)
    fake.compact()  # the open watch gets an ERROR 410 event
    fake.put(_node("b"))
    assert wait_for(lambda: informer.stats.relists_gone >= 1)
    assert wait_for(lambda: _names(informer) == {"a", "b"})
    assert informer.stats.lists >= 2


def test_dropped_watch_resumes_without_losing_events(
    fake: FakeKube, informers: list[Informer]
) -> None:
    informer = _start(fake, informers)
    assert informer.wait_synced(10.0)
    assert wait_for(lambda: informer.stats.watches >= 1)
    fake.drop_watches()
    fake.put(_node("after-drop"))
    assert wait_for(lambda: _names(informer) == {"after-drop"})
    assert wait_for(lambda: informer.stats.watches >= 2)
    assert informer.stats.lists == 1  # resumed from its resourceVersion, no re-list needed


def test_throttling_and_errors_back_off_and_recover(
    fake: FakeKube, informers: list[Informer]
) -> None:
    fake.put(_node("a"))
    fake.faults += [
        Fault(status=429, retry_after_s=0, method="GET", watch=False),
        Fault(status=500, method="GET", watch=False),
        Fault(drop=True, method="GET", watch=False),
    ]
    informer = _start(fake, informers)
    assert informer.wait_synced(10.0)
    stats = informer.stats
    assert stats.throttled == 1
    assert stats.errors == 3
    assert _names(informer) == {"a"}
    assert all(f.hits == 1 for f in fake.faults)


def test_watch_request_failure_keeps_the_cache(fake: FakeKube, informers: list[Informer]) -> None:
    fake.put(_node("a"))
    fake.faults.append(Fault(status=503, retry_after_s=0, watch=True, times=2))
    informer = _start(fake, informers)
    assert informer.wait_synced(10.0)
    fake.put(_node("b"))
    assert wait_for(lambda: _names(informer) == {"a", "b"})
    assert informer.stats.errors == 2


def test_missing_crd_is_reported_not_raised(fake: FakeKube) -> None:
    api = KubeApi(fake.api_client())
    with pytest.raises(NotFoundError):
        api.list(WORKLOADS.__class__("x", "example.org", "v1", "things", "Thing", True))
