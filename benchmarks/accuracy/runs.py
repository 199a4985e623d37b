"""Published training runs: read the long-format ground-truth CSVs and pivot them per configuration.

The CSVs in ``tests/data/ground_truth/`` hold one row per reported metric; rows of one
configuration share a ``config_id``. ``load_runs`` returns one ``PublishedRun`` per configuration
with its descriptive columns (first row wins; they are identical within a configuration) and
its metrics by name. See ``tests/data/ground_truth/README.md`` for the sources and conventions.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "ground_truth"
"""Where the project's verbatim copies of the published tables live."""

SOURCE_FILES: Mapping[str, str] = {
    "sc21": "megatron_sc21_narayanan2021.csv",
    "korthikanti2022": "korthikanti2022_selective_recompute.csv",
    "megatron_h100": "megatron_lm_readme_h100_2024.csv",
    "llm_foundry": "llm_foundry_mpt_benchmarks.csv",
    "nemo_24.07": "nemo_2407_perf_summary_h100.csv",
    "torchtitan": "torchtitan_benchmarks.csv",
    "moe_h100_2025": "moe_h100_2025.csv",
}
"""Source key (used in reports) -> CSV file name, in ``DATA_DIR``."""

SHARED_DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "ground_truth"
"""The workplace's shared ground-truth folder (``../shared/data/ground_truth`` of the checkout):
sources the benchmark reads where they are (tests do not read them)."""

SHARED_SOURCE_FILES: Mapping[str, str] = {
    "megatron_bridge_2025": "megatron_bridge_2025.csv",
}
"""Source key -> CSV file name, in ``SHARED_DATA_DIR``."""


def source_path(source: str, data_dir: Path = DATA_DIR) -> Path:
    """The CSV of ``source``: in ``data_dir`` for ``SOURCE_FILES``, in ``SHARED_DATA_DIR`` for
    ``SHARED_SOURCE_FILES``."""
    if source in SHARED_SOURCE_FILES:
        return SHARED_DATA_DIR / SHARED_SOURCE_FILES[source]
    return data_dir / SOURCE_FILES[source]


def available_sources() -> tuple[str, ...]:
    """Every source whose CSV is there: the project's, then the shared ones present; a shared
    one that is missing (a checkout outside the workplace, whose ``../shared`` is elsewhere) is
    said on stderr, since every table then lacks its rows."""
    shared = []
    for source in SHARED_SOURCE_FILES:
        if source_path(source).is_file():
            shared.append(source)
        else:
            print(
                f"accuracy: {source} left out: {source_path(source)} not found (the shared "
                "ground truth, ../shared/data/ground_truth beside the checkout)",
                file=sys.stderr,
            )
    return (*SOURCE_FILES, *shared)


DESCRIPTIVE_COLUMNS = (
    "source",
    "table",
    "model_name",
    "params_b",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "ffn_hidden",
    "vocab",
    "seq_len",
    "moe_experts",
    "moe_topk",
    "gpu",
    "gpu_mem_gb",
    "num_gpus",
    "gpus_per_node",
    "interconnect",
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "vp",
    "sp",
    "micro_batch",
    "global_batch",
    "recompute",
    "zero_stage",
    "precision",
)
"""Columns describing the configuration (everything but the metric and its notes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    """One published configuration: its columns (blank = not stated) and metrics by name.

    ``metrics`` maps ``metric_name`` to the value in the CSV's unit (s, TFLOP/s/GPU, %, tokens/s,
    GiB ...); ``notes`` are the distinct ``notes`` cells of its rows, joined by `` | ``.
    """

    source: str
    config_id: str
    fields: Mapping[str, str]
    metrics: Mapping[str, float]
    notes: str

    def text(self, column: str) -> str:
        """The stripped cell of ``column`` ('' when the source does not state it)."""
        return self.fields.get(column, "").strip()

    def integer(self, column: str) -> int | None:
        """The cell of ``column`` as an int, None when blank."""
        cell = self.text(column)
        return int(float(cell)) if cell else None


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of one long-format CSV as dicts of strings."""
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def pivot(source: str, rows: list[dict[str, str]]) -> list[PublishedRun]:
    """Group long-format ``rows`` by ``config_id`` (first-seen order) into ``PublishedRun``s."""
    order: list[str] = []
    grouped: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        cid = row["config_id"]
        if cid not in grouped:
            order.append(cid)
            grouped[cid] = []
        grouped[cid].append(row)
    runs = []
    for cid in order:
        members = grouped[cid]
        first = members[0]
        notes: list[str] = []
        for row in members:
            if row["notes"] and row["notes"] not in notes:
                notes.append(row["notes"])
        runs.append(
            PublishedRun(
                source=source,
                config_id=cid,
                fields={col: first.get(col, "") for col in DESCRIPTIVE_COLUMNS},
                metrics={row["metric_name"]: float(row["metric_value"]) for row in members},
                notes=" | ".join(notes),
            )
        )
    return runs


def load_runs(source: str, data_dir: Path = DATA_DIR) -> list[PublishedRun]:
    """All configurations of one source (a key of ``SOURCE_FILES`` or ``SHARED_SOURCE_FILES``),
    in file order."""
    return pivot(source, read_rows(source_path(source, data_dir)))
