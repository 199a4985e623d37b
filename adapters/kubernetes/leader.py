"""Leader election over a ``coordination.k8s.io/v1`` Lease (client-go's algorithm).

Every replica runs a :class:`LeaseElector`; the one holding the Lease is the leader and is the
only one that runs ingest loops and writes (admission checks, annotations). The Lease is
updated with optimistic concurrency (``metadata.resourceVersion``; a concurrent writer gets 409
and retries later). Expiry is judged on the *local* clock, as client-go does: a follower takes
over only when it has seen the same holder record unchanged for ``lease_duration_s``, so clock
skew between replicas does not matter.

The leader renews every ``retry_period_s``; if it cannot renew within ``renew_deadline_s`` it
steps down (``on_stopped_leading``) before its lease can expire on the others, so two leaders
never act at once as long as ``renew_deadline_s < lease_duration_s``.

Why not the official client's ``kubernetes.leaderelection`` (compared with kubernetes 37.0.2,
the pinned major): it does have a Lease lock (``resourcelock.leaselock.LeaseLock``), but

* ``LeaderElection.run()`` blocks its thread for good: ``acquire()`` loops ``while True`` with
  ``time.sleep`` and ``renew_loop()`` only returns when a renewal fails, so a follower cannot be
  stopped and a replica shutting down cannot hand over;
* nothing releases the lease (no ``ReleaseOnCancel``): on shutdown the other replicas wait a
  whole ``lease_duration`` before taking over, where :meth:`LeaseElector.release` clears the
  holder so the next replica leads on its next try;
* ``LeaseLock`` builds its own ``CoordinationV1Api()`` on the process-wide default
  configuration, so it cannot use the ``ApiClient`` (kubeconfig, timeouts) the planner built;
* expiry and deadlines are judged on ``time.time()`` (wall clock, not injectable): a clock step
  shortens or stretches a lease, and the failover test cannot drive time;
* ``Config`` calls ``sys.exit`` on a bad setting and requires ``retry_period >= 1`` s;
* ``onstarted_leading`` is expected to be the leader's whole work, run in a thread of its own;
  there is no ``is_leader`` to poll, which is how the service's loops check leadership;
* ``leaseTransitions`` is never incremented on a takeover.

So the algorithm is kept here (about 250 lines, the same steps as client-go's
``leaderelection.go``: observed record + local expiry, renew deadline, optimistic update).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from adapters.kubernetes.client import ConflictError, KubeApi, NotFoundError
from planner.errors import PlannerError

_log = logging.getLogger(__name__)


def _micro_time(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The holder fields of a Lease spec."""

    holder: str
    lease_duration_s: int
    transitions: int
    renew_time: str


def _record(lease: dict[str, Any]) -> LeaseRecord:
    raw = lease.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    holder = spec.get("holderIdentity")
    duration = spec.get("leaseDurationSeconds")
    transitions = spec.get("leaseTransitions")
    renew = spec.get("renewTime")
    return LeaseRecord(
        holder=holder if isinstance(holder, str) else "",
        lease_duration_s=duration if isinstance(duration, int) else 0,
        transitions=transitions if isinstance(transitions, int) else 0,
        renew_time=renew if isinstance(renew, str) else "",
    )


class LeaseElector:
    """Acquire, renew and release one Lease for ``identity``.

    Parameters:
        api_client: an official ``kubernetes.client.ApiClient`` (or pass ``api``).
        name / namespace: the Lease.
        identity: this replica (e.g. the pod name); must differ between replicas.
        lease_duration_s: how long others wait before taking over an unrenewed lease.
        renew_deadline_s: the leader steps down when it could not renew for this long.
        retry_period_s: how often to try to acquire or renew.
        on_started_leading / on_stopped_leading: called (in the elector's thread) on changes.
        clock: monotonic seconds (expiry); ``wall_clock`` epoch seconds (Lease timestamps).
    """

    def __init__(
        self,
        api_client: Any = None,
        *,
        api: KubeApi | None = None,
        name: str = "llm-capacity-planner",
        namespace: str = "default",
        identity: str,
        lease_duration_s: float = 15.0,
        renew_deadline_s: float = 10.0,
        retry_period_s: float = 2.0,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        if not 0 < retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(
                "need 0 < retry_period_s < renew_deadline_s < lease_duration_s, got "
                f"{retry_period_s}, {renew_deadline_s}, {lease_duration_s}"
            )
        if api is None:
            if api_client is None:
                raise ValueError("pass api_client or api")
            api = KubeApi(api_client, request_timeout_s=max(1.0, retry_period_s))
        self.api = api
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._clock = clock
        self._wall_clock = wall_clock
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._last_renew = float("-inf")
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the lease (and renewed it within the deadline)."""
        return self._leader.is_set() and self._clock() - self._last_renew < self.renew_deadline_s

    @property
    def observed_holder(self) -> str:
        """The holder last seen on the Lease ("" when none)."""
        return self._observed.holder if self._observed else ""

    # ------------------------------------------------------------------ one step

    def _body(
        self, lease: dict[str, Any] | None, transitions: int, acquire: bool
    ) -> dict[str, Any]:
        now = _micro_time(self._wall_clock())
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration_s)),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        raw_spec = lease.get("spec") if lease else None
        old_spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
        spec["acquireTime"] = now if acquire else old_spec.get("acquireTime", now)
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if lease is not None:
            rv = lease.get("metadata", {}).get("resourceVersion")
            if isinstance(rv, str):
                meta["resourceVersion"] = rv
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this replica holds the lease afterwards. Never raises (API
        errors count as a failed attempt)."""
        now = self._clock()
        try:
            try:
                lease = self.api.read_lease(self.namespace, self.name)
            except NotFoundError:
                created = self.api.create_lease(self.namespace, self._body(None, 0, True))
                self._saw(_record(created), now)
                return self._became(True, now)
            record = _record(lease)
            if record != self._observed:
                self._saw(record, now)
            held_by_other = record.holder not in ("", self.identity)
            expired = now - self._observed_at >= max(
                record.lease_duration_s or self.lease_duration_s, 1
            )
            if held_by_other and not expired:
                if self._leader.is_set():  # someone else holds it now: stop acting at once
                    self._step_down()
                return False
            acquire = record.holder != self.identity
            transitions = record.transitions + (1 if acquire and record.holder else 0)
            updated = self.api.replace_lease(
                self.namespace, self.name, self._body(lease, transitions, acquire)
            )
            self._saw(_record(updated), now)
            return self._became(True, now)
        except ConflictError:
            return self._became(False, now)
        except PlannerError as exc:
            _log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return self._became(False, now)

    def _saw(self, record: LeaseRecord, now: float) -> None:
        self._observed = record
        self._observed_at = now

    def _became(self, holding: bool, now: float) -> bool:
        if holding:
            self._last_renew = now
            if not self._leader.is_set():
                self._leader.set()
                _log.info("lease %s/%s: %s is the leader", self.namespace, self.name, self.identity)
                if self._on_started:
                    self._on_started()
            return True
        if self._leader.is_set() and now - self._last_renew >= self.renew_deadline_s:
            self._step_down()
        return self._leader.is_set()

    def _step_down(self) -> None:
        self._leader.clear()
        _log.warning("lease %s/%s: %s stopped leading", self.namespace, self.name, self.identity)
        if self._on_stopped:
            self._on_stopped()

    def release(self) -> bool:
        """Give the lease up now (holder cleared, duration 1 s) so another replica takes over
        without waiting for expiry; True when released. Never raises."""
        was_leader = self._leader.is_set()
        if was_leader:
            self._step_down()
        try:
            lease = self.api.read_lease(self.namespace, self.name)
            if _record(lease).holder != self.identity:
                return False
            body = self._body(lease, _record(lease).transitions, False)
            body["spec"]["holderIdentity"] = ""
            body["spec"]["leaseDurationSeconds"] = 1
            self.api.replace_lease(self.namespace, self.name, body)
            return True
        except PlannerError as exc:
            _log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, exc)
            return False

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        """Try every ``retry_period_s`` until :meth:`stop`; releases the lease on the way out."""
        while not self._stop.is_set():
            self.try_acquire_or_renew()
            self._stop.wait(self.retry_period_s)
        if self._leader.is_set():
            self.release()

    def start(self) -> None:
        """Run :meth:`run` in a daemon thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="lease-elector", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop (releasing the lease if held) and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
