"""``squeue --json`` parsed through a ``SqueueCache``: the same records as a parse without it,
with the unchanged jobs' records kept from the last answer (neither decoded nor read again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.slurm.squeue import SqueueCache, parse_squeue_records
from planner.errors import SourcePermanentError

DATA = Path(__file__).parents[2] / "data" / "slurm"


def _answer(jobs: list[dict[str, object]], *, indent: int | None = 2) -> str:
    doc = json.loads((DATA / "squeue.json").read_text())
    return json.dumps({**doc, "jobs": jobs}, indent=indent)


def _jobs() -> list[dict[str, object]]:
    jobs: list[dict[str, object]] = json.loads((DATA / "squeue.json").read_text())["jobs"]
    assert len(jobs) > 5
    return jobs


def test_unchanged_jobs_keep_their_records_and_changed_ones_are_read_again() -> None:
    jobs = _jobs()
    text = _answer(jobs)
    cache = SqueueCache()
    first = parse_squeue_records(text, cache=cache)
    assert first == parse_squeue_records(text)
    again = parse_squeue_records(text, cache=cache)
    assert again == first
    assert all(a is b for a, b in zip(again, first, strict=True))  # kept, not parsed

    changed = [dict(j) for j in jobs]
    changed[2]["comment"] = "planner:scenario=/shared/other.yaml"
    changed.append({**jobs[0], "job_id": 999, "name": "new"})
    text = _answer(changed)
    third = parse_squeue_records(text, cache=cache)
    assert third == parse_squeue_records(text)
    assert third[2].job.comment == "planner:scenario=/shared/other.yaml"
    assert third[2] is not first[2]
    assert third[-1].slurm_job_id == 999
    assert [r is f for r, f in zip(third[:-1], first, strict=True)] == [
        i != 2 for i in range(len(jobs))
    ]


def test_compact_output_is_parsed_alike_though_nothing_is_recognised() -> None:
    text = _answer(_jobs(), indent=None)
    cache = SqueueCache()
    first = parse_squeue_records(text, cache=cache)
    again = parse_squeue_records(text, cache=cache)
    assert again == first == parse_squeue_records(text)


def test_records_of_another_cluster_name_are_not_kept() -> None:
    text = _answer(_jobs())
    cache = SqueueCache()
    first = parse_squeue_records(text, cache=cache, cluster="a")
    other = parse_squeue_records(text, cache=cache, cluster="b")
    assert {r.job.cluster for r in other} == {"b"}
    assert not any(a is b for a, b in zip(other, first, strict=True))


@pytest.mark.parametrize(
    "broken",
    [
        lambda text: text[: len(text) // 2],  # cut off
        lambda text: text.replace('"job_id": 4,', '"job_id": "four",', 1),  # a bad field
    ],
)
def test_a_broken_answer_fails_as_without_the_cache_and_leaves_it_usable(broken: object) -> None:
    text = _answer(_jobs())
    cache = SqueueCache()
    first = parse_squeue_records(text, cache=cache)
    bad = broken(text)  # type: ignore[operator]
    with pytest.raises(SourcePermanentError) as plain:
        parse_squeue_records(bad)
    with pytest.raises(SourcePermanentError) as cached:
        parse_squeue_records(bad, cache=cache)
    assert str(cached.value) == str(plain.value)
    assert parse_squeue_records(text, cache=cache) == first
