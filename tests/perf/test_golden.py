"""Golden test: predictions vs published Megatron-LM / NeMo runs (tests/data/ground_truth/).

First, uncalibrated model: the tolerance is a generous 35 %; calibration tightens it.
Errors measured when this test was written: Korthikanti 22B -13.8 %, 175B selective -5.3 %,
175B full -4.2 %, 530B -3.2 %, 1T +2.7 %; Megatron-LM H100 MFU 70B -13.0 %, 177B -5.9 %;
NeMo FP8 tokens/s/GPU Llama2-70B -7.1 %, Llama3-70B -1.5 %. After the framework profiles and
the refit: Korthikanti 22B +9.9 %, 175B selective -0.2 %, 175B full +1.8 %, 530B
-1.3 %, 1T +2.0 %; Megatron-LM H100 MFU 70B -0.6 %, 177B -0.6 %; NeMo Llama2-70B -6.3 %,
Llama3-70B +2.4 % (these rows run as the default framework, megatron); tolerance 12 %.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from planner.perf import predict
from planner.scenario import parse_scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "ground_truth" / "golden_runs.csv"
TOLERANCE = 0.12


def _rows() -> list[dict[str, str]]:
    with DATA.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _doc(row: dict[str, str]) -> dict[str, Any]:
    def num(key: str, default: int = 1) -> int:
        return int(row[key]) if row[key] else default

    llama = row["model_name"].lower().startswith("llama")
    source = row["config_id"]
    if source.startswith("korth"):
        gpu, precision = "a100-80gb", "fp16"
        recompute = "selective" if "selective" in row["recompute"] else "full"
    elif source.startswith("mlm_h100"):
        gpu, precision, recompute = "h100-sxm", "bf16", "selective"  # not stated: assumed
    else:
        gpu, precision, recompute = "h100-sxm", "fp8", "none"
    parallelism: dict[str, Any] = {
        "tensor_parallel": num("tp"),
        "pipeline_parallel": num("pp"),
        "context_parallel": num("cp"),
        "micro_batch_size": num("micro_batch"),
        "global_batch_size": num("global_batch"),
        "recompute": recompute,
        "precision": precision,
        # Korthikanti's runs predate flash attention; their baseline has no sequence parallel.
        "flash_attention": not source.startswith("korth"),
        "sequence_parallel": row["sp"] != "no" and num("tp") > 1,
    }
    if num("vp") > 1:
        parallelism["virtual_pipeline"] = num("vp")
    return {
        "name": source,
        "model": {
            "num_layers": num("layers"),
            "hidden_size": num("hidden"),
            "num_attention_heads": num("heads"),
            "num_query_groups": num("kv_heads", num("heads")),
            "ffn_hidden_size": num("ffn_hidden", 4 * num("hidden")),
            "vocab_size": num("vocab"),
            "seq_length": num("seq_len"),
            "activation": "swiglu" if llama else "gelu",
            "untie_embeddings": llama,
        },
        "hardware": {"gpu": gpu, "num_gpus": num("num_gpus")},
        "parallelism": parallelism,
    }


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['config_id']}:{r['metric_name']}")
def test_prediction_within_tolerance_of_published(row: dict[str, str]) -> None:
    prediction = predict(parse_scenario(_doc(row)))
    measured = float(row["metric_value"])
    metric = row["metric_name"]
    if metric == "iteration_time":
        predicted = prediction.iteration_time_s
    elif metric == "mfu":
        predicted = prediction.mfu * 100.0
    else:
        assert metric == "tokens_per_s_per_gpu"
        predicted = prediction.tokens_per_s_per_gpu
    assert predicted == pytest.approx(measured, rel=TOLERANCE)
    assert prediction.fits_in_memory  # every one of these runs ran on its 80 GB GPUs
