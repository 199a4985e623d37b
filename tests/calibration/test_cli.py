"""planner calibrate fit / show on recorded samples; clear errors for malformed files."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from planner.calibration import OpKind, format_op_samples_csv
from planner.cli import app
from tests.calibration.conftest import make_samples

NCCL = Path(__file__).parents[1] / "data" / "calibration" / "nccl"
runner = CliRunner()


def test_fit_then_show(tmp_path: Path) -> None:
    samples = tmp_path / "ops.csv"
    ops = (OpKind.GEMM, OpKind.ADD, OpKind.GELU)
    samples.write_text(format_op_samples_csv(make_samples(scale=0.12, ops=ops)))
    out = tmp_path / "cal.json"
    nccl = str(NCCL / "all_reduce_perf_dgx_h100_8gpu.txt")
    res = runner.invoke(
        app, ["calibrate", "fit", "--samples", str(samples), "--nccl", nccl, "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "gemm/fwd" in res.output
    assert out.exists()
    shown = runner.invoke(app, ["calibrate", "show", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "held-out MAPE" in shown.output
    assert "all_reduce" in shown.output
    as_json = runner.invoke(app, ["calibrate", "show", str(out), "--json"])
    assert as_json.exit_code == 0
    assert '"operators"' in as_json.output


def test_malformed_inputs_exit_2_with_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("op,pass,dtype,m,n,k,time_median_s\ngemm,fwd,float32,1,1,,1e-3\n")
    res = runner.invoke(
        app, ["calibrate", "fit", "--samples", str(bad), "--out", str(tmp_path / "c.json")]
    )
    assert res.exit_code == 2
    assert "bad.csv:2: column 'k' is empty" in res.output
    garbage = tmp_path / "c.json"
    garbage.write_text("{}")
    res = runner.invoke(app, ["calibrate", "show", str(garbage)])
    assert res.exit_code == 2
    assert "not a calibration document" in res.output
    res = runner.invoke(app, ["calibrate", "sample", "--device", "tpu", "--out", str(tmp_path)])
    assert res.exit_code == 2
