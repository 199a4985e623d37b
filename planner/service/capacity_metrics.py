"""The newest stored capacity review as Prometheus metrics, computed from the store at scrape
time (``CapacityCollector``; the table is its docstring)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from planner.service.job_fields import label
from planner.service.metrics import LastGood, _num
from planner.service.store import Store
from planner.service.stored_json import fields, rows

#: Most planned jobs exported with a deadline-miss probability (the most at risk first).
MAX_DEADLINE_JOBS = 100
#: Most weeks of the forecast exported per pool (13: a 90-day review).
MAX_FORECAST_WEEKS = 13
_QUANTILE_LABELS = (("0.1", "p10"), ("0.5", "p50"), ("0.9", "p90"))


def _week(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d")


class CapacityCollector(Collector):
    """The newest stored capacity review (``review.schedule``) as metrics. Cardinality is
    bounded: pools x 13 weeks x 3 quantiles, 100 deadline jobs, the scenarios and GPU types of
    the review.

    | metric | type | meaning |
    | --- | --- | --- |
    | ``planner_capacity_forecast_gpus{pool,quantile,week}`` | gauge | occupied GPUs (mean over
      the week) at the 10/50/90th percentile, base scenario; ``week`` is its first day (UTC) |
    | ``planner_capacity_forecast_capacity_gpus{pool,week}`` | gauge | GPUs installed (mean) |
    | ``planner_plan_deadline_miss_probability{job}`` | gauge | probability of missing the
      deadline (jobs with one, base scenario) |
    | ``planner_capacity_expected_deadline_misses{scenario}`` | gauge | expected missed
      deadlines per scenario |
    | ``planner_capacity_sizing_gpus{gpu,pool}`` | gauge | smallest addition meeting every
      deadline at p90 (absent when none does) |
    | ``planner_capacity_review_timestamp_seconds`` | gauge | when the review was made |

    A pending job's predicted start (``planner_job_predicted_start_timestamp_seconds``) is a
    job series of ``planner.service.metrics.PlannerCollector`` (bounded job series).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cached: tuple[int, float, Mapping[str, object]] | None = None
        self._last = LastGood("the capacity review's metrics")

    def _latest(self) -> tuple[float, Mapping[str, object]] | None:
        head = self.store.latest_review(with_result=False)
        if head is None:
            return None
        if self._cached is None or self._cached[0] != head.id:
            row = self.store.latest_review(with_result=True)
            if row is None or row.result is None:
                return None
            self._cached = (row.id, row.made_at_s, row.result)
        return self._cached[1], self._cached[2]

    def collect(self) -> Iterator[Metric]:
        """The review's families; while the store fails, those of its last good read."""
        yield from self._last.read(self._from_store)

    def _from_store(self) -> Iterator[Metric]:
        gpus = GaugeMetricFamily(
            "planner_capacity_forecast_gpus",
            "Occupied GPUs of the pool in the week (mean over the week), by quantile of the "
            "capacity review's Monte Carlo samples (base scenario).",
            labels=["pool", "quantile", "week"],
        )
        capacity = GaugeMetricFamily(
            "planner_capacity_forecast_capacity_gpus",
            "GPUs installed in the pool in the week (mean over the week), capacity review.",
            labels=["pool", "week"],
        )
        miss = GaugeMetricFamily(
            "planner_plan_deadline_miss_probability",
            "Probability that the job misses its deadline (capacity review, base scenario).",
            labels=["job"],
        )
        expected = GaugeMetricFamily(
            "planner_capacity_expected_deadline_misses",
            "Expected number of missed deadlines in the scenario of the capacity review.",
            labels=["scenario"],
        )
        sizing = GaugeMetricFamily(
            "planner_capacity_sizing_gpus",
            "Smallest number of GPUs of the type added to the pool that meets every deadline "
            "at p90 (capacity review's sizing search).",
            labels=["gpu", "pool"],
        )
        made = GaugeMetricFamily(
            "planner_capacity_review_timestamp_seconds",
            "When the newest stored capacity review was made, Unix epoch seconds.",
        )
        latest = self._latest()
        if latest is not None:
            made_at, result = latest
            made.add_metric([], made_at)
            scenarios = rows(result.get("scenarios"))
            base = scenarios[0] if scenarios else {}
            weeks: dict[str, list[Mapping[str, object]]] = {}
            for week in rows(base.get("pool_weeks")):
                weeks.setdefault(str(week.get("pool")), []).append(week)
            for pool, pool_weeks in weeks.items():
                for week in pool_weeks[:MAX_FORECAST_WEEKS]:
                    start_s = _num(week.get("week_start_s"))
                    if start_s is None:
                        continue
                    week_label = _week(start_s)
                    occupied = fields(week.get("occupied_gpus"))
                    for q, key in _QUANTILE_LABELS:
                        value = _num(occupied.get(key))
                        if value is not None:
                            gpus.add_metric([label(pool), q, week_label], value)
                    cap = _num(week.get("capacity_gpu_hours"))
                    if cap is not None:
                        capacity.add_metric([label(pool), week_label], cap / (7 * 24.0))
            at_risk = [
                (probability, job)
                for job in rows(base.get("jobs"))
                if (probability := _num(job.get("miss_probability"))) is not None
            ]
            at_risk.sort(key=lambda pair: -pair[0])
            for probability, job in at_risk[:MAX_DEADLINE_JOBS]:
                miss.add_metric([label(job.get("name"))], probability)
            for row in rows(result.get("comparison")):
                value = _num(row.get("expected_deadline_misses"))
                if value is not None:
                    expected.add_metric([label(row.get("scenario"))], value)
            for answer in rows(result.get("sizing")):
                added = _num(answer.get("gpus_added"))
                if added is not None:
                    sizing.add_metric([label(answer.get("gpu")), label(answer.get("pool"))], added)
        yield from (gpus, capacity, miss, expected, sizing, made)
