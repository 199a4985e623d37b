"""NeMo Automodel's FSDP2 under gradient accumulation and pipeline parallelism: gradients
accumulated unsharded and reduce-scattered once per run of backward passes, parameters kept
gathered through a pipeline schedule run (``FrameworkProfile.zero3_accumulate_unsharded``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planner.perf import DefaultEfficiency, batch, predict, readers
from planner.perf import collectives as coll
from planner.perf.batch import ScenarioArrays
from planner.perf.engine import link_of
from planner.perf.frameworks import FRAMEWORK_PROFILES, FrameworkProfile, profile_of
from planner.perf.parameters import stage_params
from planner.scenario import parse_scenario
from planner.specs.scenario import Framework, Scenario

_AUTOMODEL = profile_of(Framework.AUTOMODEL)


def _scenario(*, samples_per_rank: int, pipeline: bool, fp32: bool, **par: Any) -> Scenario:
    """DeepSeek-V3 on 256 H100s as Automodel shards it (FSDP2 over the data-parallel ranks,
    expert parallel 64), ``samples_per_rank`` microbatches of 1 per data-parallel rank."""
    pp = 4 if pipeline else 1
    dp = 256 // pp
    layout: dict[str, Any] = {
        "pipeline_parallel": pp,
        "data_parallel": dp,
        "expert_parallel": 64,
        "micro_batch_size": 1,
        "global_batch_size": dp * samples_per_rank,
        "zero_stage": 3,
        "recompute": "full",
        "grad_reduce_in_fp32": fp32,
        **par,
    }
    if pipeline:
        layout["virtual_pipeline"] = 8
    return parse_scenario(
        {
            "model": {"preset": "deepseek-v3", "seq_length": 4096, "mtp_num_layers": 0},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 256},
            "parallelism": layout,
            "training": {"framework": "automodel"},
        }
    )


def _with(monkeypatch: pytest.MonkeyPatch, profile: FrameworkProfile) -> None:
    """Every scenario predicted next runs under ``profile``."""
    monkeypatch.setattr(batch, "profile_of", lambda framework: profile)
    monkeypatch.setattr(readers, "profile_of", lambda framework: profile)


def _dp_s(scenario: Scenario) -> float:
    return predict(scenario).breakdown.dp_comm_exposed_s


def test_only_automodel_accumulates_unsharded_fsdp_gradients() -> None:
    assert {f for f, p in FRAMEWORK_PROFILES.items() if p.zero3_accumulate_unsharded} == {
        Framework.AUTOMODEL
    }


def test_a_pipeline_run_gathers_and_reduces_once_whatever_its_microbatches() -> None:
    """Under a pipeline, each unit is gathered once per schedule run and kept, and reduced once
    per run: with a 16-bit reduction (nothing to accumulate in another dtype) twice the
    microbatches in the one run cost no more data-parallel time. With an fp32 reduce dtype
    every microbatch's 16-bit gradients are added into the fp32 accumulator, an HBM pass per
    microbatch: there they do."""
    times = {}
    for fp32 in (False, True):
        for n in (8, 16):
            s = _scenario(samples_per_rank=n, pipeline_batch_size=n, pipeline=True, fp32=fp32)
            times[fp32, n] = _dp_s(s)
    assert times[False, 8] > 0.0
    assert times[False, 16] == pytest.approx(times[False, 8], rel=1e-9)
    assert times[True, 16] > times[True, 8]


def test_each_pipeline_run_pays_its_reduction_whole() -> None:
    """The compute stream waits for each run's reduce-scatters: with every hideable collective
    hidden (``dp_overlap_fraction`` 1), each of the two runs of the schedule still pays one
    reduce-scatter of the busiest stage's dense gradients, block by block (the experts, one
    GPU each at expert parallel 64 over 64 data-parallel ranks, reduce nothing)."""
    s = _scenario(samples_per_rank=16, pipeline_batch_size=8, pipeline=True, fp32=False)
    eff = DefaultEfficiency.from_constants({"dp_overlap_fraction": 1.0})
    a = ScenarioArrays.from_scenario(s)
    params = stage_params(a).busiest()
    blocks = params.layers
    reduce = blocks * coll.reduce_scatter_time_s(
        2.0 * params.dense / blocks, 64, 1.0, link_of(a, eff)
    )
    assert reduce > 0.0
    assert predict(s, eff).breakdown.dp_comm_exposed_s == pytest.approx(2.0 * reduce, rel=1e-6)


def test_without_a_pipeline_the_reduction_runs_once_per_iteration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a pipeline the gathers stay per microbatch, the reduce-scatter runs only on the
    last accumulation batch: less exposed time than reducing after every microbatch."""
    s = _scenario(samples_per_rank=8, pipeline=False, fp32=False)
    once = _dp_s(s)
    _with(monkeypatch, replace(_AUTOMODEL, zero3_accumulate_unsharded=False))
    every_microbatch = _dp_s(s)
    assert 0.0 < once < every_microbatch
