"""The sampling harness on this CPU with a tiny design (one small shape per op)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adapters.sampling import SampleRun, read_sample_run, sample_operators, write_sample_run
from planner.calibration import OP_PASSES, DesignPoint, OpKind
from planner.errors import CalibrationError

TINY = [
    DesignPoint(op=OpKind.GEMM, dtype="float32", dims={"m": 32, "n": 16, "k": 16}),
    DesignPoint(
        op=OpKind.ATTENTION,
        dtype="float32",
        dims={"batch": 1, "heads": 2, "seq": 16, "head_dim": 8},
    ),
    DesignPoint(op=OpKind.LAYER_NORM, dtype="float32", dims={"tokens": 16, "width": 16}),
    DesignPoint(op=OpKind.RMS_NORM, dtype="float32", dims={"tokens": 16, "width": 16}),
    DesignPoint(op=OpKind.GELU, dtype="float32", dims={"tokens": 16, "width": 16}),
    DesignPoint(op=OpKind.SILU, dtype="float32", dims={"tokens": 16, "width": 16}),
    DesignPoint(op=OpKind.SWIGLU, dtype="float32", dims={"tokens": 16, "width": 16}),
    DesignPoint(op=OpKind.ADD, dtype="float32", dims={"tokens": 16, "width": 16}),
    DesignPoint(
        op=OpKind.EMBEDDING, dtype="float32", dims={"tokens": 16, "width": 16, "vocab": 64}
    ),
    DesignPoint(op=OpKind.CROSS_ENTROPY, dtype="float32", dims={"tokens": 16, "vocab": 64}),
    DesignPoint(op=OpKind.ADAM, dtype="float32", dims={"num_params": 1000}),
]


@pytest.fixture(scope="module")
def torch_imported() -> None:
    """Import torch and its optimizers once (about 2-3 s) outside the timed tests."""
    import torch
    import torch.optim

    torch.nn.functional.scaled_dot_product_attention(*(torch.ones(1, 1, 4, 4),) * 3)


@pytest.mark.usefixtures("torch_imported")
def test_every_op_and_pass_is_timed_with_provenance(tmp_path: Path) -> None:
    seen: list[int] = []
    samples = sample_operators(
        TINY,
        num_threads=1,
        num_warmup=1,
        min_repeats=3,
        max_repeats=3,
        min_time_s=0.0,
        progress=lambda i, total, s: seen.append(i),
    )
    expected = sum(len(OP_PASSES[p.op]) for p in TINY)
    assert len(samples) == expected == seen[-1]
    for s in samples:
        assert 0 < s.time_min_s <= s.time_median_s
        assert s.time_p25_s <= s.time_median_s <= s.time_p75_s
        assert s.num_repeats == 3
        assert s.device == "cpu"
        assert s.torch_version
        assert s.hostname
        assert s.timestamp
        assert s.num_threads == 1
    write_sample_run(tmp_path, SampleRun(ops=tuple(samples), metadata={"device": "cpu"}))
    back = read_sample_run(tmp_path)
    assert [s.key for s in back.ops] == [s.key for s in samples]
    assert back.metadata == {"device": "cpu"}
    single = read_sample_run(tmp_path / "op_samples.csv")
    assert len(single.ops) == expected


def test_unknown_device_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="cpu or cuda"):
        sample_operators(TINY[:1], device="tpu")
    with pytest.raises(CalibrationError, match="neither"):
        read_sample_run(tmp_path)
    with pytest.raises(CalibrationError, match="no such sample directory"):
        read_sample_run(tmp_path / "missing")
    bad = tmp_path / "bad.csv"
    bad.write_text("op,pass,dtype,m,n,k,time_median_s\ngemm,fwd,float32,1,1,1,zero\n")
    with pytest.raises(CalibrationError, match=r"bad\.csv:2: column 'time_median_s'"):
        read_sample_run(bad)


def test_importing_the_adapter_does_not_import_torch() -> None:
    code = "import sys, adapters.sampling, adapters.nccl, planner.calibration; "
    code += "print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


@pytest.mark.integration
def test_gloo_collectives_over_two_local_processes() -> None:
    """Real torch.distributed (gloo) run: spawns 2 processes (a few seconds)."""
    from adapters.sampling import sample_collectives
    from planner.calibration import Collective

    samples = sample_collectives(
        num_ranks=2, sizes_bytes=(1024, 65536), num_warmup=1, num_repeats=2, timeout_s=120
    )
    assert {s.collective for s in samples} == set(Collective)
    assert all(s.time_s > 0 and s.source == "torch.distributed/gloo" for s in samples)
    assert len(samples) == 2 * len(Collective)
