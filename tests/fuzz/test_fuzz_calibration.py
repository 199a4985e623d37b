"""Operator sample CSV (``read_op_samples_csv``): any text gives samples or a
``CalibrationError``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.calibration.samples import OP_SAMPLE_COLUMNS, read_op_samples_csv
from planner.errors import CalibrationError
from tests.fuzz.strategies import FUZZ, NASTY_TEXT, edited_text, outcome

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "calibration" / "cpu_epyc_2core_fp32"
HEAD = "\n".join((SAMPLES / "op_samples.csv").read_text().splitlines()[:4]) + "\n"


@FUZZ
@given(st.data())
def test_edited_sample_csv(data: st.DataObject) -> None:
    outcome(read_op_samples_csv, data.draw(edited_text(HEAD)), source="fuzz.csv")


@FUZZ
@given(st.lists(st.lists(NASTY_TEXT | st.text(max_size=6), min_size=1, max_size=30), max_size=4))
def test_rows_of_any_cells(rows: list[list[str]]) -> None:
    lines = [",".join(OP_SAMPLE_COLUMNS)] + [",".join(row) for row in rows]
    outcome(read_op_samples_csv, "\n".join(lines), source="fuzz.csv")


@FUZZ
@given(st.text(max_size=300))
def test_any_text(text: str) -> None:
    outcome(read_op_samples_csv, text, source="fuzz.csv")


# Crashes found here, each a CalibrationError now (not csv.Error, OverflowError, ValueError).
@pytest.mark.parametrize(
    ("cells", "match"),
    [
        ({"op": '"' + "x" * 200_000 + '"'}, "malformed CSV"),
        ({"num_repeats": "inf"}, "not a count"),
        ({"num_warmup": "nan"}, "not a count"),
        ({"num_threads": "1e300"}, "not a count"),
    ],
    ids=["huge-field", "inf-repeats", "nan-warmup", "huge-threads"],
)
def test_crashes_found_are_calibration_errors(cells: dict[str, str], match: str) -> None:
    header, row = HEAD.splitlines()[:2]
    values = dict(zip(header.split(","), row.split(","), strict=True))
    values.update(cells)
    text = f"{header}\n{','.join(values[c] for c in header.split(','))}\n"
    with pytest.raises(CalibrationError, match=match):
        read_op_samples_csv(text, source="s.csv")
