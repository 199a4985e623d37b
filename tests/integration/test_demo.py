"""``planner demo`` end to end: the local Slurm, a real PyTorch job with an
evaluation pause and a slowed rank, the planner watching it; the terminal shows the ETA band,
the straggler flag and the links; it cleans up after itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.slurm_stack import SlurmStack

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1200)
def test_the_demo_runs_the_whole_loop_and_cleans_up(slurm_stack: SlurmStack) -> None:
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("planner-demo-*"))
    result = subprocess.run(
        [sys.executable, "-m", "planner", "demo", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**os.environ, **slurm_stack.env},
        check=False,
    )
    out = result.stdout
    print(out[-6000:])
    assert result.returncode == 0, result.stderr[-3000:]
    job_id = re.search(r"submitted job (\d+)", out)
    assert job_id is not None, out
    url = re.search(r"the planner's view of it: (http://127\.0\.0\.1:\d+)/v1/jobs/(\d+)", out)
    assert url is not None, out
    assert url.group(2) == job_id.group(1)
    assert f"{url.group(1)}/metrics" in out
    etas = [line for line in out.splitlines() if " ETA " in line and "p10-p90" in line]
    assert len(etas) >= 5, out
    assert re.search(r"straggler flagged: rank 1 on node\d", out), out
    assert "the band narrows" in out
    narrowing = out.split("the band narrows", 1)[1].splitlines()[1:6]
    widths = [float(row.split()[3]) - float(row.split()[1]) for row in narrowing if "%" in row]
    assert len(widths) >= 3, out
    assert widths[-1] < widths[0], narrowing  # narrower late in the run than early
    assert out.rstrip().endswith("demo cleaned up")
    # what it started is gone: the service, its files; the job has ended
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url.group(1)}/healthz", timeout=2)
    after = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("planner-demo-*"))
    assert after == before
    queue = subprocess.run(
        ["squeue", "-h", "-j", job_id.group(1)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **slurm_stack.env},
        check=False,
    )
    assert queue.stdout.strip() == ""  # not pending or running (or already forgotten)
