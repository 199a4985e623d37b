"""The CLI on hostile input: ``/dev/zero``, a huge file, deeply nested JSON,
overflowing list knobs and alias bombs each give a clear error and exit status 2, never a
traceback (exit 1) and never unbounded memory.

Probes that could eat the machine when the bounds regress run the CLI in a child process with
a 2 GiB address-space limit and a time limit below the unit-test limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from tests.scenario.test_documents_limits import alias_bomb
from tests.search.conftest import SMALL

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT_BYTES = 2 * 2**30
CPU_LIMIT_S = 8
"""CPU seconds a bounded command may use (the kernel stops it past that, SIGXCPU): what the
command costs, however busy the machine; the wall-clock timeout only catches a hang."""
HANG_TIMEOUT_S = 120
in_a_child = pytest.mark.timeout(2 * HANG_TIMEOUT_S + 10)
"""For tests that run ``planner`` in child processes: the children's CPU limit bounds them, not
the unit tests' wall-clock limit (a busy machine starts a Python process in seconds)."""
runner = CliRunner()


# Sets the limit in the child, then becomes ``python -m planner ARGS`` (no preexec_fn: the test
# process may have threads).
_LIMITED = (
    "import os, resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT_BYTES}, {MEMORY_LIMIT_BYTES})); "
    f"resource.setrlimit(resource.RLIMIT_CPU, ({CPU_LIMIT_S}, {CPU_LIMIT_S})); "
    "os.execv(sys.executable, [sys.executable, '-m', 'planner', *sys.argv[1:]])"
)


def planner(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m planner ARGS`` of this checkout with 2 GiB of address space and 8 CPU-s."""
    return subprocess.run(
        [sys.executable, "-c", _LIMITED, *args],
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        check=False,
    )


def clear_exit_2(result: subprocess.CompletedProcess[str] | object, *needles: str) -> str:
    out = f"{getattr(result, 'stdout', '')}{getattr(result, 'stderr', '')}"
    if not out:
        out = getattr(result, "output", "")
    code = getattr(result, "returncode", getattr(result, "exit_code", None))
    assert code == 2, out
    assert "Traceback" not in out
    assert "Error:" not in out.replace("INVALID", "")  # no exception type printed
    for needle in needles:
        assert needle in out
    return out


@in_a_child
def test_predict_dev_zero_is_a_bounded_read() -> None:
    clear_exit_2(planner("predict", "/dev/zero"), "/dev/zero", "67,108,864 bytes")


@in_a_child
def test_predict_a_huge_file(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:  # sparse: no disk space used
        fh.truncate(65 * 2**20)
    clear_exit_2(planner("predict", str(big)), "big.yaml", "limit of an input file")


def test_predict_stdin_is_bounded_too() -> None:
    result = runner.invoke(app, ["predict", "-"], input="a: " + "[" * 500 + "]" * 500)
    clear_exit_2(result, "nested deeper than 64 levels")


@in_a_child
def test_an_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("model: {preset: llama3-8b}\n" + alias_bomb(before="gpu: h100-sxm"))
    clear_exit_2(planner("predict", str(bomb)), "alias bomb")


@pytest.mark.parametrize("command", ["predict", "explore", "recommend"])
def test_deeply_nested_json(tmp_path: Path, command: str) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    result = runner.invoke(app, [command, str(deep)])
    clear_exit_2(result, "deep.json", "nested deeper than 64 levels")


@pytest.mark.parametrize("command", ["explore", "recommend"])
@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("parallelism", "global_batch_size", [64, 10**23]),
        ("parallelism", "tensor_parallel", [1, 10**30]),
        ("hardware", "num_gpus", [16, 10**29]),
    ],
)
def test_overflowing_list_knobs(
    tmp_path: Path, command: str, section: str, field: str, value: list[int]
) -> None:
    doc = json.loads(json.dumps(SMALL))
    doc[section][field] = value
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    result = runner.invoke(app, [command, str(path), "--workers", "1"])
    clear_exit_2(result, f"{section}.{field}", "must be an integer")


@in_a_child
def test_stragglers_on_dev_zero() -> None:
    meta = ROOT / "tests" / "data" / "traces" / "bytedance-straggler-meta-ST.yaml"
    result = planner("stragglers", "/dev/zero", "--meta", str(meta))
    clear_exit_2(result, "/dev/zero", "not a regular file")


def test_stragglers_meta_alias_bomb(tmp_path: Path) -> None:
    meta = tmp_path / "meta.yaml"
    meta.write_text("dp_size: 2\npp_size: 2\n" + alias_bomb(inside="extra.values"))
    trace = ROOT / "tests" / "data" / "traces" / "bytedance-straggler-trace-ST.parquet"
    result = runner.invoke(app, ["stragglers", str(trace), "--meta", str(meta)])
    clear_exit_2(result, "alias bomb")


@in_a_child
def test_calibration_files_are_bounded() -> None:
    clear_exit_2(planner("calibrate", "show", "/dev/zero"), "/dev/zero", "limit")
    scenario = ROOT / "deploy" / "examples" / "llama3-8b-h100.yaml"
    result = planner("predict", str(scenario), "--calibration", "/dev/zero")
    clear_exit_2(result, "--calibration", "limit")


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"x": ' + "9" * 5000 + "}"])
def test_calibration_json_that_json_cannot_hold(tmp_path: Path, body: str) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(body)
    clear_exit_2(runner.invoke(app, ["calibrate", "show", str(path)]), "not a calibration")
    scenario = ROOT / "deploy" / "examples" / "llama3-8b-h100.yaml"
    result = runner.invoke(app, ["predict", str(scenario), "--calibration", str(path)])
    clear_exit_2(result, "--calibration", "not a calibration")
