"""The torchtitan reader: TOML job config + tyro-style overrides, flavors through the catalog,
the ParallelDims layout (shard -1 = the rest), the batch, converters -> precision."""

from __future__ import annotations

import pytest

from planner.errors import SourceError
from planner.launch.configs import load_config
from planner.launch.data import load_data
from planner.launch.describe import scenario_from_facts
from planner.launch.reader import ReadContext
from planner.launch.readers.torchrun import torchrun_world_size
from planner.launch.readers.torchtitan import READER, config_facts
from planner.launch.readers.torchtitan_flavors import flavor_fields, llama4_moe_ffn, llama_ffn
from planner.launch.readers.torchtitan_settings import cli_overrides
from planner.launch.types import Facts, Invocation, Launch, MemoryFiles
from planner.scenario import parse_scenario
from tests.launch import reader_support as support

JOB = "/jobs/titan"


def _invocation(
    *args: str,
    env: dict[str, str] | None = None,
    launcher_args: dict[str, str] | None = None,
    program: str = "torchtitan.train",
) -> Invocation:
    return Invocation(
        program=program,
        args=args,
        env=env or {},
        cwd=JOB,
        launcher="torchrun",
        launcher_args=launcher_args or {},
    )


def _read(invocation: Invocation, allocation: Facts | None = None) -> Facts:
    files = support.data_files("torchtitan", JOB, pattern="*.toml")
    return support.finished(support.read(READER, invocation, files, given=allocation))


def test_overrides_take_both_spellings_flags_and_lists() -> None:
    found = cli_overrides(
        [
            "--job.config-file",
            "a.toml",
            "--training.seq_len=65536",
            "--parallelism.data-parallel-shard-degree",
            "-1",
            "--compile.enable",
            "--model.converters=float8,quantize.grouped_mm.mx",
            "--activation_checkpoint.no-early-stop",
        ]
    )
    assert [(key, value) for key, value, _ in found] == [
        ("job.config_file", "a.toml"),
        ("training.seq_len", 65536),
        ("parallelism.data_parallel_shard_degree", -1),
        ("compile.enable", True),
        ("model.converters", ["float8", "quantize.grouped_mm.mx"]),
        ("activation_checkpoint.early_stop", False),
    ]
    assert found[1][2] == "--training.seq_len=65536"
    assert found[2][2] == "--parallelism.data-parallel-shard-degree -1"


def test_recognises_the_module_and_the_script_with_a_job_config() -> None:
    assert READER.recognises(_invocation())
    assert READER.recognises(_invocation(program="torchtitan.experiments.flux.train"))
    assert READER.recognises(_invocation("--job.config_file", "x.toml", program="train.py"))
    assert READER.recognises(_invocation(program="./torchtitan/train.py"))
    assert not READER.recognises(_invocation("--lr", "1", program="train.py"))
    assert not READER.recognises(_invocation(program="torchtitan.tools.download"))


def test_hsdp_tp_pp_layout_batch_and_float8_from_the_toml() -> None:
    facts = _read(
        _invocation(
            "--job.config_file",
            "./configs/llama3_70b_hsdp.toml",
            launcher_args={"nnodes": "8", "nproc_per_node": "8"},
        )
    )
    expected = {
        "model.num_layers": 80,
        "model.hidden_size": 8192,
        "model.num_query_groups": 8,
        "model.ffn_hidden_size": 28672,
        "model.vocab_size": 128256,
        "model.seq_length": 4096,
        "hardware.num_gpus": 64,
        "parallelism.tensor_parallel": 4,
        "parallelism.pipeline_parallel": 2,
        "parallelism.virtual_pipeline": 2,
        "parallelism.data_parallel": 8,
        "launch.fsdp_shard": 4,
        # PP 2: the local batch of 2 runs as one schedule of microbatches of 1 (the default).
        "parallelism.micro_batch_size": 1,
        "parallelism.pipeline_batch_size": 2,
        "parallelism.global_batch_size": 64,
        "launch.gradient_accumulation": 4,
        "parallelism.precision": "fp8",
        "parallelism.fp8_recipe": "tensorwise",
        "parallelism.recompute": "full",
        "parallelism.zero_stage": 3,
        "training.train_iters": 500,
        "training.mode": "pretrain",
        "training.framework": "torchtitan",
    }
    assert {name: facts.get(name) for name in expected} == expected
    assert facts.values["parallelism.tensor_parallel"].source == "llama3_70b_hsdp.toml:20"
    assert facts.values["model.num_layers"].source.startswith("catalog:torchtitan llama3/70B")
    assert "parallelism.micro_batch_size" in facts.assumed


def test_a_toml_config_job_states_the_code_of_its_releases() -> None:
    """A TOML-config checkout predates torchtitan's fused ``wqkv`` default and its dropping of
    the float8 tensor-parallel styles, which the framework profile describes: the job states
    its separate ``wq`` / ``wk`` / ``wv`` and, under tensorwise float8 with TP, FP8
    all-gathers; without float8 it states no FP8 all-gather."""
    fp8_tp = _read(
        _invocation(
            "--job.config_file",
            "./configs/llama3_70b_hsdp.toml",
            launcher_args={"nnodes": "8", "nproc_per_node": "8"},
        )
    )
    assert fp8_tp.get("parallelism.separate_qkv_projections") is True
    assert fp8_tp.get("parallelism.fp8_tp_all_gather") is True
    bf16_tp = _read(
        _invocation(
            "--job.config_file",
            "./configs/llama3_70b_hsdp.toml",
            "--model.converters",
            "",
            launcher_args={"nnodes": "8", "nproc_per_node": "8"},
        )
    )
    assert bf16_tp.get("parallelism.separate_qkv_projections") is True
    assert not bf16_tp.has("parallelism.fp8_tp_all_gather")
    fp8_no_tp = _read(
        _invocation(
            "--job.config_file",
            "./configs/llama3_70b_hsdp.toml",
            "--parallelism.tensor_parallel_degree",
            "1",
            launcher_args={"nnodes": "8", "nproc_per_node": "8"},
        )
    )
    assert fp8_no_tp.get("parallelism.fp8_recipe") == "tensorwise"
    assert not fp8_no_tp.has("parallelism.fp8_tp_all_gather")


def test_command_line_beats_the_toml_and_reshapes_the_layout() -> None:
    facts = _read(
        _invocation(
            "--job.config_file",
            "./configs/llama3_70b_hsdp.toml",
            "--training.seq_len=8192",
            "--parallelism.tensor_parallel_degree",
            "2",
            "--model.converters",
            "",
            launcher_args={"nnodes": "8", "nproc_per_node": "8"},
        )
    )
    assert facts.get("model.seq_length") == 8192
    assert facts.values["model.seq_length"].source == "override: --training.seq_len=8192"
    # shard = 64 / (replicate 2 x TP 2 x PP 2) = 8; global 64 = 2 x 16 x GA 2.
    assert facts.get("launch.fsdp_shard") == 8
    assert facts.get("parallelism.data_parallel") == 16
    assert facts.get("launch.gradient_accumulation") == 2
    assert facts.get("parallelism.precision") == "bf16"


def _pipeline_job(*args: str) -> Facts:
    return _read(
        _invocation(
            "--job.config_file",
            "configs/llama3_8b_pp.toml",
            *args,
            launcher_args={"nnodes": "2", "nproc_per_node": "8"},
        )
    )


def test_pipeline_runs_one_schedule_of_pp_microbatches_per_local_batch() -> None:
    facts = _pipeline_job()
    # 16 GPUs / PP 4 = DP 4; each of 256 / (16 x 4) = 4 accumulation steps runs one schedule
    # over the local batch of 16 in microbatches of 2.
    assert facts.get("parallelism.pipeline_parallel") == 4
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("parallelism.micro_batch_size") == 2
    assert facts.values["parallelism.micro_batch_size"].source == "llama3_8b_pp.toml:21"
    assert facts.get("parallelism.pipeline_batch_size") == 16
    assert facts.values["parallelism.pipeline_batch_size"].source == "llama3_8b_pp.toml:12"
    assert facts.get("parallelism.global_batch_size") == 256
    assert facts.get("launch.gradient_accumulation") == 4
    assert facts.get("parallelism.virtual_pipeline") == 1
    facts.set("hardware.gpu", "h100-sxm", "test")
    par = parse_scenario(scenario_from_facts(facts, name="pp")).parallelism
    assert par.num_microbatches == 32
    assert par.pipeline_schedule_runs == 4


def test_without_pipeline_the_local_batch_is_the_micro_batch() -> None:
    facts = _pipeline_job("--parallelism.pipeline_parallel_degree", "1")
    assert facts.get("parallelism.data_parallel") == 16
    assert facts.get("parallelism.micro_batch_size") == 16
    assert not facts.has("parallelism.pipeline_batch_size")
    assert facts.get("parallelism.global_batch_size") == 256
    assert facts.get("launch.gradient_accumulation") == 1


def test_pipeline_microbatch_from_an_earlier_release_count_and_bad_sizes() -> None:
    # Before pipeline_parallel_microbatch_size, releases took the number of microbatches.
    counted = _read(
        _invocation(
            "--job.config_file",
            "configs/llama3_8b_pp.toml",
            "--parallelism.pipeline_parallel_microbatches",
            "4",
            launcher_args={"nnodes": "2", "nproc_per_node": "8"},
        )
    )
    assert counted.get("parallelism.micro_batch_size") == 2  # the TOML's size wins
    toml = (support.DATA / "torchtitan/configs/llama3_8b_pp.toml").read_text(encoding="utf-8")
    older = toml.replace("pipeline_parallel_microbatch_size = 2", "")
    older = older.replace(
        "[parallelism]", "[experimental]\npipeline_parallel_microbatches = 4\n\n[parallelism]"
    )
    files = support.data_files("torchtitan", JOB, pattern="*.toml")
    files.files[f"{JOB}/configs/older.toml"] = older
    facts = support.finished(
        support.read(
            READER,
            _invocation(
                "--job.config_file",
                "configs/older.toml",
                launcher_args={"nnodes": "2", "nproc_per_node": "8"},
            ),
            files,
        )
    )
    assert facts.get("parallelism.micro_batch_size") == 4
    assert facts.values["parallelism.micro_batch_size"].source.startswith(
        "derived: local_batch_size / experimental.pipeline_parallel_microbatches"
    )
    assert facts.get("parallelism.pipeline_batch_size") == 16
    uneven = _pipeline_job("--parallelism.pipeline_parallel_microbatch_size", "3")
    assert not uneven.has("parallelism.pipeline_batch_size")
    assert any("local_batch_size 16 is not a multiple" in note for note in uneven.notes)


def test_config_facts_split_the_local_batch_under_pipeline_parallelism() -> None:
    toml = (support.DATA / "torchtitan/configs/llama3_8b_pp.toml").read_text(encoding="utf-8")
    facts = Facts()
    config_facts(facts, load_config(toml, "job_config", "toml"))
    assert facts.get("parallelism.micro_batch_size") == 2
    assert facts.get("parallelism.pipeline_batch_size") == 16


def test_config_file_from_the_environment_and_ngpu_world_size() -> None:
    facts = _read(
        _invocation(env={"CONFIG_FILE": "./configs/dsv3_ep.toml", "NGPU": "8"}),
    )
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("parallelism.expert_parallel") == 4
    assert facts.get("parallelism.expert_tensor_parallel") == 1
    assert facts.get("parallelism.data_parallel") == 8
    assert facts.get("parallelism.global_batch_size") == 16
    assert facts.get("parallelism.zero_stage") == 2  # fsdp_reshard_after_forward never
    assert facts.get("parallelism.recompute") == "none"
    assert facts.get("parallelism.precision") == "bf16"
    assert "parallelism.precision" in facts.assumed
    assert facts.get("model.multi_latent_attention") is True
    assert facts.get("model.kv_lora_rank") == 512
    assert not facts.has("model.num_query_groups")
    assert facts.get("model.num_dense_layers") == 1
    assert facts.get("model.moe_ffn_hidden_size") == 1408


def test_moe_flavor_with_mx_expert_gemms_and_explicit_shard() -> None:
    allocation = Facts()
    allocation.set("launch.world_size", 16, "launch: torchrun")
    facts = _read(_invocation("--job.config_file=configs/qwen3_moe_mx.toml"), allocation)
    assert facts.get("hardware.num_gpus") == 16
    assert facts.get("parallelism.data_parallel") == 16
    assert facts.get("parallelism.precision") == "mxfp8"
    assert facts.get("model.ffn_hidden_size") == 768
    assert facts.get("model.kv_channels") == 128
    assert facts.get("model.num_query_groups") == 4
    assert facts.get("model.moe_router_topk") == 8
    assert facts.get("model.untie_embeddings") is True
    assert any("expert GEMMs" in note for note in facts.notes)


def test_llama4_alternating_moe_layers() -> None:
    facts = _read(
        _invocation(
            "--job.config_file",
            "configs/llama4_128e.toml",
            launcher_args={"nnodes": "4", "nproc_per_node": "8"},
        )
    )
    assert facts.get("model.ffn_hidden_size") == 16384
    assert facts.get("model.moe_ffn_hidden_size") == 8192
    pattern = facts.get("model.moe_layer_freq")
    assert isinstance(pattern, list)
    assert pattern[:4] == [0, 1, 0, 1]
    assert len(pattern) == 48
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("parallelism.expert_tensor_parallel") == 1


def test_keys_of_earlier_releases() -> None:
    facts = _read(
        _invocation(
            "--job.config-file", "configs/legacy.toml", launcher_args={"nproc_per_node": "8"}
        )
    )
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.context_parallel") == 2
    assert facts.get("parallelism.data_parallel") == 2
    assert facts.get("parallelism.micro_batch_size") == 4
    assert facts.get("parallelism.global_batch_size") == 8
    assert facts.get("parallelism.precision") == "fp8"
    assert facts.values["parallelism.micro_batch_size"].source == "legacy.toml:7"


def test_no_world_size_leaves_the_data_parallel_open() -> None:
    facts = _read(_invocation("--job.config_file", "configs/legacy.toml"))
    assert not facts.has("launch.fsdp_shard")
    assert facts.get("parallelism.micro_batch_size") == 4
    assert not facts.has("parallelism.global_batch_size")
    assert any("processes" in note for note in facts.notes)
    assert "parallelism.global_batch_size" in facts.unknown


def test_no_config_takes_the_job_config_defaults() -> None:
    facts = _read(_invocation(launcher_args={"nproc_per_node": "2"}))
    assert facts.get("model.hidden_size") == 256  # llama3 debugmodel
    assert facts.get("model.seq_length") == 2048
    assert facts.get("parallelism.micro_batch_size") == 8
    assert facts.get("parallelism.global_batch_size") == 16
    assert "model.seq_length" in facts.assumed


def test_missing_config_file_names_it() -> None:
    with pytest.raises(SourceError, match=r"missing\.toml.*--job\.config_file"):
        _read(_invocation("--job.config_file", "configs/missing.toml"))


def test_unknown_flavor_is_a_note_not_a_guess() -> None:
    facts = _read(
        _invocation(
            "--job.config_file",
            "configs/legacy.toml",
            "--model.flavor",
            "3B",
            launcher_args={"nproc_per_node": "8"},
        )
    )
    assert not facts.has("model.num_layers")
    assert any("flavor 3B is not in the catalog" in note for note in facts.notes)


def test_world_size_sources_in_order() -> None:
    context = ReadContext(launch=Launch(), files=MemoryFiles(), allocation=Facts())
    assert torchrun_world_size(
        _invocation(env={"PET_NNODES": "1:3", "PET_NPROC_PER_NODE": "4"}), context
    ) == (12, "launch: PET_NNODES x PET_NPROC_PER_NODE")
    assert torchrun_world_size(_invocation(env={"WORLD_SIZE": "6"}), context) == (
        6,
        "launch: WORLD_SIZE",
    )
    assert torchrun_world_size(_invocation(), context) is None


def test_catalog_widths_match_the_rounding_rules() -> None:
    data = load_data("torchtitan.yaml")
    families = data["families"]
    assert isinstance(families, dict)
    checked = 0
    for name, family in families.items():
        for flavor, entry in family["flavors"].items():
            found = flavor_fields(data, name, flavor)
            assert not isinstance(found, str), found
            fields, _ = found
            assert isinstance(fields["model.num_layers"], int)
            assert fields["model.num_layers"] > 0
            if "ffn_hidden_size" in entry:
                assert fields["model.ffn_hidden_size"] == entry["ffn_hidden_size"], flavor
                checked += 1
            if "moe_ffn_hidden_size" in entry:
                assert fields["model.moe_ffn_hidden_size"] == entry["moe_ffn_hidden_size"]
    assert checked >= 7
    assert llama_ffn(4096, 1024, 1.3) == 14336
    assert llama4_moe_ffn(5120, 2048, 1.2, 2) == 8192


def test_bad_values_are_notes_not_errors() -> None:
    facts = _read(
        _invocation(
            "--job.config_file",
            "configs/legacy.toml",
            "--parallelism.tensor_parallel_degree",
            "0",
            "--training.seq_len",
            "long",
            launcher_args={"nproc_per_node": "8"},
        )
    )
    assert facts.get("parallelism.tensor_parallel") == 1
    assert not facts.has("model.seq_length")
    assert any("tensor_parallel_degree 0" in note for note in facts.notes)
    assert any("training.seq_len 'long'" in note for note in facts.notes)


def _async_tp_read(*args: str, config: str = "configs/llama3_8b_async_tp.toml") -> Facts:
    return _read(
        _invocation("--job.config_file", config, *args, launcher_args={"nproc_per_node": "8"})
    )


def test_async_tensor_parallel_is_tp_comm_overlap_under_compile() -> None:
    facts = _async_tp_read()
    assert facts.get("parallelism.tensor_parallel") == 8
    assert facts.get("parallelism.tp_comm_overlap") is True
    assert facts.values["parallelism.tp_comm_overlap"].source == "llama3_8b_async_tp.toml:14"
    facts.set("hardware.gpu", "h100-sxm", "test")
    assert parse_scenario(scenario_from_facts(facts, name="async")).parallelism.tp_comm_overlap
    # plain TP from the command line: stated, not assumed
    plain = _async_tp_read("--parallelism.no-enable-async-tensor-parallel")
    assert plain.get("parallelism.tp_comm_overlap") is False
    assert "parallelism.tp_comm_overlap" not in plain.assumed


def test_async_tensor_parallel_without_compile_is_a_note_and_no_overlap() -> None:
    facts = _async_tp_read("--compile.no-enable")
    assert not facts.has("parallelism.tp_comm_overlap")
    assert any("needs the model compiled" in note for note in facts.notes)
    only_loss = _async_tp_read("--compile.components", "loss")
    assert not only_loss.has("parallelism.tp_comm_overlap")


def test_async_tensor_parallel_default_off_and_earlier_spelling() -> None:
    default = _async_tp_read(config="configs/legacy.toml")
    assert default.get("parallelism.tp_comm_overlap") is False
    assert "parallelism.tp_comm_overlap" in default.assumed
    legacy = _async_tp_read(
        "--experimental.enable_async_tensor_parallel",
        "--training.compile",
        config="configs/legacy.toml",
    )
    assert legacy.get("parallelism.tp_comm_overlap") is True
    # without tensor parallelism there is nothing to overlap
    single = _async_tp_read("--parallelism.tensor_parallel_degree", "1")
    assert not single.has("parallelism.tp_comm_overlap")


def test_a_compiled_loss_is_stated_from_the_compile_section_only() -> None:
    facts = _async_tp_read()
    assert facts.get("training.compiled_loss") is True
    assert facts.values["training.compiled_loss"].source == "llama3_8b_async_tp.toml:20"
    facts.set("hardware.gpu", "h100-sxm", "test")
    assert parse_scenario(scenario_from_facts(facts, name="loss")).training.compiled_loss
    # the model compiled, the loss eager; compile off; neither says anything
    assert not _async_tp_read("--compile.components", "model").has("training.compiled_loss")
    assert not _async_tp_read("--compile.no-enable").has("training.compiled_loss")
    # the earlier key does not date the release that read it: a note, nothing stated
    legacy = _async_tp_read("--training.compile", config="configs/legacy.toml")
    assert not legacy.has("training.compiled_loss")
    assert any("compiles the loss only in releases" in note for note in legacy.notes)


_IMPLEMENTATION = "parallelism.optimizer_implementation"


def test_the_adamw_implementation_is_the_scenarios_optimizer_implementation() -> None:
    # unset: the fused default of the catalogued release, assumed, noting earlier checkouts
    default = _async_tp_read()
    assert default.get(_IMPLEMENTATION) == "fused"
    assert _IMPLEMENTATION in default.assumed
    (note,) = [n for n in default.notes if "optimizer.implementation unset" in n]
    assert "6e4988550" in note
    assert "foreach" in note
    default.set("hardware.gpu", "h100-sxm", "test")
    scenario = parse_scenario(scenario_from_facts(default, name="fused"))
    assert scenario.parallelism.optimizer_implementation == "fused"
    # given on the command line: stated, torchtitan's for-loop as for_loop
    loop = _async_tp_read("--optimizer.implementation", "for-loop")
    assert loop.get(_IMPLEMENTATION) == "for_loop"
    assert _IMPLEMENTATION not in loop.assumed
    assert loop.values[_IMPLEMENTATION].source == "override: --optimizer.implementation for-loop"
    assert _async_tp_read("--optimizer.implementation=foreach").get(_IMPLEMENTATION) == "foreach"
    # the boolean of releases from 2024-06 to 2025-02: false is foreach
    older_false = _async_tp_read("--optimizer.no-fused", config="configs/legacy.toml")
    assert older_false.get(_IMPLEMENTATION) == "foreach"
    older = _async_tp_read("--optimizer.fused", config="configs/legacy.toml")
    assert older.get(_IMPLEMENTATION) == "fused"
    assert "optimizer.fused of releases" in older.values[_IMPLEMENTATION].source
    # the newer key wins over the older one
    both = _async_tp_read("--optimizer.fused", "--optimizer.implementation", "foreach")
    assert both.get(_IMPLEMENTATION) == "foreach"
    # fused with bf16 moments (releases since 2026-04)
    bf16 = _async_tp_read("--optimizer.implementation", "fused_opt_states_bf16")
    assert bf16.get(_IMPLEMENTATION) == "fused"
    assert bf16.get("parallelism.exp_avg_dtype") == "bf16"
    assert bf16.get("parallelism.exp_avg_sq_dtype") == "bf16"
    assert not _async_tp_read().has("parallelism.exp_avg_dtype")
    # an implementation build_optimizers refuses: noted, nothing stated
    unknown = _async_tp_read("--optimizer.implementation", "apex")
    assert not unknown.has(_IMPLEMENTATION)
    assert any("'apex'" in note and "build_optimizers" in note for note in unknown.notes)
