"""``planner eta replay`` reads a log of at most ``MAX_LOG_BYTES``: a longer one (or an endless
file such as ``/dev/zero``) is an error naming the limit and the fix, read no further than
the limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from planner.cli import app
from planner.eta_cli import MAX_LOG_BYTES, run_replay

TINY = Path(__file__).resolve().parent / "data" / "logs" / "tiny_gpt_megatron_900it.log"


def test_a_log_longer_than_the_limit_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = TINY.stat().st_size
    lines, summary = run_replay(str(TINY), max_bytes=size)  # at the limit: replayed
    assert lines
    assert summary["total_iterations"] == 900
    for log in (str(TINY), "/dev/zero"):
        with pytest.raises(typer.Exit) as exc:
            run_replay(log, max_bytes=size - 1)
        assert exc.value.exit_code == 2
        error = capsys.readouterr().err
        assert f"longer than {size - 1:,} bytes" in error
        assert "MAX_LOG_BYTES" in error
        assert "cut it" in error
    assert MAX_LOG_BYTES == 256 * 1024 * 1024


def test_the_command_reads_a_log_from_standard_input() -> None:
    result = CliRunner().invoke(app, ["eta", "replay", "-", "--json"], input=TINY.read_text())
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.splitlines()[-1])["summary"]
    assert summary["total_iterations"] == 900
