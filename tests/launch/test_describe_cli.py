"""`planner describe`: the JSON contract, provenance, exit 2 for an unknown launch, and files read
only inside the launch's directory, bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()

MEGATRON_SCRIPT = """\
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
LAYERS=24
torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\
  --num-layers $LAYERS --hidden-size 2048 --num-attention-heads 16 \\
  --seq-length 4096 --max-position-embeddings 4096 \\
  --tensor-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 256 \\
  --train-iters 1000 --bf16 --swiglu
"""


def _describe(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["describe", *args])
    return result.exit_code, result.stdout, result.stderr


def test_describe_json_contract_with_provenance(tmp_path: Path) -> None:
    (tmp_path / "job.sbatch").write_text(MEGATRON_SCRIPT)
    code, out, err = _describe(
        str(tmp_path / "job.sbatch"), "--workdir", str(tmp_path), "--gpu", "h100-sxm", "--json"
    )
    assert code == 0, err
    body = json.loads(out)
    assert set(body) >= {"described_by", "scenario", "provenance", "unknown", "prediction"}
    assert body["described_by"] == "megatron"
    assert body["scenario"]["model"]["num_layers"] == 24
    assert body["scenario"]["hardware"]["num_gpus"] == 16
    assert body["scenario"]["parallelism"]["data_parallel"] == 8
    assert "job.sbatch" in body["provenance"]["model.num_layers"]
    assert body["prediction"]["iteration_time_s"] > 0


def test_describe_without_a_gpu_type_says_how_to_give_one(tmp_path: Path) -> None:
    (tmp_path / "job.sbatch").write_text(MEGATRON_SCRIPT)
    code, out, _ = _describe(str(tmp_path / "job.sbatch"), "--workdir", str(tmp_path), "--json")
    assert code == 0
    body = json.loads(out)
    assert "hardware.gpu" in body["unknown"]
    assert "--gpu" in body["prediction"]["error"]


def test_a_launch_no_reader_knows_exits_2(tmp_path: Path) -> None:
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH -N 1\nsrun hostname\necho done\n")
    code, _, err = _describe(str(tmp_path / "job.sbatch"), "--workdir", str(tmp_path))
    assert code == 2
    assert "no reader recognises this launch" in err


def test_a_command_line_is_described(tmp_path: Path) -> None:
    code, out, err = _describe(
        "--command",
        "torchrun --nproc_per_node 4 pretrain_gpt.py --num-layers 4 --hidden-size 256 "
        "--num-attention-heads 4 --seq-length 512 --micro-batch-size 1 --global-batch-size 8",
        "--workdir",
        str(tmp_path),
        "--gpus",
        "4",
        "--json",
    )
    assert code == 0, err
    body = json.loads(out)
    assert body["scenario"]["hardware"]["num_gpus"] == 4
    assert body["provenance"]["hardware.num_gpus"] == "override: --gpus"


def test_files_outside_the_launch_directory_are_not_read(tmp_path: Path) -> None:
    tree = tmp_path / "job"
    tree.mkdir()
    secret = tmp_path / "secret.yaml"
    secret.write_text("num_layers: 96\nhidden_size: 12288\nTOKEN: hunter2\n")
    (tree / "link.yaml").symlink_to(secret)
    for config in ("../secret.yaml", str(secret), "link.yaml"):
        (tree / "job.sbatch").write_text(
            f"#!/bin/bash\n#SBATCH --gpus=8\ntorchrun --nproc_per_node 8 pretrain_gpt.py "
            f"--yaml-cfg {config}\n"
        )
        code, out, err = _describe(str(tree / "job.sbatch"), "--workdir", str(tree), "--json")
        assert "hunter2" not in out + err
        assert "12288" not in out
        assert code == 2 or json.loads(out)["scenario"].get("model", {}).get("hidden_size") is None


def test_a_huge_config_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:
        f.truncate(100 * 1024 * 1024)  # sparse: 100 MB that costs nothing on disk
    (tmp_path / "job.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --gpus=8\ntorchrun --nproc_per_node 8 pretrain_gpt.py "
        "--yaml-cfg huge.yaml\n"
    )
    code, out, err = _describe(str(tmp_path / "job.sbatch"), "--workdir", str(tmp_path), "--json")
    assert code == 2
    assert "bytes" in json.loads(out).get("error", "") + err


def test_stdin_launch(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["describe", "-", "--workdir", str(tmp_path), "--json"],
        input=MEGATRON_SCRIPT,
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["scenario"]["model"]["hidden_size"] == 2048
    assert os.getcwd()  # the command never changes the caller's directory
