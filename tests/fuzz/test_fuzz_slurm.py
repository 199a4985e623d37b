"""Slurm JSON (``squeue``/``sinfo``/``sacct --json``): any text, and real recorded answers with
values replaced, keys dropped or lists emptied, give jobs and nodes or a ``SourceError``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters.slurm.sacct import parse_sacct_json
from adapters.slurm.sinfo import parse_sinfo_json
from adapters.slurm.squeue import parse_squeue_records
from tests.fuzz.strategies import FUZZ, edited_text, mutated, outcome

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def _first_records(name: str, key: str, count: int) -> dict[str, Any]:
    """A recorded answer cut to its first ``count`` records (small enough to mutate fast)."""
    doc = json.loads((DATA / name).read_text())
    doc[key] = doc[key][:count]
    return doc


SQUEUE = _first_records("squeue.json", "jobs", 3)
SACCT = _first_records("sacct_all.json", "jobs", 3)
SINFO = _first_records("sinfo.json", "nodes", 3)
PARSERS = {
    "squeue": (parse_squeue_records, SQUEUE),
    "sacct": (lambda text: parse_sacct_json(text, include_active=True), SACCT),
    "sinfo": (parse_sinfo_json, SINFO),
}


@FUZZ
@given(st.sampled_from(sorted(PARSERS)), st.data())
def test_mutated_answers(name: str, data: st.DataObject) -> None:
    parse, doc = PARSERS[name]
    outcome(parse, json.dumps(data.draw(mutated(doc))))


@FUZZ
@given(st.sampled_from(sorted(PARSERS)), st.data())
def test_edited_text(name: str, data: st.DataObject) -> None:
    parse, doc = PARSERS[name]
    outcome(parse, data.draw(edited_text(json.dumps(doc, indent=1))))


@FUZZ
@given(st.sampled_from(sorted(PARSERS)), st.text(max_size=100))
def test_any_text(name: str, text: str) -> None:
    outcome(PARSERS[name][0], text)


def test_deep_or_huge_json_is_a_source_error() -> None:
    for text in ("[" * 100_000 + "]" * 100_000, '{"jobs": [' + "9" * 5000 + "]}"):
        for parse, _ in PARSERS.values():
            assert isinstance(outcome(parse, text), Exception)
