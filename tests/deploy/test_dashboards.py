"""The Grafana dashboards: up to date with their builder, well formed, type-checked against
@grafana/schema (tsc), and every panel's PromQL returns data from a real Prometheus scraping a
real planner process (see conftest)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy import stack

from .conftest import PlannerStack

GRAFANA = stack.REPO / "deploy" / "grafana"
DASHBOARDS = sorted(GRAFANA.glob("planner-*.json"))
#: Values the test gives the dashboard variables (Grafana's "All" for cluster is .*).
VARIABLES = {"${datasource}": "", "$cluster": ".*", "${job_id}": "101", "$job_id": "101"}


def _panels() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in DASHBOARDS:
        for p in json.loads(path.read_text())["panels"]:
            yield path.name, p


def _expand(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def test_four_dashboards_are_up_to_date_with_the_builder() -> None:
    assert [p.name for p in DASHBOARDS] == [
        "planner-capacity.json",
        "planner-fleet-eta.json",
        "planner-job-detail.json",
        "planner-queue.json",
    ]
    proc = subprocess.run(
        [sys.executable, str(GRAFANA / "build.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_structure(path: Path) -> None:
    d = json.loads(path.read_text())
    assert d["uid"] == path.stem
    assert d["title"].startswith("Planner / ")
    source = d["templating"]["list"][0]
    assert {k: source[k] for k in ("type", "name", "label", "query", "hide")} == {
        "type": "datasource",
        "name": "datasource",
        "label": "Data source",
        "query": "prometheus",
        "hide": 0,
    }
    # The SDK also writes Grafana's defaults out: one data source at a time, kept in the URL.
    assert {
        k: v for k, v in source.items() if k not in ("type", "name", "label", "query", "hide")
    } == {
        "skipUrlSync": False,
        "multi": False,
        "allowCustomValue": True,
        "includeAll": False,
    }
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0, p["title"]
        assert 0 < g["w"] <= 24 - g["x"], p["title"]
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] == "row":  # a row header: titled, across the board, holds no query
            assert p["title"]
            assert (g["x"], g["w"], g["h"]) == (0, 24, 1)
            assert "targets" not in p
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"]
            assert "planner_" in t["expr"] or "planner:" in t["expr"]


def test_dashboards_type_check_against_grafana_schema() -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node/npm not installed (Debian nodejs npm): cannot run tsc")
    proc = subprocess.run(
        ["bash", str(GRAFANA / "check.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK (4 dashboards" in proc.stdout


def _wait_for_rules(prom: stack.PromStack) -> None:
    prom.wait_for("planner:job_completion_slip_seconds:1h", timeout_s=30)


@pytest.mark.integration
def test_every_panel_query_returns_planner_data(planner_stack: PlannerStack) -> None:
    prom = planner_stack.prom
    _wait_for_rules(prom)
    time.sleep(3)  # a few scrapes, so range queries have several points
    empty = []
    checked = 0
    for name, p in _panels():
        for t in p.get("targets", []):  # a row header has none
            expr = _expand(t["expr"])
            assert "$" not in expr, f"unexpanded variable in {expr}"
            result = prom.query(expr)
            if p["type"] == "timeseries":
                now = time.time()
                r = httpx.post(
                    f"{prom.url}/api/v1/query_range",
                    data={"query": expr, "start": now - 30, "end": now, "step": 1},
                    timeout=10,
                )
                r.raise_for_status()
                result = r.json()["data"]["result"]
            checked += 1
            if not result:
                empty.append(f"{name} / {p['title']} / {t['refId']}: {expr}")
    assert checked >= 50
    assert not empty, "queries without data:\n" + "\n".join(empty)


@pytest.mark.integration
def test_the_variable_queries_list_the_fed_cluster_and_job(planner_stack: PlannerStack) -> None:
    prom = planner_stack.prom
    clusters = {r["metric"]["cluster"] for r in prom.query("planner_job_info")}
    jobs = {r["metric"]["job_id"] for r in prom.query('planner_job_info{cluster=~".*"}')}
    assert clusters == {"feedcluster"}
    assert jobs == {"101", "102", "103"}
