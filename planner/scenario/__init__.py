"""The edge between documents and specs: read YAML/JSON/JSONL scenario documents, validate
them into ``Scenario`` values, predict them in a batch; explore and recommend documents in and
their answers out (``planner.scenario.plans``). Nothing else in the core sees a document."""

from planner.scenario.documents import format_for_path, predict_documents, read_documents
from planner.scenario.megatron_args import scenario_document_from_megatron_args
from planner.scenario.parse import parse_scenario

__all__ = [
    "format_for_path",
    "parse_scenario",
    "predict_documents",
    "read_documents",
    "scenario_document_from_megatron_args",
]
