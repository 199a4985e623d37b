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

Costs for a buffer of ``size`` bytes (the full, unsharded buffer; Thakur et al. 2005) follow
NCCL's own cost model, the one its tuner picks an algorithm and a protocol with (NCCL
``src/graph/tuning.cc``, ``ncclTopoTuneModel``, 2.18-2.21; described in Hu et al. 2025,
"Demystifying NCCL", arXiv:2507.04786, §3-4): ``time = base + latency + size / algbw`` for each
algorithm (ring; tree for all-reduce) and protocol (``LL``, ``LL128``, ``Simple``), and the
fastest one wins, as NCCL's tuner chooses per call. Message-size dependent efficiency follows:
small buffers take the low-latency ``LL`` protocol (8-byte stores carrying 4 bytes of data and
a flag: a quarter of the bandwidth across nodes, a third inside one), mid-size ``LL128``
(120 of every 128 bytes), large ``Simple`` (full bandwidth, highest latency); many domains
favour the tree's logarithmic latency up to large sizes.

* ring all-reduce: ``2(n-1)`` steps of which ``2·n_out`` cross between the ``n_out = n / n_in``
  domains (the ring leaves each domain once per pass) at the network's per-hop latency, the
  others at NVLink's; bus bandwidth ``min(up_bw, n_in · out_bw)`` across domains (NCCL runs one
  ring per NIC, each leaving a domain through a different GPU, so the ``n_in`` NICs of the
  group's members in a domain share the inter-domain traffic: nccl-tests on DGX A100,
  8x200 Gbit/s, ~185 GB/s all-reduce busbw across nodes); ``size · 2(n-1)/n / bw``;
* tree all-reduce (NCCL double binary tree across domains, chains inside):
  ``2((n_in-1)·up_lat + log2(n_out)·out_lat)`` and ``2 · size / bw`` (algbw half the busbw:
  reduce up, broadcast down), at 0.92 of the ring's busbw (``Simple``);
* all-gather / reduce-scatter (ring only): ``n-1`` steps of which ``n_out`` cross domains,
  ``(n-1)/n · size / bw``;
* all-to-all: every rank sends ``(n-1)/n`` of ``size``; the ``n_in-1`` peers in its domain over
  NVLink and the ``n-n_in`` others over the NIC, concurrently: ``base + alpha + max(...)``;
* send/recv: ``base + alpha + size / bw`` (``Simple``).

Per-hop latencies per protocol scale the GPU's catalog latencies (``scale_up_latency_s``,
``scale_out_latency_s``, the ``LL128`` ring figures of tuning.cc's ``hwLat``) by tuning.cc's
ratios between protocols; the base (launch) latency per protocol scales
``collective_latency_s`` (tuning.cc's ``Simple`` ``baseLat``) likewise.

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


_LL, _LL128, _SIMPLE = 0, 1, 2
_BASE_US = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 8.4)}
"""tuning.cc ``baseLat`` (us) per protocol ``(LL, LL128, Simple)``; ``Simple`` is what
``collective_latency_s`` stands for (the efficiency constant ``nccl_base_latency_s``)."""
_HOP_UP_US = {"ring": (0.6, 1.9, 3.4), "tree": (0.6, 1.25, 4.0)}
"""tuning.cc ``hwLat[NVLINK]`` (us per hop) per protocol, for the catalog's 1 us NVLink GPUs."""
_HOP_OUT_US = {"ring": (2.7, 4.0, 14.0), "tree": (5.0, 8.5, 14.0)}
"""tuning.cc ``hwLat[NET]`` (us per hop) per protocol, for the catalog's 4 us NIC GPUs."""
_REFERENCE_UP_US, _REFERENCE_OUT_US, _REFERENCE_BASE_US = 1.0, 4.0, 8.4


def _protocol_bandwidth(algorithm: str, protocol: int, n_in: Real, n_out: Real, bw: Real) -> Real:
    """tuning.cc's model refinements of the bus bandwidth per protocol: ``LL`` moves 4 data
    bytes per 8-byte store (ring: a quarter of ``Simple``'s across domains or for all-reduce,
    a third otherwise; tree 1/3.8), ``LL128`` 120 of 128 bytes (ring 0.92, 0.7 with one GPU
    of the group per domain; tree 120/128 across domains, 7/9 inside one), the tree's
    ``Simple`` 0.92 of the ring's."""
    if algorithm == "tree":
        factor: Real = (1.0 / 3.8, ops.where(n_out > 1.0, 120.0 / 128.0, 7.0 / 9.0), 0.92)[protocol]
    elif protocol == _LL:
        factor = 0.25
    elif protocol == _LL128:
        factor = ops.where(n_in >= 2.0, 0.92, 0.7)
    else:
        factor = 1.0
    return bw * factor


def _best(
    link: Link,
    algorithm: str,
    *,
    up_steps: Real,
    out_steps: Real,
    size_over_bw: Real,
    n_in: Real,
    n_out: Real,
    bw: Real,
) -> Real:
    """The fastest protocol's time: base + per-hop latencies + ``size_over_bw`` (bytes over
    the ``Simple`` bus bandwidth ``bw``, the algorithm's volume factor applied) rescaled by
    the protocol's bandwidth."""
    up_scale = link.scale_up_latency_s / _REFERENCE_UP_US
    out_scale = link.scale_out_latency_s / _REFERENCE_OUT_US
    base_scale = link.base_latency_s / _REFERENCE_BASE_US
    best: Real | None = None
    for protocol in (_LL, _LL128, _SIMPLE):
        latency = (
            _BASE_US[algorithm][protocol] * base_scale
            + up_steps * _HOP_UP_US[algorithm][protocol] * up_scale
            + out_steps * _HOP_OUT_US[algorithm][protocol] * out_scale
        )
        ratio = bw / _protocol_bandwidth(algorithm, protocol, n_in, n_out, bw)
        t = latency + size_over_bw * ratio
        best = t if best is None else ops.minimum(best, t)
    assert best is not None
    return best


def all_reduce_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """All-reduce of ``size`` bytes over ``n`` ranks: the fastest of ring and tree, each with
    its fastest protocol (module docstring)."""
    ring = link.ring(n, stride)
    n_in, bw = ring.members_inside, ring.bus_bandwidth_bytes_per_s
    n_safe = ops.maximum(n, 1.0)
    n_out = n_safe / n_in
    steps = 2.0 * (n_safe - 1.0)
    out_steps = ops.where(n_out > 1.0, ops.minimum(2.0 * n_out, steps), 0.0)
    ring_s = _best(
        link,
        "ring",
        up_steps=steps - out_steps,
        out_steps=out_steps,
        size_over_bw=2.0 * (n_safe - 1.0) / n_safe * size / bw,
        n_in=n_in,
        n_out=n_out,
        bw=bw,
    )
    tree_s = _best(
        link,
        "tree",
        up_steps=2.0 * (n_in - 1.0),
        out_steps=2.0 * ops.log2(ops.maximum(n_out, 1.0)),
        size_over_bw=2.0 * size / bw,
        n_in=n_in,
        n_out=n_out,
        bw=bw,
    )
    return ops.where(n_safe > 1.0, ops.minimum(ring_s, tree_s), 0.0)


def all_gather_time_s(size: Real, n: Real, stride: Real, link: Link) -> Real:
    """Ring all-gather producing ``size`` bytes on every rank, with its fastest protocol."""
    ring = link.ring(n, stride)
    n_in, bw = ring.members_inside, ring.bus_bandwidth_bytes_per_s
    n_safe = ops.maximum(n, 1.0)
    n_out = n_safe / n_in
    steps = n_safe - 1.0
    out_steps = ops.where(n_out > 1.0, ops.minimum(n_out, steps), 0.0)
    t = _best(
        link,
        "ring",
        up_steps=steps - out_steps,
        out_steps=out_steps,
        size_over_bw=(n_safe - 1.0) / n_safe * size / bw,
        n_in=n_in,
        n_out=n_out,
        bw=bw,
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
