"""``POST /v1/calibrations`` is bounded in value and time: a sample beyond a physical limit is
refused with a 422 naming its column, an upload has at most ``limits.calibration_max_rows``
rows per CSV and ``limits.calibration_time_budget_s`` CPU seconds, and the fit stops within a
second of its client leaving.

Probes of the finding: ``m = n = k = 1e30`` was stored ("GEMM peak 2.0e83 GFLOP/s"); a 42 MB
upload ran over five minutes at 1.5-1.8 GB and kept a core busy after its client left."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from planner.calibration import OpSample, format_op_samples_csv
from planner.calibration.ops import OpKind, Pass

from .asgi_probe import contention, send_request
from .conftest import OPERATOR_TOKEN, Clock, ScriptedSource, bearer
from .test_service import app_for

HEADER = "op,pass,dtype,m,n,k,time_median_s,device,device_name"
COLLECTIVES = "collective,num_ranks,tier,size_bytes,time_s"


def gemm_samples(num_rows: int) -> str:
    """``num_rows`` GEMM samples of a 5e11 FLOP/s CPU, shapes 16 to 8192, 10 % noise."""
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(num_rows):
        m, n, k = (int(2 ** rng.uniform(4, 13)) for _ in range(3))
        time_s = 2 * m * n * k / 5e11 * float(np.exp(rng.normal(0, 0.1))) + 5e-6
        dims = {"m": m, "n": n, "k": k}
        rows.append(
            OpSample(
                op=OpKind.GEMM,
                pass_=Pass.FORWARD,
                dtype="float32",
                dims=dims,
                time_median_s=time_s,
                device="cpu",
                device_name="probe",
            )
        )
    return format_op_samples_csv(rows)


def upload(
    client: TestClient, ops: str, collectives: str | None = None, *, name: str = "probe"
) -> Any:
    files = {"op_samples": ("op_samples.csv", ops, "text/csv")}
    if collectives is not None:
        files["collective_samples"] = ("collective_samples.csv", collectives, "text/csv")
    return client.post(
        "/v1/calibrations", files=files, data={"name": name}, headers=bearer(OPERATOR_TOKEN)
    )


@pytest.mark.parametrize(
    ("row", "error"),
    [
        (
            "gemm,fwd,float32,1e30,1e30,1e30,0.001,cpu,x",
            "op_samples.csv:2: column 'm' is 1e+30, over the physical limit of 2,147,483,647 "
            "(cuBLAS and PyTorch take a GEMM's m, n and k as 32-bit ints)",
        ),
        (
            "gemm,fwd,float32,65536,65536,65536,1e-6,cpu,x",
            "op_samples.csv:2: column 'flop / time_median_s (from m, n, k)' is 5.6295e+20, "
            "over the physical limit of 1e+17",
        ),
        (
            "gemm,fwd,float32,64,64,64,1e-15,cpu,x",
            "op_samples.csv:2: column 'time_median_s' is 1e-15 s, outside the physical limits",
        ),
        (
            "gemm,fwd,float32,64,64,64,1e9,cpu,x",
            "op_samples.csv:2: column 'time_median_s' is 1e+09 s, outside the physical limits",
        ),
    ],
)
def test_an_absurd_sample_is_refused_naming_its_column(
    db_url: str, source: ScriptedSource, clock: Clock, row: str, error: str
) -> None:
    with app_for(db_url, source, clock) as client:
        answer = upload(client, f"{HEADER}\n{row}\n")
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"].startswith(error)
        assert client.get("/v1/calibrations").json()["operators"] == []  # nothing stored


def test_an_absurd_collective_is_refused_naming_its_column(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    ops = gemm_samples(8)
    with app_for(db_url, source, clock) as client:
        big = upload(client, ops, f"{COLLECTIVES}\nall_reduce,8,scale_up,1e30,0.01\n")
        fast = upload(client, ops, f"{COLLECTIVES}\nall_reduce,8,scale_up,1e12,1e-6\n", name="b")
    assert big.status_code == 422
    assert big.json()["error"].startswith(
        "collective_samples.csv:2: column 'size_bytes' is 1e+30, over the physical limit"
    )
    assert fast.status_code == 422
    assert "column 'busbw (size_bytes / time_s x bus factor)' is 1.75e+18" in fast.json()["error"]


def test_an_upload_has_at_most_the_rows_of_its_budget(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    with app_for(db_url, source, clock, limits={"calibration_max_rows": 50}) as client:
        fits = upload(client, gemm_samples(50))
        over = upload(client, gemm_samples(51), name="over")
    assert fits.status_code == 200, fits.text
    assert over.status_code == 422
    assert over.json()["error"] == (
        "op_samples.csv:52: more than the 50-row limit (limits.calibration_max_rows); send "
        "fewer rows or raise limits.calibration_max_rows"
    )


def test_a_fit_past_its_cpu_budget_is_stopped_with_the_budget_named(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    with app_for(db_url, source, clock, limits={"calibration_time_budget_s": 0.5}) as client:
        answer = upload(client, gemm_samples(3000))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"].startswith(
        "limits.calibration_time_budget_s: parsing and fitting the samples ran past the budget "
        "of 0.5 CPU seconds"
    )


def test_a_fit_stops_within_a_second_of_its_client_leaving(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    """6,000 rows take about 15 CPU seconds to fit; the client leaves after 0.5 s."""
    boundary = "probe-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="op_samples"; '
        'filename="op_samples.csv"\r\nContent-Type: text/csv\r\n\r\n'
        + gemm_samples(6000)
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nbig\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    headers = {
        "content-type": f"multipart/form-data; boundary={boundary}",
        **{k.lower(): v for k, v in bearer(OPERATOR_TOKEN).items()},
    }
    with app_for(db_url, source, clock) as client:
        left = client.portal.call(  # type: ignore[union-attr]
            lambda: send_request(
                client.app, "POST", "/v1/calibrations", body, headers=headers, leave_after_s=0.5
            )
        )
        assert client.app.state.pool.admitted == 0  # type: ignore[attr-defined]
        assert client.get("/v1/calibrations").json()["operators"] == []
    # Within a second of the client leaving, on the wall clock of a host as busy as now.
    assert left.returned_after_s < 0.5 + 1.0 * contention(), left.returned_after_s
