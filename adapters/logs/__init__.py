"""Training progress from job logs: line parsers (Megatron-LM, torchtitan, Lightning/NeMo, JSON)
and an incremental tailer that survives partial lines, rotation and truncation."""

from adapters.logs.parsers import parse_line
from adapters.logs.tail import LogTailer

__all__ = ["LogTailer", "parse_line"]
