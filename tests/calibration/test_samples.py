"""Operator sample CSV: round trip and clear errors for malformed files."""

from __future__ import annotations

import math

import pytest

from planner.calibration import OpKind, OpSample, Pass, format_op_samples_csv, read_op_samples_csv
from planner.errors import CalibrationError


def _sample(**kw: object) -> OpSample:
    base: dict[str, object] = {
        "op": OpKind.GEMM,
        "pass_": Pass.FORWARD,
        "dtype": "float32",
        "dims": {"m": 64.0, "n": 32.0, "k": 16.0},
        "time_median_s": 1e-4,
        "time_p25_s": 0.9e-4,
        "device": "cpu",
        "device_name": "X",
        "timestamp": "2026-01-01T00:00:00+00:00",
    }
    base.update(kw)
    return OpSample(**base)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field() -> None:
    samples = [
        _sample(),
        _sample(
            op=OpKind.ATTENTION,
            pass_=Pass.BACKWARD,
            dims={"batch": 2.0, "heads": 4.0, "seq": 128.0, "head_dim": 32.0},
        ),
    ]
    back = read_op_samples_csv(format_op_samples_csv(samples))
    assert back[0].dims == samples[0].dims
    assert back[1].key == samples[1].key
    assert back[0].time_median_s == samples[0].time_median_s
    assert math.isnan(back[0].time_p75_s)
    assert back[0].flop == 2 * 64 * 32 * 16


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("conv,fwd,float32,1,1,1,1e-3", "unknown op 'conv'"),
        ("gemm,bwd,float32,1,1,1,1e-3", "gemm has no bwd pass"),
        ("gemm,fwd,int8,1,1,1,1e-3", "dtype 'int8' unknown"),
        ("gemm,fwd,float32,,1,1,1e-3", "column 'm' is empty"),
        ("gemm,fwd,float32,1,1,1,-1", "time_median_s must be > 0"),
        ("gemm,fwd,float32,1,x,1,1e-3", "column 'n' is 'x', not a number"),
    ],
)
def test_malformed_rows_name_line_and_field(row: str, message: str) -> None:
    text = "op,pass,dtype,m,n,k,time_median_s\n" + row + "\n"
    with pytest.raises(CalibrationError, match=r"f\.csv:2: .*" + message.replace("(", r"\(")):
        read_op_samples_csv(text, source="f.csv")


def test_missing_columns_and_empty_file() -> None:
    with pytest.raises(CalibrationError, match="missing column"):
        read_op_samples_csv("op,dtype\n", source="f.csv")
    with pytest.raises(CalibrationError, match="no sample rows"):
        read_op_samples_csv("op,pass,dtype,time_median_s\n", source="f.csv")
