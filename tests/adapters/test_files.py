"""Reading a job's small text files: every failure a clear, classified error."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.files import read_local_text
from planner.errors import SourcePermanentError


def test_reads_utf8_text(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("model: {preset: llama3-8b}  # é\n", encoding="utf-8")
    assert read_local_text("test", str(path), 1000).endswith("é\n")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.yaml", None, "no such file"),
        ("", None, "not a regular file"),  # the directory itself
        ("big.yaml", b"x" * 11, "larger than the 10-byte limit"),
        ("bin.yaml", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_each_failure_is_permanent_and_names_the_file(
    tmp_path: Path, name: str, content: bytes | None, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SourcePermanentError, match=message) as info:
        read_local_text("test:file", str(path), 10)
    assert "test:file" in str(info.value)


def test_a_relative_path_is_refused() -> None:
    with pytest.raises(SourcePermanentError, match="not an absolute path"):
        read_local_text("test:file", "relative.yaml", 10)
