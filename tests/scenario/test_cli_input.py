"""Bounded reading of the command line's own input files (``planner.cli_input``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from planner.cli_input import read_input
from planner.errors import SpecError


def test_command_line_inputs_are_bounded(tmp_path: Path) -> None:
    start = time.process_time()  # CPU time: the work, not the machine's load
    with pytest.raises(SpecError, match="more than 1,000 bytes"):
        read_input("/dev/zero", 1000)
    assert time.process_time() - start < 1.0
    (tmp_path / "a.yaml").write_text("x: 1\n")
    assert read_input(str(tmp_path / "a.yaml"), 1000) == b"x: 1\n"
    with pytest.raises(SpecError, match="is a directory"):
        read_input(str(tmp_path), 1000)
    with pytest.raises(SpecError, match="No such file"):
        read_input(str(tmp_path / "none"), 1000)
