"""Collective and point-to-point costs: alpha-beta models over a two-tier topology (vectorized).

Two tiers: an NVLink (scale-up) domain of ``domain`` GPUs at ``up_bw`` bytes/s per GPU and
``up_lat`` seconds per hop, and the scale-out NICs at ``out_bw`` / ``out_lat`` per GPU.
Bandwidths passed in are already *bus* bandwidths (line rate times the NCCL busbw fraction).

Group placement (Megatron-Core rank order, ``tp`` fastest, then ``cp``, then ``dp`` (experts:
``ep`` inside ``dp``), ``pp`` slowest): a group of ``n`` ranks whose members are ``stride`` ranks
apart has ``n_in = clip(domain // stride, 1, n)`` members inside one NVLink domain; it stays on
NVLink only when ``n_in == n``. ``placement(n, stride, domain)`` returns ``n_in``.

Costs for a buffer of ``size`` bytes (the full, unsharded buffer; Thakur et al. 2005; NCCL):

* ring all-reduce: ``base + 2(n-1)·alpha + 2(n-1)/n · size / bw``, alpha the slowest hop;
  across domains NCCL runs one ring per NIC, each leaving a domain through a different GPU, so
  the bus bandwidth is ``min(up_bw, n_in · out_bw)``: the ``n_in`` NICs of the group's members
  in a domain share the inter-domain traffic (nccl-tests on DGX A100, 8x200 Gbit/s: ~185 GB/s
  all-reduce busbw across nodes);
* tree all-reduce (NCCL double binary tree across domains, chains inside):
  ``base + 2(log2(n_out)·out_lat + (n_in-1)·up_lat) + 2 · size / bw`` (more bytes than the ring
  for small ``n`` but logarithmic latency); ``all_reduce_time_s`` takes the faster of the two,
  as NCCL's tuner does;
* all-gather / reduce-scatter (ring only): ``base + (n-1)·alpha + (n-1)/n · size / bw``;
* all-to-all: every rank sends ``(n-1)/n`` of ``size``; the ``n_in-1`` peers in its domain over
  NVLink and the ``n-n_in`` others over the NIC, concurrently: ``base + alpha + max(...)``;
* send/recv: ``base + alpha + size / bw``.

All functions take numpy arrays of shape ``(n,)``, or Python numbers for one scenario
(``planner.perf.ops``), and return zero where ``n <= 1``.
"""

from __future__ import annotations

from planner.perf import ops
from planner.perf.ops import Flag, Real

__all__ = [
    "Link",
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


class Link:
    """Bus bandwidths and latencies of both tiers, plus the base latency, for a batch."""

    __slots__ = ("_rings", "base", "domain", "out_bw", "out_lat", "up_bw", "up_lat")

    def __init__(
        self,
        *,
        up_bw: Real,
        out_bw: Real,
        up_lat: Real,
        out_lat: Real,
        domain: Real,
        base: float,
    ) -> None:
        self.up_bw, self.out_bw = up_bw, out_bw
        self.up_lat, self.out_lat = up_lat, out_lat
        self.domain, self.base = domain, base
        self._rings: dict[tuple[int, int], tuple[object, ...]] = {}

    def ring(self, n: Real, stride: Real) -> tuple[Real, Real, Real]:
        """``(n_in, bottleneck bus bandwidth, per-hop latency)`` of a ring over the group.

        Memoised per ``(n, stride)`` object pair (the engine times several collectives over the
        same group); the cache keeps the arrays alive, so their ids stay unique."""
        key = (id(n), id(stride))
        hit = self._rings.get(key)
        if hit is not None:
            return hit[2], hit[3], hit[4]  # type: ignore[return-value]
        n_in = placement(n, stride, self.domain)
        inside = n_in >= n
        bw = ops.where(inside, self.up_bw, ops.minimum(n_in * self.out_bw, self.up_bw))
        lat = ops.where(inside, self.up_lat, self.out_lat)
        self._rings[key] = (n, stride, n_in, bw, lat)
        return n_in, bw, lat


def all_reduce_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """All-reduce of ``size`` bytes over ``n`` ranks: the faster of ring and tree."""
    n_in, bw, lat = link.ring(n, stride)
    n_safe = ops.maximum(n, 1.0)
    ring = link.base + 2.0 * (n_safe - 1.0) * lat + 2.0 * (n_safe - 1.0) / n_safe * size / bw
    n_out = n_safe / n_in
    tree_lat = 2.0 * (ops.log2(ops.maximum(n_out, 1.0)) * link.out_lat + (n_in - 1.0) * link.up_lat)
    tree = link.base + tree_lat + 2.0 * size / bw
    return ops.where(n_safe > 1.0, ops.minimum(ring, tree), 0.0)


def all_gather_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """Ring all-gather producing ``size`` bytes on every rank."""
    _, bw, lat = link.ring(n, stride)
    n_safe = ops.maximum(n, 1.0)
    t = link.base + (n_safe - 1.0) * lat + (n_safe - 1.0) / n_safe * size / bw
    return ops.where(n_safe > 1.0, t, 0.0)


reduce_scatter_time_s = all_gather_time_s
"""Ring reduce-scatter of a ``size``-byte input: the same cost as the all-gather."""


def all_to_all_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """All-to-all where each rank holds ``size`` bytes, ``1/n`` of it for each peer."""
    n_in, _, lat = link.ring(n, stride)
    n_safe = ops.maximum(n, 1.0)
    intra = (n_in - 1.0) / n_safe * size / link.up_bw
    inter = (n_safe - n_in) / n_safe * size / ops.minimum(link.out_bw, link.up_bw)
    t = link.base + lat + ops.maximum(intra, inter)
    return ops.where(n_safe > 1.0, t, 0.0)


def p2p_time_s(size: Real, *, inside: Flag, link: Link) -> Real:
    """One send/recv of ``size`` bytes, over NVLink when ``inside`` else over the NIC."""
    bw = ops.where(inside, link.up_bw, ops.minimum(link.out_bw, link.up_bw))
    lat = ops.where(inside, link.up_lat, link.out_lat)
    return link.base + lat + size / bw
