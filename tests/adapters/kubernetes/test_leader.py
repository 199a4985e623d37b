"""Leader election over a Lease with two candidates (real client, fake API server)."""

from __future__ import annotations

import pytest

from adapters.kubernetes.client import ConflictError
from adapters.kubernetes.leader import LeaseElector
from tests.k8s_fake import FakeKube, Fault, wait_for


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _pair(fake: FakeKube, clock: Clock) -> tuple[LeaseElector, LeaseElector]:
    def make(identity: str) -> LeaseElector:
        return LeaseElector(
            fake.api_client(),
            name="planner",
            namespace="ops",
            identity=identity,
            lease_duration_s=15,
            renew_deadline_s=10,
            retry_period_s=2,
            clock=clock,
        )

    return make("pod-a"), make("pod-b")


def test_one_leader_then_failover_on_expiry(fake: FakeKube) -> None:
    clock = Clock()
    a, b = _pair(fake, clock)
    events: list[str] = []
    a._on_stopped = lambda: events.append("a stopped")
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    assert (a.is_leader, b.is_leader, b.observed_holder) == (True, False, "pod-a")
    clock.t += 5
    assert a.try_acquire_or_renew() is True  # renews
    assert b.try_acquire_or_renew() is False  # saw a new renewTime: restarts its wait
    clock.t += 14
    assert b.try_acquire_or_renew() is False  # 14 s < 15 s since b saw the record change
    clock.t += 2  # a is gone (no renew) and the lease expired for b
    assert b.try_acquire_or_renew() is True
    lease = fake.get("coordination.k8s.io", "leases", "planner", "ops")
    assert lease is not None
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("pod-b", 1)
    assert a.is_leader is False  # could not renew within its deadline
    assert a.try_acquire_or_renew() is False
    assert events == ["a stopped"]


def test_release_hands_over_at_once(fake: FakeKube) -> None:
    clock = Clock()
    a, b = _pair(fake, clock)
    assert a.try_acquire_or_renew()
    assert b.try_acquire_or_renew() is False
    assert a.release() is True
    assert a.is_leader is False
    assert b.try_acquire_or_renew() is True


def test_concurrent_update_loses_with_409(fake: FakeKube) -> None:
    clock = Clock()
    a, b = _pair(fake, clock)
    assert a.try_acquire_or_renew()
    assert a.release()
    stale = b.api.read_lease("ops", "planner")
    assert a.try_acquire_or_renew()  # a takes it back first
    body = b._body(stale, 0, True)
    with pytest.raises(ConflictError, match="409"):
        b.api.replace_lease("ops", "planner", body)
    assert b.try_acquire_or_renew() is False


def test_api_errors_never_raise(fake: FakeKube) -> None:
    clock = Clock()
    a, _b = _pair(fake, clock)
    fake.faults.append(Fault(status=500, times=1))
    assert a.try_acquire_or_renew() is False
    assert a.try_acquire_or_renew() is True


def test_threads_elect_exactly_one(fake: FakeKube) -> None:
    electors = [
        LeaseElector(
            fake.api_client(),
            name="ha",
            namespace="ops",
            identity=f"pod-{n}",
            lease_duration_s=3,
            renew_deadline_s=2,
            retry_period_s=0.05,
        )
        for n in range(2)
    ]
    for e in electors:
        e.start()
    try:
        assert wait_for(lambda: sum(e.is_leader for e in electors) == 1)
        leader = next(e for e in electors if e.is_leader)
        follower = next(e for e in electors if not e.is_leader)
        leader.stop()  # releases the lease
        assert wait_for(lambda: follower.is_leader)
    finally:
        for e in electors:
            e.stop()
