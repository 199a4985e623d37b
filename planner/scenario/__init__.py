"""Scenario files: read YAML/JSON/JSONL documents, validate them, predict them in a batch."""

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
