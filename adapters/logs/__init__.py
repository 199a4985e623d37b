"""Training progress from job logs: line parsers (Megatron-LM, NeMo, torchtitan, Lightning, JSON,
MLPerf MLLOG, modded-nanogpt, DeepSpeed, DeepSpeed-Chat, the Hugging Face Trainer's training
bar), Megatron-LM CI golden tables, a reader of whole finished logs, and an incremental tailer
that survives partial lines, rotation and truncation."""

from adapters.logs.context import LogContext, LogEvent
from adapters.logs.parsers import parse_line
from adapters.logs.reading import LogReading, read_job_log, read_log
from adapters.logs.tables import read_iteration_table
from adapters.logs.tail import LogTailer

__all__ = [
    "LogContext",
    "LogEvent",
    "LogReading",
    "LogTailer",
    "parse_line",
    "read_iteration_table",
    "read_job_log",
    "read_log",
]
