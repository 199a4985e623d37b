"""The HTML report in a real headless Chromium (Debian's ``chromium``), driven over the
DevTools protocol (``tests.capacity.chromium``): it loads from a file with no network request,
every chart is drawn (plotly SVG in each chart div), nothing is logged as an error, and a
screenshot is kept under the test's tmp dir (its path is printed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capacity.chromium import CHROMIUM, render

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "deploy" / "examples"


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (deploy/dev/install-deps.sh installs it)"
)
def test_report_renders_in_chromium(tmp_path: Path) -> None:
    out = tmp_path / "review"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "planner",
            "review",
            str(EXAMPLES / "fleet.yaml"),
            str(EXAMPLES / "plan.yaml"),
            "--jobs",
            str(EXAMPLES / "jobs-snapshot.json"),
            "--what-if",
            str(EXAMPLES / "what-if-more-h100.yaml"),
            "--out",
            str(out),
            "--samples",
            "40",
            "--no-sizing",
        ],
        check=True,
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    shown = render(out / "review.html", tmp_path)
    print(f"screenshot: {shown.screenshot}")
    assert shown.divs == 7  # comparison, occupancy, Gantt, weeks, and one occupancy per what-if (3)
    assert shown.svgs >= shown.divs
    assert shown.drawn == shown.divs
    assert shown.tables >= 5
    assert shown.errors == []
    assert all(url.startswith(("file:", "data:", "blob:")) for url in shown.requests), (
        shown.requests
    )
    assert shown.screenshot.stat().st_size > 50_000


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (deploy/dev/install-deps.sh installs it)"
)
def test_review_of_a_fleet_of_clusters_renders_in_chromium(tmp_path: Path) -> None:
    """Two Slurm clusters and one Kueue cluster, checkpointed jobs with failures and
    requeues, a what-if that layout: best repairs: the page draws every chart and shows the
    goodput, the ClusterQueues and the failure model."""
    out = tmp_path / "review"
    subprocess.run(
        [
            sys.executable, "-m", "planner", "review",
            str(EXAMPLES / "fleet-clusters.yaml"), str(EXAMPLES / "plan-clusters.yaml"),
            "--what-if", str(EXAMPLES / "what-if-clusters.yaml"),
            "--out", str(out), "--samples", "30", "--no-sizing",
        ],
        check=True, capture_output=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    page = (out / "review.html").read_text()
    assert "ClusterQueues (base)" in page
    assert "goodput" in page
    assert "419 unexpected interruptions in 54 days" in page
    shown = render(out / "review.html", tmp_path)
    print(f"screenshot: {shown.screenshot}")
    assert shown.divs == 6  # comparison, occupancy, Gantt, weeks, one occupancy per what-if (2)
    assert shown.drawn == shown.divs
    assert shown.tables >= 6
    assert shown.errors == []
