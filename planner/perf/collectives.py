"""Collective and point-to-point costs: alpha-beta models over a two-tier topology (vectorized).

Two tiers (``Link``): an NVLink (scale-up) domain of ``nvlink_domain_size`` GPUs at
``scale_up_bus_bandwidth_bytes_per_s`` per GPU and ``scale_up_latency_s`` per hop, and the
scale-out NICs at ``scale_out_bus_bandwidth_bytes_per_s`` / ``scale_out_latency_s`` per GPU.
Bandwidths are *bus* bandwidths (line rate times the NCCL busbw fraction).

Group placement (Megatron-Core rank order, ``tp`` fastest, then ``cp``, then ``dp`` (experts:
``ep`` inside ``dp``), ``pp`` slowest): a group of ``n`` ranks whose members are ``stride`` ranks
apart has ``n_in = clip(domain // stride, 1, n)`` members inside one NVLink domain of ``domain``
GPUs; it stays on NVLink only when ``n_in == n``. ``placement(n, stride, domain)`` returns
``n_in``.

Costs for a buffer of ``size`` bytes (the full, unsharded buffer; Thakur et al. 2005; NCCL):

* ring all-reduce: ``base + 2(n-1)·alpha + 2(n-1)/n · size / bw``, alpha the slowest hop;
  across domains NCCL runs one ring per NIC, each leaving a domain through a different GPU, so
  the bus bandwidth is ``min(up_bw, n_in · out_bw)`` (``up_bw``/``out_bw``: the scale-up and
  scale-out bus bandwidths): the ``n_in`` NICs of the group's members in a domain share the
  inter-domain traffic (nccl-tests on DGX A100, 8x200 Gbit/s: ~185 GB/s
  all-reduce busbw across nodes);
* tree all-reduce (NCCL double binary tree across domains, chains inside):
  ``base + 2(log2(n_out)·out_lat + (n_in-1)·up_lat) + 2 · size / bw`` (``up_lat``/``out_lat``:
  the per-hop latencies; more bytes than the ring for small ``n`` but logarithmic latency);
  ``all_reduce_time_s`` takes the faster of the two, as NCCL's tuner does;
* all-gather / reduce-scatter (ring only): ``base + (n-1)·alpha + (n-1)/n · size / bw``;
* all-to-all: every rank sends ``(n-1)/n`` of ``size``; the ``n_in-1`` peers in its domain over
  NVLink and the ``n-n_in`` others over the NIC, concurrently: ``base + alpha + max(...)``;
* send/recv: ``base + alpha + size / bw``.

All functions take numpy arrays of shape ``(n,)``, or Python numbers for one scenario
(``planner.perf.ops``), and return zero where ``n <= 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import ops
from planner.perf.ops import Flag, Real

__all__ = [
    "Link",
    "Ring",
    "all_gather_time_s",
    "all_reduce_time_s",
    "all_to_all_time_s",
    "p2p_time_s",
    "placement",
    "reduce_scatter_time_s",
]


def placement(n: Real, stride: Real, domain: Real) -> Real:
    """Members of an ``n``-rank group with rank ``stride`` that share one NVLink domain."""
    inside = ops.floor(domain / ops.maximum(stride, 1.0))
    return ops.minimum(ops.maximum(inside, 1.0), ops.maximum(n, 1.0))


@dataclass(frozen=True, slots=True)
class Ring:
    """A ring over a group: ``members_inside`` of its ranks share one NVLink domain, its
    bottleneck bus bandwidth (bytes/s) and the latency of its slowest hop (seconds)."""

    members_inside: Real
    bus_bandwidth_bytes_per_s: Real
    hop_latency_s: Real


class Link:
    """Bus bandwidths (bytes/s per GPU) and per-hop latencies (seconds) of both tiers, the
    NVLink domain size and the fixed cost of one collective launch, for a batch (arrays of
    shape ``(n,)``) or one scenario (numbers)."""

    __slots__ = (
        "_rings",
        "base_latency_s",
        "nvlink_domain_size",
        "scale_out_bus_bandwidth_bytes_per_s",
        "scale_out_latency_s",
        "scale_up_bus_bandwidth_bytes_per_s",
        "scale_up_latency_s",
    )

    def __init__(
        self,
        *,
        scale_up_bus_bandwidth_bytes_per_s: Real,
        scale_out_bus_bandwidth_bytes_per_s: Real,
        scale_up_latency_s: Real,
        scale_out_latency_s: Real,
        nvlink_domain_size: Real,
        base_latency_s: float,
    ) -> None:
        self.scale_up_bus_bandwidth_bytes_per_s = scale_up_bus_bandwidth_bytes_per_s
        self.scale_out_bus_bandwidth_bytes_per_s = scale_out_bus_bandwidth_bytes_per_s
        self.scale_up_latency_s = scale_up_latency_s
        self.scale_out_latency_s = scale_out_latency_s
        self.nvlink_domain_size = nvlink_domain_size
        self.base_latency_s = base_latency_s
        self._rings: dict[tuple[int, int], tuple[Real, Real, Ring]] = {}

    def ring(self, n: Real, stride: Real) -> Ring:
        """The ring over an ``n``-rank group whose members are ``stride`` ranks apart.

        Memoised per ``(n, stride)`` object pair (the engine times several collectives over the
        same group); the cache keeps the arrays alive, so their ids stay unique."""
        key = (id(n), id(stride))
        hit = self._rings.get(key)
        if hit is not None:
            return hit[2]
        up_bw, out_bw = (
            self.scale_up_bus_bandwidth_bytes_per_s,
            self.scale_out_bus_bandwidth_bytes_per_s,
        )
        n_in = placement(n, stride, self.nvlink_domain_size)
        inside = n_in >= n
        ring = Ring(
            members_inside=n_in,
            bus_bandwidth_bytes_per_s=ops.where(inside, up_bw, ops.minimum(n_in * out_bw, up_bw)),
            hop_latency_s=ops.where(inside, self.scale_up_latency_s, self.scale_out_latency_s),
        )
        self._rings[key] = (n, stride, ring)
        return ring


def all_reduce_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """All-reduce of ``size`` bytes over ``n`` ranks: the faster of ring and tree."""
    ring = link.ring(n, stride)
    n_in, bw, lat = ring.members_inside, ring.bus_bandwidth_bytes_per_s, ring.hop_latency_s
    base = link.base_latency_s
    n_safe = ops.maximum(n, 1.0)
    ring_s = base + 2.0 * (n_safe - 1.0) * lat + 2.0 * (n_safe - 1.0) / n_safe * size / bw
    n_out = n_safe / n_in
    tree_lat = 2.0 * (
        ops.log2(ops.maximum(n_out, 1.0)) * link.scale_out_latency_s
        + (n_in - 1.0) * link.scale_up_latency_s
    )
    tree_s = base + tree_lat + 2.0 * size / bw
    return ops.where(n_safe > 1.0, ops.minimum(ring_s, tree_s), 0.0)


def all_gather_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """Ring all-gather producing ``size`` bytes on every rank."""
    ring = link.ring(n, stride)
    n_safe = ops.maximum(n, 1.0)
    t = (
        link.base_latency_s
        + (n_safe - 1.0) * ring.hop_latency_s
        + (n_safe - 1.0) / n_safe * size / ring.bus_bandwidth_bytes_per_s
    )
    return ops.where(n_safe > 1.0, t, 0.0)


reduce_scatter_time_s = all_gather_time_s
"""Ring reduce-scatter of a ``size``-byte input: the same cost as the all-gather."""


def all_to_all_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """All-to-all where each rank holds ``size`` bytes, ``1/n`` of it for each peer."""
    ring = link.ring(n, stride)
    n_in = ring.members_inside
    up_bw = link.scale_up_bus_bandwidth_bytes_per_s
    out_bw = ops.minimum(link.scale_out_bus_bandwidth_bytes_per_s, up_bw)
    n_safe = ops.maximum(n, 1.0)
    intra = (n_in - 1.0) / n_safe * size / up_bw
    inter = (n_safe - n_in) / n_safe * size / out_bw
    t = link.base_latency_s + ring.hop_latency_s + ops.maximum(intra, inter)
    return ops.where(n_safe > 1.0, t, 0.0)


def p2p_time_s(size: Real, *, inside: Flag, link: Link) -> Real:
    """One send/recv of ``size`` bytes, over NVLink when ``inside`` else over the NIC."""
    up_bw = link.scale_up_bus_bandwidth_bytes_per_s
    bw = ops.where(inside, up_bw, ops.minimum(link.scale_out_bus_bandwidth_bytes_per_s, up_bw))
    lat = ops.where(inside, link.scale_up_latency_s, link.scale_out_latency_s)
    return link.base_latency_s + lat + size / bw
