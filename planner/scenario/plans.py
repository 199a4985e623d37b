"""Explore and recommend documents: the edge between their JSON/YAML documents and the typed
design-space search (``planner.search``) and allocation advice (``planner.recommend``).

The CLI and the HTTP API call these functions; nothing else in the core sees a document.
``explore_document`` / ``explore_documents`` / ``recommend_document`` parse a document
(``planner.scenario.space.parse_space``, ``planner.scenario.request.parse_request``), run the
typed search or recommendation, and write its result as the ``planner explore --json`` /
``planner recommend --json`` object; a document that is invalid or has no valid plan gets
``{"name", "error"}`` (``"<field>: <what is wrong and how to fix it>"`` or
``"infeasible: ..."``) instead of an exception.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypedDict, Unpack

from planner.errors import InfeasibleError, SpecError
from planner.perf.efficiency import EfficiencyModel
from planner.recommend import recommend
from planner.scenario.documents import DocumentError
from planner.scenario.request import RecommendationJson, parse_request, recommendation_json
from planner.scenario.space import (
    ExploreJson,
    explore_json,
    parse_space,
    scenario_document,
    stated_fields,
)
from planner.search import Objective, explore

__all__ = [
    "ExploreOptions",
    "explore_document",
    "explore_documents",
    "parse_request",
    "parse_space",
    "recommend_document",
    "scenario_document",
]


def _name(doc: object) -> str | None:
    name = doc.get("name") if isinstance(doc, Mapping) else None
    return None if name is None else str(name)


class ExploreOptions(TypedDict, total=False):
    """The options of ``planner.search.explore`` a caller may set (its defaults otherwise)."""

    objective: Objective | str
    top_k: int
    rank_offset: int
    chunk_size: int
    workers: int
    efficiency: EfficiencyModel | None
    with_pareto: bool
    tolerance: float | None


def explore_document(doc: object, **kwargs: Unpack[ExploreOptions]) -> ExploreJson | DocumentError:
    """One explore document -> the contract's JSON object, or ``{"name", "error"}``.

    ``kwargs`` go to ``planner.search.explore`` (``ExploreOptions``: ``objective``, ``top_k``,
    ``rank_offset``, ``chunk_size``, ``workers``, ``efficiency``, ``with_pareto``,
    ``tolerance``). Never raises for bad documents or infeasible spaces: the ``error`` reads
    ``"<field>: <what is wrong and how to fix it>"`` or ``"infeasible: ..."``.
    """
    try:
        space = parse_space(doc)
        result = explore(space, **kwargs)
    except SpecError as exc:
        return {"name": _name(doc), "error": str(exc)}
    except InfeasibleError as exc:
        return {"name": _name(doc), "error": f"infeasible: {exc}"}
    parallelism = doc.get("parallelism") if isinstance(doc, Mapping) else None
    return explore_json(result, stated_fields(parallelism))


def explore_documents(
    docs: Sequence[object], **kwargs: Unpack[ExploreOptions]
) -> Iterator[ExploreJson | DocumentError]:
    """``explore_document`` over a sweep of documents (one process, results in input order,
    yielded as each finishes so a caller can stream them)."""
    for doc in docs:
        yield explore_document(doc, **kwargs)


def recommend_document(doc: object, *, workers: int = 1) -> RecommendationJson | DocumentError:
    """A recommend document -> the ``planner recommend --json`` object, or
    ``{"name", "error"}`` for bad input and for jobs no pool can run. Never raises for bad
    documents. An unreachable deadline keeps the whole answer and adds its ``error``."""
    try:
        recommendation = recommend(parse_request(doc), workers=workers)
    except SpecError as exc:
        return {"name": _name(doc), "error": str(exc)}
    except InfeasibleError as exc:
        return {"name": _name(doc), "error": f"infeasible: {exc}"}
    return recommendation_json(recommendation, doc)
