"""How the layers split over pipeline stages (planner.specs.pipeline_split), against the
frameworks' own partitioners transcribed below (torchtitan 0.3.0, DeepSpeed 0.19.8)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import SpecError
from planner.specs.pipeline_split import (
    StageLayers,
    VirtualStage,
    parse_layout,
    stage_layer_arrays,
    stage_layers,
)


def torchtitan_stage_layers(num_stages: int, num_layers: int) -> list[int]:
    """Transformer layers per virtual stage, transcribed from torchtitan 0.3.0
    ``distributed/pipeline_parallel.py`` ``_generate_llm_fqn_per_model_part`` (input and output
    weight 1, its defaults); raises ``ValueError`` where it does."""
    if num_stages == 1:
        return [num_layers]
    effective = num_layers + 2
    if num_stages > effective:
        raise ValueError("more stages than effective layers")
    per, extra = divmod(effective, num_stages)
    if per == 0 or per < 1:
        raise ValueError("empty stages")
    out, current = [], 0
    for stage in range(num_stages):
        count = per + (1 if stage < extra else 0)
        if stage in (0, num_stages - 1):
            count -= 1
        take = min(count, num_layers - current)
        out.append(take)
        current += take
    return out


def deepspeed_partition_balanced(weights: list[int], num_parts: int) -> list[int]:
    """DeepSpeed 0.19.8 ``runtime/utils.py`` ``partition_balanced`` (with its
    ``partition_uniform`` fallback), transcribed."""
    n, m = len(weights), num_parts
    if n <= m:
        return [min(p, n) for p in range(m + 1)]
    inf = float("inf")
    dp_max = [[inf] * (m + 1) for _ in range(n + 1)]
    dp_min = [[inf] * (m + 1) for _ in range(n + 1)]
    dp_cost = [[inf] * (m + 1) for _ in range(n + 1)]
    position = [[0] * (m + 1) for _ in range(n + 1)]
    prefix = [0.0] * (n + 1)
    for i, w in enumerate(weights):
        prefix[i + 1] = prefix[i] + w
    dp_max[0][0] = 0
    dp_cost[0][0] = 0
    for i in range(1, n + 1):
        for j in range(1, min(i, m) + 1):
            for k in range(i):
                max_sum = max(dp_max[k][j - 1], prefix[i] - prefix[k])
                min_sum = min(dp_min[k][j - 1], prefix[i] - prefix[k])
                cost = max_sum - min_sum
                if dp_cost[i][j] >= cost:
                    dp_cost[i][j] = cost
                    dp_max[i][j] = max_sum
                    dp_min[i][j] = min_sum
                    position[i][j] = k
    parts = [n]
    for i in reversed(range(1, m + 1)):
        parts.append(position[parts[-1]][i])
    return parts[::-1]


def ranks_of(per_virtual_stage: list[int], p: int) -> list[int]:
    return [sum(per_virtual_stage[r::p]) for r in range(p)]


def summary(ranks: list[int]) -> tuple[int, int, int]:
    return ranks[0], max(ranks[1:-1], default=0), ranks[-1]


def test_megatron_layout_strings_parse_as_megatron_core_documents_them() -> None:
    # TransformerConfig docstring / parse_str_to_list examples (Megatron-Core 0.16.1)
    deepseek = parse_layout("Et*3|(tt|)*29,m|L")
    assert len(deepseek) == 32
    assert deepseek[0] == VirtualStage(decoder=3, embedding=True)
    assert deepseek[1:30] == (VirtualStage(decoder=2),) * 29
    assert deepseek[30] == VirtualStage(decoder=0, mtp=1)
    assert deepseek[31] == VirtualStage(decoder=0, loss=True)
    assert sum(s.decoder for s in deepseek) == 61  # DeepSeek-V3's layers
    doc = parse_layout("E|(tt|)*2,(t|)*4,mL")
    assert [s.decoder for s in doc] == [0, 2, 2, 1, 1, 1, 1, 0]
    assert doc[-1] == VirtualStage(decoder=0, loss=True, mtp=1)
    with pytest.raises(SpecError, match=r"parallelism\.pipeline_layout.*'x'"):
        parse_layout("Etx|tL")


def test_a_layout_is_checked_as_megatron_core_checks_it() -> None:
    ok = stage_layers(
        61,
        pipeline_parallel=16,
        virtual_pipeline=2,
        framework="megatron",
        pipeline_layout="Et*3|(tt|)*29,m|L",
        mtp_num_layers=1,
    )
    # virtual stage i on rank i % 16: rank 0 holds stages 0 and 16 (3 + 2 layers), rank 14
    # stages 14 and 30 (2 + the MTP layer), rank 15 stages 15 and 31 (2 + the loss)
    assert ok == StageLayers(first=5, middle=4, last=2, ranks=(5, *[4] * 13, 2, 2))
    cases = {
        "tL|Et": "must start with E",
        "Et|tt": "must end with L",
        "Et|tL|L": "exactly once",
        "Et|tL": "holds 2 transformer layers",
    }
    for layout, text in cases.items():
        with pytest.raises(SpecError, match=text):
            stage_layers(
                3, pipeline_parallel=1, virtual_pipeline=1, framework="megatron",
                pipeline_layout=layout,
            )  # fmt: skip
    with pytest.raises(SpecError, match="MTP layers"):
        stage_layers(
            2, pipeline_parallel=1, virtual_pipeline=1, framework="megatron",
            pipeline_layout="EtmtL",
        )  # fmt: skip


def test_layer_count_lists_put_the_embedding_first_and_the_loss_last() -> None:
    counts = (15, 16, 16, 16, 16, 16, 16, 15)
    split = stage_layers(
        126, pipeline_parallel=8, virtual_pipeline=1, framework="nemo", pipeline_layout=counts
    )
    assert split.ranks == counts
    assert (split.first, split.middle, split.last) == (15, 16, 15)


@pytest.mark.parametrize(
    ("first", "last", "p", "v", "ranks"),
    [
        (15, 15, 8, 1, (15, 16, 16, 16, 16, 16, 16, 15)),
        (14, None, 8, 2, (14, *[16] * 7)),
        (None, 6, 4, 1, (40, 40, 40, 6)),
        (60, 66, 2, 1, (60, 66)),
    ],
)
def test_uneven_first_and_last_stages(
    first: int | None, last: int | None, p: int, v: int, ranks: tuple[int, ...]
) -> None:
    split = stage_layers(
        sum(ranks),
        pipeline_parallel=p,
        virtual_pipeline=v,
        framework="megatron",
        decoder_first_pipeline_num_layers=first,
        decoder_last_pipeline_num_layers=last,
    )
    assert split.ranks == ranks


@pytest.mark.parametrize(
    ("first", "last", "p", "v", "text"),
    [
        (15, None, 8, 2, "divisible by virtual_pipeline=2"),
        (10, 10, 8, 1, "must split evenly over the other 6"),
        (60, None, 1, 1, "there must be layers exactly when"),
    ],
)
def test_megatron_core_refuses_these_first_last_splits(
    first: int | None, last: int | None, p: int, v: int, text: str
) -> None:
    with pytest.raises(SpecError, match=text) as raised:
        stage_layers(
            126,
            pipeline_parallel=p,
            virtual_pipeline=v,
            framework="megatron",
            decoder_first_pipeline_num_layers=first,
            decoder_last_pipeline_num_layers=last,
        )
    assert "Megatron-Core TransformerConfig" in str(raised.value)


@pytest.mark.parametrize(
    ("layers", "p", "v", "first", "middle", "last"),
    [
        (126, 8, 8, 15, 16, 15),  # Llama 3.1 405B, pipeline 8 x virtual 8 (NeMo recipe)
        (126, 16, 4, 7, 8, 7),  # Llama 3.1 405B, pipeline 16 x virtual 4
        (94, 8, 1, 11, 12, 11),  # Qwen3-235B-A22B, pipeline 8
        (94, 4, 1, 23, 24, 23),  # Qwen3-235B-A22B, pipeline 4
        (94, 8, 4, 11, 12, 11),  # Qwen3-235B-A22B, pipeline 8 x virtual 4
        (94, 32, 3, 2, 3, 2),  # ... pipeline 32 x virtual 3: the first/last chunk holds E / L only
    ],
)
def test_the_issues_examples_split_with_the_account_for_options(
    layers: int, p: int, v: int, first: int, middle: int, last: int
) -> None:
    for framework in ("megatron", "nemo"):
        with pytest.raises(SpecError, match="Megatron-Core refuses an uneven split") as raised:
            stage_layers(layers, pipeline_parallel=p, virtual_pipeline=v, framework=framework)
        assert "account_for_embedding_in_pipeline_split and account_for_loss" in str(raised.value)
        split = stage_layers(
            layers,
            pipeline_parallel=p,
            virtual_pipeline=v,
            framework=framework,
            account_for_embedding_in_pipeline_split=True,
            account_for_loss_in_pipeline_split=True,
        )
        assert (split.first, split.middle, split.last) == (first, middle, last)
        assert sum(split.ranks) == layers


def test_an_even_split_is_every_frameworks_default() -> None:
    for framework in ("megatron", "nemo", "torchtitan", "deepspeed", "fsdp", "other"):
        split = stage_layers(96, pipeline_parallel=8, virtual_pipeline=3, framework=framework)
        assert split.ranks == (12,) * 8


@settings(max_examples=300, deadline=None)
@given(
    layers=st.integers(min_value=1, max_value=130),
    p=st.integers(min_value=2, max_value=16),
    v=st.integers(min_value=1, max_value=8),
)
def test_torchtitan_default_split_is_torchtitans(layers: int, p: int, v: int) -> None:
    """Where the layers do not divide, torchtitan's own partitioner gives the split (rank
    ``r`` holds virtual stages ``r, r + p, ...``); where it raises, the planner refuses."""
    if layers % (p * v) == 0:
        return  # an even split (the planner's prediction before uneven splits existed)
    try:
        per_stage = torchtitan_stage_layers(p * v, layers)
    except ValueError:
        with pytest.raises(SpecError, match="torchtitan"):
            stage_layers(layers, pipeline_parallel=p, virtual_pipeline=v, framework="torchtitan")
        return
    split = stage_layers(layers, pipeline_parallel=p, virtual_pipeline=v, framework="torchtitan")
    ranks = ranks_of(per_stage, p)
    assert (split.first, split.middle, split.last) == summary(ranks)
    assert sum(ranks) == layers


@pytest.mark.parametrize(
    ("layers", "p"), [(94, 8), (94, 4), (126, 8), (10, 4), (61, 4), (13, 4), (7, 3), (126, 16)]
)
def test_deepspeed_default_split_is_megatron_deepspeeds(layers: int, p: int) -> None:
    """Megatron-DeepSpeed's GPTModelPipe: embedding (and a transpose), the layers, a
    transpose, the final norm, the tied head and the loss as layer specs, partitioned with
    ``partition_method="type:transformer"`` (a 0/1 weight per spec)."""
    weights = [0, 0] + [1] * layers + [0, 0, 0, 0]
    parts = deepspeed_partition_balanced(weights, p)
    ranks = [sum(weights[parts[i] : parts[i + 1]]) for i in range(p)]
    split = stage_layers(layers, pipeline_parallel=p, virtual_pipeline=1, framework="deepspeed")
    assert (split.first, split.middle, split.last) == summary(ranks)
    with pytest.raises(SpecError, match="DeepSpeed"):
        stage_layers(layers, pipeline_parallel=p, virtual_pipeline=3, framework="deepspeed")


@settings(max_examples=300, deadline=None)
@given(
    layers=st.integers(min_value=1, max_value=200),
    p=st.integers(min_value=1, max_value=32),
    v=st.integers(min_value=1, max_value=8),
    embedding=st.booleans(),
    loss=st.booleans(),
    framework=st.sampled_from(["megatron", "nemo", "torchtitan", "deepspeed", "other"]),
)
def test_every_accepted_split_covers_all_layers(
    layers: int, p: int, v: int, embedding: bool, loss: bool, framework: str
) -> None:
    """Property: an accepted split holds every layer exactly once (first + middle ranks +
    last), never a negative count, and the batch form agrees with the one-scenario form."""
    first, middle, last, valid = stage_layer_arrays(
        layers,
        np.array([p]),
        np.array([v]),
        np.array([embedding]),
        np.array([loss]),
        framework,
    )
    try:
        split = stage_layers(
            layers,
            pipeline_parallel=p,
            virtual_pipeline=v,
            framework=framework,
            account_for_embedding_in_pipeline_split=embedding,
            account_for_loss_in_pipeline_split=loss,
        )
    except SpecError:
        assert not valid[0]
        return
    assert valid[0]
    assert (split.first, split.middle, split.last) == (first[0], middle[0], last[0])
    assert min(split.ranks) >= 0
    assert sum(split.ranks) == layers
    assert len(split.ranks) == p


@settings(max_examples=400, deadline=None)
@given(
    layers=st.integers(min_value=1, max_value=80),
    p=st.integers(min_value=1, max_value=16),
    v=st.integers(min_value=1, max_value=4),
    first=st.integers(min_value=0, max_value=30),
    last=st.integers(min_value=0, max_value=30),
)
def test_batch_first_last_split_is_the_one_scenario_split(
    layers: int, p: int, v: int, first: int, last: int
) -> None:
    """Property: the batch form of Megatron-Core's uneven first / last ranks (0 = unset)
    accepts exactly what ``stage_layers`` accepts, with the same layers per rank."""
    if first == last == 0:
        return
    no = np.array([False])
    got_first, got_middle, got_last, valid = stage_layer_arrays(
        layers, np.array([p]), np.array([v]), no, no, "megatron",
        first=np.array([first]), last=np.array([last]),
    )  # fmt: skip
    try:
        split = stage_layers(
            layers,
            pipeline_parallel=p,
            virtual_pipeline=v,
            framework="megatron",
            decoder_first_pipeline_num_layers=first or None,
            decoder_last_pipeline_num_layers=last or None,
        )
    except SpecError:
        assert not valid[0]
        return
    assert valid[0]
    assert (split.first, split.middle, split.last) == (got_first[0], got_middle[0], got_last[0])
    assert sum(split.ranks) == layers


def test_batch_first_last_split_is_refused_with_the_account_for_options() -> None:
    """Megatron-Core TransformerConfig: the uneven first / last ranks and the account_for
    options are two ways of splitting, never combined."""
    yes = np.array([True])
    *_, valid = stage_layer_arrays(
        61, np.array([8]), np.array([1]), yes, np.array([False]), "megatron",
        first=np.array([5]), last=np.array([8]),
    )  # fmt: skip
    assert not valid[0]
