"""What a published run becomes: a ``Case`` (scenario + measured time) or an ``Unusable``.

Shared by the per-source converters (``benchmarks.accuracy.convert`` for the dense tables,
``benchmarks.accuracy.moe_h100`` for the 2025 MoE runs): the two result types, the counted
reasons a configuration is left out, and the helpers that read a ``PublishedRun``'s columns
into scenario-document sections.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks.accuracy.runs import PublishedRun

GIB = 1024.0**3


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A published run as a scenario with its measured values.

    ``document`` is a scenario document (``parse_scenario`` input); ``measured_iteration_time_s``
    the published wall-clock seconds per optimizer step (derived as the module docstring says,
    from ``derived_from``); ``measured_peak_memory_bytes`` the published peak memory per GPU, or
    None; ``assumptions`` lists the values not stated by the source and filled in here;
    ``calibration`` marks the declared calibration subset; ``release`` names the software release
    (container) of a source that published several, '' otherwise; ``cluster`` names the
    publisher whose machines and stack measured the run where one source file gathers several
    publishers ('' otherwise: the source is the cluster; ``cluster_of``).
    """

    source: str
    config_id: str
    document: dict[str, Any]
    measured_iteration_time_s: float
    derived_from: str
    measured_peak_memory_bytes: float | None = None
    assumptions: tuple[str, ...] = ()
    calibration: bool = False
    release: str = ""
    cluster: str = ""

    @property
    def cluster_of(self) -> str:
        """The cluster that measured the run: its publisher, else its source."""
        return self.cluster or self.source

    @property
    def key(self) -> tuple[str, str]:
        """``(source, config_id)``, unique over all cases."""
        return (self.source, self.config_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Unusable:
    """A published configuration that does not become a case, and why (one of ``REASONS``;
    ``detail`` says more where the reason needs it, e.g. the planner's refusal message)."""

    source: str
    config_id: str
    reason: str
    detail: str = ""


class SkipError(Exception):
    """Raised by a converter for a run that cannot become a scenario."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Reasons (counted per source in the report).
NOT_AN_ITERATION = "single-layer forward/backward timing (Korthikanti Table 4), not an iteration"
SPLIT_NOT_STATED = "tensor/pipeline split not stated (only the model-parallel size tp·pp)"
LAYOUT_NOT_STATED = "parallel layout not stated (strong-scaling endpoints quoted in text)"
FINE_TUNING = "fine-tuning (SFT/LoRA), not pretraining: frozen weights / packed sequences"
NO_ARCHITECTURE = "architecture not stated and no catalog preset for the model"
PP_MICROBATCH_NOT_STATED = "pipeline microbatch size and virtual stages not stated"
DUPLICATE = (
    "same scenario as a faster row of the source: differs only in options the scenario format "
    "cannot express (torch.compile, float8 recipe, FSDP mixed-precision mode, "
    "software version)"
)
NO_TIMING = "no throughput or time metric"
ARCHITECTURE_NOT_MODELLED_MAMBA = "architecture not modelled: hybrid Mamba (Nemotron V3)"
ARCHITECTURE_NOT_MODELLED_LINEAR_ATTENTION = (
    "architecture not modelled: hybrid Gated DeltaNet linear attention (Qwen3-Next)"
)
MFU_ONLY = "only an MFU is published, with a FLOP count the source does not define"
SUPERSEDED = "superseded: an earlier measurement of a configuration the source re-measured"
REFUSED = "refused by the planner: `planner predict` rejects the scenario (detail per row)"

REASONS = (
    NOT_AN_ITERATION,
    SPLIT_NOT_STATED,
    LAYOUT_NOT_STATED,
    FINE_TUNING,
    NO_ARCHITECTURE,
    PP_MICROBATCH_NOT_STATED,
    DUPLICATE,
    NO_TIMING,
    ARCHITECTURE_NOT_MODELLED_MAMBA,
    ARCHITECTURE_NOT_MODELLED_LINEAR_ATTENTION,
    MFU_ONLY,
    SUPERSEDED,
    REFUSED,
)


def num(run: PublishedRun, column: str) -> int:
    value = run.integer(column)
    if value is None:
        raise ValueError(f"{run.config_id}: column {column!r} is blank")
    return value


def model_fields(run: PublishedRun, *, activation: str, untie: bool) -> dict[str, Any]:
    heads = num(run, "heads")
    hidden = num(run, "hidden")
    return {
        "num_layers": num(run, "layers"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_query_groups": run.integer("kv_heads") or heads,
        "ffn_hidden_size": run.integer("ffn_hidden") or 4 * hidden,
        "vocab_size": num(run, "vocab"),
        "seq_length": num(run, "seq_len"),
        "activation": activation,
        "untie_embeddings": untie,
    }


def layout(run: PublishedRun, **extra: Any) -> dict[str, Any]:
    """tp/pp/cp/vp/micro-batch/global batch from the row (blank -> 1)."""
    par: dict[str, Any] = {
        "tensor_parallel": run.integer("tp") or 1,
        "pipeline_parallel": run.integer("pp") or 1,
        "context_parallel": run.integer("cp") or 1,
        "micro_batch_size": run.integer("micro_batch") or 1,
        "global_batch_size": num(run, "global_batch"),
    }
    vp = run.integer("vp") or 1
    if vp > 1:
        par["virtual_pipeline"] = vp
    par.update(extra)
    return par


def document(
    run: PublishedRun,
    model: Mapping[str, Any],
    gpu: str,
    parallelism: Mapping[str, Any],
    framework: str,
) -> dict[str, Any]:
    hardware: dict[str, Any] = {"gpu": gpu, "num_gpus": num(run, "num_gpus")}
    if run.integer("gpus_per_node"):
        hardware["gpus_per_node"] = run.integer("gpus_per_node")
    return {
        "name": f"{run.source}:{run.config_id}",
        "model": dict(model),
        "hardware": hardware,
        "parallelism": dict(parallelism),
        "training": {"framework": framework},
    }


def tokens_per_iteration(run: PublishedRun) -> float:
    return float(num(run, "global_batch") * num(run, "seq_len"))


def megatron_model_flops(run: PublishedRun) -> float:
    """Megatron model FLOPs of one iteration, 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))."""
    b, s, layers = num(run, "global_batch"), num(run, "seq_len"), num(run, "layers")
    h, v = num(run, "hidden"), num(run, "vocab")
    return 72.0 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))


def time_from_tflops(run: PublishedRun, flops: float) -> float:
    return flops / (run.metrics["achieved_tflops_per_gpu"] * 1e12 * num(run, "num_gpus"))
