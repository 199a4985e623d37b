"""Training logs (``parse_line``, ``read_log``, ``read_iteration_table``): any line and any log,
real lines edited, and real golden tables mutated give records, None or a ``SpecError``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters.logs import LogContext, parse_line, read_iteration_table, read_log
from tests.fuzz.strategies import FUZZ, NASTY_TEXT, edited_text, mutated, outcome

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"


def _sample_lines() -> list[str]:
    """Up to 40 lines of each recorded log (every format the parsers know)."""
    lines: list[str] = []
    for path in sorted(DATA.glob("*.log")):
        with path.open(encoding="utf-8", errors="replace") as fh:
            kept = [line.rstrip("\n") for _, line in zip(range(400), fh, strict=False)]
        lines.extend(line for line in kept[::10] if line.strip())
    return lines


LINES = _sample_lines()


def _golden() -> dict[str, Any]:
    doc = json.loads((DATA / "megatron-ci-nemotron3-super-release-gb200-golden.json").read_text())
    out: dict[str, Any] = {}
    for name, metric in list(doc.items())[:2]:
        values = dict(list(metric.get("values", {}).items())[:6])
        out[name] = {**metric, "values": values}
    return out


GOLDEN = _golden()


@FUZZ
@given(st.sampled_from(LINES).flatmap(edited_text))
def test_edited_real_lines(line: str) -> None:
    parse_line(line)  # documented: never raises
    parse_line(line, context=LogContext())


@FUZZ
@given(st.text(max_size=200) | NASTY_TEXT)
def test_any_line(line: str) -> None:
    parse_line(line)


@FUZZ
@given(st.lists(st.sampled_from(LINES) | st.text(max_size=40), max_size=12))
def test_logs_of_mixed_lines(lines: list[str]) -> None:
    outcome(read_log, "\n".join(lines))


@FUZZ
@given(st.data())
def test_mutated_golden_tables(data: st.DataObject) -> None:
    outcome(read_iteration_table, json.dumps(data.draw(mutated(GOLDEN))))
    outcome(read_log, data.draw(edited_text(json.dumps(GOLDEN, indent=4))))
