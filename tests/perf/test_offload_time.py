"""The time activation offloading adds (``planner.perf.offload``): each layer's copy to host
memory and back stalls the compute stream by what the layers of its window do not hide, at the
GPU's host-link rate (``GpuSpec.host_link_bandwidth_bytes_per_s``)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from planner.catalog import gpu_catalog
from planner.errors import SpecError
from planner.perf import DefaultEfficiency, ops, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.memory import layer_activations
from planner.perf.offload import offload_exposed_s
from planner.perf.operators import layer_times, operator_times
from planner.scenario import parse_scenario
from planner.specs import Scenario

L = 32  # llama3-8b layers


def _scenario(gpu: str = "h100-sxm", **par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "llama3-8b"},
            "hardware": {"gpu": gpu, "num_gpus": 8},
            "parallelism": {"micro_batch_size": 2, "global_batch_size": 32, **par},
            "training": {"framework": "nemo"},
        }
    )


def _with_host_link(scenario: Scenario, bytes_per_s: float) -> Scenario:
    gpu = dataclasses.replace(scenario.hardware.gpu, host_link_bandwidth_bytes_per_s=bytes_per_s)
    hardware = dataclasses.replace(scenario.hardware, gpu=gpu)
    return dataclasses.replace(scenario, hardware=hardware)


def _window_layers(layers: int, offloaded: int) -> list[int]:
    """Layers of compute beside each offloaded layer's copy: Transformer Engine's window of
    copy ``i`` ends at layer ``(L // N)(i + 1) - 1 + min(i + 1, L % N)``; copy 0 starts after
    layer 0, copy ``i`` when window ``i - 1`` ends."""
    q, r = divmod(layers, offloaded)
    ends = [q * (i + 1) - 1 + min(i + 1, r) for i in range(offloaded)]
    return [ends[0]] + [b - a for a, b in itertools.pairwise(ends)]


def test_the_stall_is_what_each_window_does_not_hide_both_ways() -> None:
    """At 4 GB/s every copy outlasts its window; the added time is the sum over copies of copy
    minus the window's forward (then backward) compute, per microbatch."""
    eff = DefaultEfficiency()
    base = _scenario()
    for offloaded in (8, 12, 31):
        s = _with_host_link(_scenario(activation_offload_layers=offloaded), 4e9)
        a = ScenarioArrays.from_scenario(s)
        layer = layer_times(operator_times(a, eff), a)
        copy_s = float(layer_activations(a, eff).per_layer) / 4e9
        windows = _window_layers(L, offloaded)
        assert sum(windows) == L - 1
        per_microbatch = sum(
            max(copy_s - k * layer.forward_s, 0.0) + max(copy_s - k * layer.backward_s, 0.0)
            for k in windows
        )
        assert per_microbatch > 0
        added = predict(s).iteration_time_s - predict(_with_host_link(base, 4e9)).iteration_time_s
        assert added == pytest.approx(a.num_microbatches * per_microbatch, rel=1e-9)


def test_a_slower_host_link_makes_an_offloading_scenario_slower() -> None:
    offloading = _scenario(activation_offload_layers=16)
    times = [
        predict(_with_host_link(offloading, rate)).iteration_time_s
        for rate in (450e9, 64e9, 16e9, 4e9)
    ]
    assert times == sorted(times)
    assert times[-1] > times[1] > times[0]
    # hidden entirely at NVLink-C2C's rate: the same time as keeping the activations
    assert times[0] == pytest.approx(predict(_scenario()).iteration_time_s, rel=1e-12)


def test_no_time_without_offloading_whatever_the_link() -> None:
    kept = _scenario()
    assert predict(_with_host_link(kept, 1e6)).iteration_time_s == pytest.approx(
        predict(kept).iteration_time_s, rel=1e-12
    )
    a = ScenarioArrays.from_scenario(kept)
    assert offload_exposed_s(a, layer_bytes=1e12, forward_s=1e-3, backward_s=2e-3) == 0.0


def test_batch_and_one_scenario_forms_agree() -> None:
    eff = DefaultEfficiency()
    scenarios = [
        _with_host_link(_scenario(activation_offload_layers=n), 8e9) for n in (0, 5, 16, 31)
    ]
    batch = ScenarioArrays.from_scenarios(scenarios)
    layer = layer_times(operator_times(batch, eff), batch)
    got = ops.array(
        offload_exposed_s(
            batch,
            layer_bytes=layer_activations(batch, eff).per_layer,
            forward_s=layer.forward_s,
            backward_s=layer.backward_s,
        )
    )
    for i, s in enumerate(scenarios):
        one = ScenarioArrays.from_scenario(s)
        one_layer = layer_times(operator_times(one, eff), one)
        want = offload_exposed_s(
            one,
            layer_bytes=layer_activations(one, eff).per_layer,
            forward_s=one_layer.forward_s,
            backward_s=one_layer.backward_s,
        )
        assert float(got[i]) == pytest.approx(want, rel=1e-12)
    assert float(got[0]) == 0.0
    assert float(got[3]) > 0.0


def test_a_gpu_without_a_host_link_figure_refuses_offloading() -> None:
    missing = [
        key for key, gpu in gpu_catalog().items() if gpu.host_link_bandwidth_bytes_per_s is None
    ]
    assert missing, "the test needs a catalog GPU without a host-link figure"
    gpu = missing[0]
    _scenario(gpu)  # fine without offloading
    with pytest.raises(SpecError, match="host-link bandwidth") as info:
        _scenario(gpu, activation_offload_layers=4)
    assert info.value.field == "parallelism.activation_offload_layers"


def test_every_host_link_in_the_catalog_has_a_source() -> None:
    for key, gpu in gpu_catalog().items():
        if gpu.host_link_bandwidth_bytes_per_s is not None:
            assert "host_link_bandwidth_gb_per_s" in dict(gpu.sources), key
