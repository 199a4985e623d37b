"""Megatron-LM arguments (``scenario_document_from_megatron_args``): any command line or batch
script gives a document, None, or a ``PlannerError``; the document then parses or gives one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from planner.scenario import parse_scenario, scenario_document_from_megatron_args
from tests.fuzz.strategies import FUZZ, NASTY_NUMBERS, NASTY_TEXT, outcome

FLAGS = st.sampled_from(
    ["--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length",
     "--max-position-embeddings", "--tensor-model-parallel-size",
     "--pipeline-model-parallel-size", "--context-parallel-size", "--expert-model-parallel-size",
     "--num-experts", "--moe-router-topk", "--global-batch-size", "--micro-batch-size",
     "--train-iters", "--train-samples", "--vocab-size", "--padded-vocab-size",
     "--tokenizer-model", "--ffn-hidden-size", "--num-query-groups", "--group-query-attention",
     "--kv-channels", "--swiglu", "--squared-relu", "--bf16", "--fp16", "--fp8-format",
     "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
     "--sequence-parallel", "--use-distributed-optimizer",
     "--num-layers-per-virtual-pipeline-stage", "--untie-embeddings-and-output-weights",
     "--make-vocab-size-divisible-by"]
)  # fmt: skip
VALUES = st.one_of(
    NASTY_TEXT,
    NASTY_NUMBERS.map(str),
    st.integers(-5, 10**6).map(str),
    st.text(max_size=8),
    st.sampled_from(["$X", "${X:-8}", "'8'", '"8"', "\\\n"]),
)
GPUS = st.one_of(st.none(), st.sampled_from(["h100", "a100", "gpu", "", "h100-sxm", "x" * 100]))


@st.composite
def command_lines(draw: st.DrawFn) -> str:
    parts = ["torchrun pretrain_gpt.py", "--num-layers 4 --hidden-size 256 --num-attention-heads 8"]
    for _ in range(draw(st.integers(0, 10))):
        flag = draw(FLAGS)
        parts.append(flag)
        if draw(st.booleans()):
            parts.append(draw(VALUES))
    if draw(st.booleans()):
        parts = draw(st.permutations(parts))
    return draw(st.sampled_from([" ", " \\\n  ", "\n"])).join(parts)


@FUZZ
@given(
    command_lines(),
    st.one_of(
        st.none(), st.integers(-1, 10**6), NASTY_NUMBERS.filter(lambda v: isinstance(v, int))
    ),
    GPUS,
)
def test_command_lines(text: str, num_gpus: int | None, gpu: str | None) -> None:
    doc = outcome(scenario_document_from_megatron_args, text, num_gpus=num_gpus, gpu=gpu)
    if isinstance(doc, dict):
        outcome(parse_scenario, doc)


@FUZZ
@given(st.text(max_size=300), GPUS)
def test_any_text(text: str, gpu: str | None) -> None:
    doc = outcome(scenario_document_from_megatron_args, text, num_gpus=8, gpu=gpu)
    if isinstance(doc, dict):
        outcome(parse_scenario, doc)


def test_a_vocabulary_beyond_the_float_range() -> None:
    """Found by test_command_lines: ``vocab / multiple`` overflowed a float (``_vocab`` now
    rounds with integers; the scenario's bound on integers then refuses the value)."""
    text = "pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 --vocab-size "
    outcome(scenario_document_from_megatron_args, text + "1" + "0" * 400, num_gpus=8, gpu=None)
