"""A finished job whose fields cannot be learnt from is kept as a skipped run whose reason
names every field that stops it (each message cut to a bounded length), never a traceback,
and the cluster's other runs are fitted as before."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from planner.service.learning import REASON_CHARS, Learner, LearningConfig, run_row
from planner.service.models import JobRow, ObservedRunRow
from planner.service.store.sql import SqlStore

from .conftest import Clock, JobFactory, ScriptedSource
from .test_learning_service import SLOWER, learn, predict, run_to_the_end, running_job
from .test_learning_service import scenario_doc as megatron_doc
from .test_service import app_for


def finished(
    scenario: dict[str, Any],
    step_s: float | None,
    *,
    iterations: int = 100,
    ran_s: float | None = None,
    prediction: dict[str, object] | None = None,
) -> JobRow:
    """A finished job's row: its scenario, the ETA's step time, the iterations its log
    showed, and, with ``ran_s``, how long it ran (start to end, s)."""
    return JobRow(
        scheduler="slurm",
        cluster="test",
        job_id="7",
        scenario=scenario,
        eta={"observed_step_time_s": step_s},
        iteration=iterations,
        state={} if ran_s is None else {"start_time_s": 1000.0},
        ended_s=None if ran_s is None else 1000.0 + ran_s,
        prediction=prediction,
    )


def reason_of(row: JobRow) -> str | None:
    run = run_row(row, min_iterations=20, now_s=0.0)
    assert run is not None
    return run.skip_reason


def names(reason: str | None, fields: list[str]) -> bool:
    """Whether a skip reason is one ``<field>: <why>`` per field of ``fields``, in that order,
    joined by ``"; "``, and names none of the other ``FIELDS``."""
    assert reason is not None
    at = [0 if i == 0 else reason.find(f"; {f}: ") for i, f in enumerate(fields)]
    others = [f for f in FIELDS if f not in fields and f"{f}: " in reason]
    return reason.startswith(f"{fields[0]}: ") and -1 not in at and at == sorted(at) and not others


FIELDS = ("iteration_time_s", "num_iterations", "hardware.gpu", "model.num_layers")
"""The fields the reasons below may name."""


@pytest.mark.parametrize(
    ("change", "step_s", "fields"),
    [
        (
            {"hardware": {"gpu": "zz9000", "num_gpus": 2}},
            None,
            ["iteration_time_s", "hardware.gpu"],
        ),
        ({"model": {"num_layers": "two"}}, None, ["iteration_time_s", "model.num_layers"]),
        ({"model": {"num_layers": -2}}, -1.0, ["iteration_time_s", "model.num_layers"]),
        ({"model": {"num_layers": 2}}, math.nan, ["iteration_time_s"]),
        ({"hardware": {"gpu": "zz9000", "num_gpus": 2}}, 0.5, ["hardware.gpu"]),
    ],
)
def test_a_skipped_run_names_every_field_that_stops_it(
    change: dict[str, dict[str, object]], step_s: float | None, fields: list[str]
) -> None:
    doc = megatron_doc("a", 2, 128)
    for part, values in change.items():
        doc[part] = {**doc[part], **values}
    assert names(reason_of(finished(doc, step_s)), fields)


def test_three_stops_are_named_in_order() -> None:
    doc = megatron_doc("a", 2, 128)
    doc["model"]["num_layers"] = "x"
    reason = reason_of(finished(doc, -1.0, iterations=3))
    assert names(reason, ["iteration_time_s", "model.num_layers", "num_iterations"])


def test_each_field_s_message_is_bounded() -> None:
    """A message quoting what the user wrote (a 100 000-character value, an unknown GPU's
    name as long) keeps ``REASON_CHARS`` of it; the other field is still named."""
    doc = megatron_doc("a", 2, 128)
    doc["model"]["num_layers"] = "x" * 100_000
    doc["hardware"]["gpu"] = "g" * 100_000
    reason = reason_of(finished(doc, None))
    assert reason is not None
    assert names(reason, ["iteration_time_s", "model.num_layers"])
    assert len(reason) <= 2 * REASON_CHARS + 2


def test_a_step_longer_than_the_job_ran_is_skipped() -> None:
    doc = megatron_doc("a", 2, 128)
    assert reason_of(finished(doc, 0.5, ran_s=600.0)) is None
    reason = reason_of(finished(doc, 1e300, ran_s=600.0))
    assert names(reason, ["iteration_time_s"])
    assert "longer than the job ran (600 s)" in str(reason)


def test_a_scenario_too_large_for_its_step_is_skipped_and_the_other_runs_are_fitted(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """Two runs ``SLOWER`` times slower than the model, and a job whose scenario file
    describes a model of 10^9 layers while its log shows the others' step: its model FLOPs in
    that step would be far beyond its GPUs' peak, so it is a skipped run naming the step time,
    and the fit holds the two good runs' pace (fitted with them, that one run left the key's
    compute factor at 1.0, the held-out error at 1.2e8 times the step and the fit not applied:
    the cluster learnt nothing while the run was among its newest)."""
    good = [megatron_doc("a", 2, 128), megatron_doc("b", 4, 192)]
    huge = copy.deepcopy(good[0])
    huge["name"] = "huge"
    huge["model"]["num_layers"] = 10**9
    with app_for(db_url, source, clock) as client:
        model_step = predict(client, good[0])["iteration_time_s"]
        for number, doc in enumerate([*good, huge], start=1):
            model_s = predict(client, doc)["iteration_time_s"] if doc is not huge else model_step
            job, log = running_job(cluster_root, make_job, clock, doc, str(number))
            run_to_the_end(client, source, clock, job, log, step_ms=1000 * SLOWER * model_s)
            clock.now += 60
        assert learn(client) == {"slurm/test": "ok"}
        (listing,) = client.get("/v1/calibrations").json()["learnt"]
        assert listing["num_runs"] == len(good)
        (skipped,) = listing["skipped"]
        assert skipped["job_id"] == "3"
        assert names(skipped["reason"], ["iteration_time_s"])
        assert "dense peak" in skipped["reason"]
        (key,) = listing["keys"]
        assert key["num_runs"] == len(good)
        assert key["compute_factor"] == pytest.approx(SLOWER, rel=0.05)
        assert listing["held_out_error_ratio"] < 0.05
        assert listing["model_error_ratio"] == pytest.approx(1 - 1 / SLOWER, rel=0.05)


def test_a_step_faster_than_the_gpus_peak_allows_is_skipped() -> None:
    """The job's model prediction ran its model FLOPs at MFU 0.5 in 1 s: a measured step of
    0.6 s is MFU 0.83, one of 0.4 s would be 1.25, beyond the GPUs' dense peak."""
    doc = megatron_doc("a", 2, 128)
    model: dict[str, object] = {"iteration_time_s": 1.0, "mfu": 0.5}
    assert reason_of(finished(doc, 0.6, prediction=model)) is None
    reason = reason_of(finished(doc, 0.4, prediction=model))
    assert names(reason, ["iteration_time_s"])
    assert "1.25 times its GPUs' dense peak" in str(reason)


def test_a_scenario_nested_too_deep_to_quote_is_skipped_naming_it() -> None:
    """A value nested 100 000 objects deep: the parser's message quoting it cannot be made
    (``RecursionError``), and the run is kept naming the scenario instead of raising."""
    doc = megatron_doc("a", 2, 128)
    nested: dict[str, object] = {}
    inner = nested
    for _ in range(100_000):
        inner["a"] = inner = {}
    doc["model"]["num_layers"] = nested
    reason = reason_of(finished(doc, 0.5))
    assert str(reason).startswith("scenario: cannot be read: RecursionError")


def test_a_key_the_user_wrote_is_named_printable() -> None:
    """An unknown field whose name holds a NUL and a newline (a YAML file can write both):
    the reason names it with them escaped, and still gives the step time's reason."""
    doc = megatron_doc("a", 2, 128)
    doc["model"]["bad\x00key\n"] = 1
    reason = reason_of(finished(doc, None))
    assert names(reason, ["iteration_time_s", "model.bad\\x00key\\n"])
    assert str(reason).isprintable()


def test_a_stored_run_the_fit_refuses_is_listed_with_a_bounded_reason(tmp_path: Path) -> None:
    """A run stored as usable by an earlier version whose scenario the parser now refuses,
    quoting a 100 000-character value: the fit lists it with its reason cut to
    ``REASON_CHARS`` and fits the cluster's other run."""
    store = SqlStore(f"sqlite:///{tmp_path / 'planner.db'}")
    store.migrate()
    bad = megatron_doc("bad", 2, 128)
    bad["model"]["num_layers"] = "x" * 100_000
    with store.unit_of_work() as uow:
        for job_id, doc in (("1", megatron_doc("a", 2, 128)), ("2", bad)):
            uow.put_observed_run(
                ObservedRunRow(
                    scheduler="slurm",
                    cluster="test",
                    job_id=job_id,
                    recorded_s=1.0,
                    gpu="h100-sxm",
                    scenario=doc,
                    iteration_time_s=0.01,
                    num_iterations=100,
                    skip_reason=None,
                )
            )
    assert Learner(store, lambda: 100.0, LearningConfig()).run() == {"slurm/test": "ok"}
    row = store.calibration("observed/slurm/test")
    assert row is not None
    assert row.state["num_runs"] == 1
    skipped: Any
    (skipped,) = row.state["skipped"]  # type: ignore[misc]
    assert skipped["job_id"] == ""
    assert "model.num_layers: must be an integer" in skipped["reason"]
    assert len(skipped["reason"]) == REASON_CHARS
    store.dispose()


def test_a_job_that_never_started_is_not_a_run() -> None:
    """A queued job that ended without starting (cancelled, or gone from its scheduler's
    list) has nothing to learn from and is not kept, not even as a skipped run; one that
    started and made no progress is kept as skipped, naming why."""
    never = finished(megatron_doc("a", 2, 128), None, iterations=0)
    assert run_row(never, min_iterations=20, now_s=0.0) is None
    started = finished(megatron_doc("a", 2, 128), None, iterations=0, ran_s=30.0)
    assert names(reason_of(started), ["iteration_time_s", "num_iterations"])
