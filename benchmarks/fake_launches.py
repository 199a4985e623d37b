"""The launches of the fake Slurm's jobs (``benchmarks/fake_slurm.py``): the batch script's
launch line and the config files it names, in the styles the planner's launch readers describe
(``planner.launch``), so that the load benchmark describes jobs of every style at scale.

Each style writes its config files into the job's working directory (``configs/`` under the
user's home), once per user, model and layout (users reuse their configs: a few hundred files
for 10,000 jobs), world-readable as the service's job-file rules require of a user that is not
a host user. The launch line carries what changes from job to job (steps, batch) as the
framework's own command-line overrides. The config contents are written here for this
benchmark; they are small and realistic, not copies of the frameworks' examples.

Styles (:data:`STYLES`: style -> the ``described_by`` of the reader that describes it):

- ``torchtitan``: ``torchrun ... -m torchtitan.train --job.config_file configs/X.toml`` with
  ``--training.steps`` / ``--parallelism.*`` overrides;
- ``hf_trainer``: ``accelerate launch --config_file`` (DeepSpeed ZeRO-3 through its JSON) or
  ``torchrun`` running a Hugging Face Trainer script (``sft.py``, ``HfArgumentParser``);
- ``nemo2``: ``nemo llm pretrain --factory "recipe(num_nodes=N)"`` with dotted overrides;
- ``torchtune``: ``tune run [torchrun options] recipe --config configs/X.yaml key=value``;
- ``megatron_deepspeed``: a wrapper script setting shell variables, writing its DeepSpeed JSON
  with a heredoc and running ``pretrain_gpt.py --deepspeed``;
- ``axolotl``: ``axolotl train configs/X.yaml --key value``;
- ``llamafactory``: ``llamafactory-cli train configs/X.yaml key=value`` under
  ``FORCE_TORCHRUN``;
- ``plain``: ``python train.py --config ...``, which no reader recognises.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

#: Launch style -> the reader that describes it (``described_by``; None: none does).
STYLES: dict[str, str | None] = {
    "torchtitan": "torchtitan",
    "hf_trainer": "hf_trainer",
    "nemo2": "nemo2",
    "torchtune": "torchtune",
    "megatron_deepspeed": "megatron_deepspeed",
    "axolotl": "axolotl",
    "llamafactory": "llamafactory",
    "plain": None,
}

#: Shapes of the fake's models for the Megatron-DeepSpeed wrapper: layers, hidden, heads.
_SHAPES = {
    "gpt-1.3b": (24, 2048, 16),
    "llama3-8b": (32, 4096, 32),
    "llama2-13b": (40, 5120, 40),
    "llama3-70b": (80, 8192, 64),
    "gpt3-175b": (96, 12288, 96),
}
_BIG = ("llama3-70b", "gpt3-175b")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobLaunch:
    """What a launch is written for: the job's model (a key of the fake's models), its tensor
    and pipeline parallel sizes, GPUs, GPUs per node of its partition, iterations and global
    batch; ``work_dir`` is where its config files go."""

    name: str
    model: str
    tp: int
    pp: int
    gpus: int
    per_node: int
    train_iters: int
    gbs: int
    work_dir: Path

    @property
    def nodes(self) -> int:
        return max(1, -(-self.gpus // self.per_node))

    @property
    def nproc(self) -> int:
        return min(self.gpus, self.per_node)

    @property
    def big(self) -> bool:
        return self.model in _BIG


def _write(path: Path, text: str) -> str:
    """Write ``path`` (world-readable) unless it exists; returns its path relative to the
    working directory (``configs/...``)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.replace(path)
    return f"{path.parent.name}/{path.name}"


def launch_lines(style: str, job: JobLaunch, rng: random.Random) -> str:
    """The launch part of the batch script of ``job`` in ``style`` (lines after the
    ``#SBATCH`` header), writing the config files it names."""
    writers = {
        "torchtitan": _torchtitan,
        "hf_trainer": _hf_trainer,
        "nemo2": _nemo2,
        "torchtune": _torchtune,
        "megatron_deepspeed": _megatron_deepspeed,
        "axolotl": _axolotl,
        "llamafactory": _llamafactory,
        "plain": _plain,
    }
    return writers[style](job, rng)


def _configs(job: JobLaunch) -> Path:
    return job.work_dir / "configs"


def _torchtitan(job: JobLaunch, rng: random.Random) -> str:
    flavor = {"llama3-70b": "70B", "gpt3-175b": "405B"}.get(job.model, "8B")
    tp = min(job.tp, job.gpus)
    pp = job.pp if tp * job.pp <= job.gpus else 1
    seq = rng.choice([4096, 8192])
    config = _write(
        _configs(job) / f"titan-llama3-{flavor.lower()}-tp{tp}-pp{pp}.toml",
        f"""# llama3 {flavor} pretraining, {tp}-way tensor and {pp}-way pipeline parallel
[job]
dump_folder = "./outputs/llama3-{flavor.lower()}"

[model]
name = "llama3"
flavor = "{flavor}"

[optimizer]
name = "AdamW"
lr = 3e-4

[training]
local_batch_size = 1
seq_len = {seq}
steps = 10000

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = {tp}
pipeline_parallel_degree = {pp}

[activation_checkpoint]
mode = "{"full" if job.big else "selective"}"

[checkpoint]
enable = true
interval = 500
""",
    )
    local = max(1, job.gbs // max(1, job.gpus // (tp * pp)) // 4)
    return (
        "export NCCL_IB_DISABLE=0\n"
        f"CONFIG_FILE=${{CONFIG_FILE:-{config}}}\n"
        f"srun torchrun --nnodes {job.nodes} --nproc_per_node {job.nproc} "
        "--rdzv_backend c10d --rdzv_endpoint $(hostname):29500 \\\n"
        "  -m torchtitan.train --job.config_file $CONFIG_FILE \\\n"
        f"  --training.steps {job.train_iters} --training.local_batch_size {local}\n"
    )


def _hf_id(job: JobLaunch) -> str:
    return "meta-llama/Llama-3.1-70B" if job.big else "meta-llama/Llama-3.1-8B"


def _hf_trainer(job: JobLaunch, rng: random.Random) -> str:
    script = _write(
        job.work_dir / "scripts" / "sft.py",
        '''"""Supervised fine-tuning of a causal LM with the Hugging Face Trainer."""
from dataclasses import dataclass, field

from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="meta-llama/Llama-3.1-8B")
    max_seq_length: int = 4096


def main() -> None:
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    Trainer(model=model, args=training_args).train()


if __name__ == "__main__":
    main()
''',
    )
    micro = rng.choice([1, 2, 4])
    accumulation = max(1, job.gbs // (micro * job.gpus))
    args = (
        f"  {script} --model_name_or_path {_hf_id(job)} --per_device_train_batch_size {micro} \\\n"
        f"  --gradient_accumulation_steps {accumulation} --max_steps {job.train_iters} "
        "--bf16 --gradient_checkpointing \\\n"
        "  --learning_rate 2e-5 --logging_steps 10 --output_dir outputs/sft\n"
    )
    if rng.random() < 0.5 or job.gpus == 1:
        return (
            f"srun torchrun --nnodes {job.nodes} --nproc_per_node {job.nproc} "
            "--rdzv_backend c10d --rdzv_endpoint $(hostname):29500 \\\n" + args
        )
    ds = _write(
        _configs(job) / "ds-zero3.json",
        json.dumps(
            {
                "bf16": {"enabled": "auto"},
                "zero_optimization": {
                    "stage": 3,
                    "overlap_comm": True,
                    "stage3_gather_16bit_weights_on_model_save": True,
                },
                "gradient_accumulation_steps": "auto",
                "train_micro_batch_size_per_gpu": "auto",
                "train_batch_size": "auto",
            },
            indent=2,
        )
        + "\n",
    )
    accelerate = _write(
        _configs(job) / f"accelerate-zero3-{job.nodes}x{job.nproc}.yaml",
        f"""compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  deepspeed_config_file: {ds}
  zero3_init_flag: true
machine_rank: 0
num_machines: {job.nodes}
num_processes: {job.nodes * job.nproc}
mixed_precision: bf16
rdzv_backend: static
same_network: true
""",
    )
    return (
        "MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)\n"
        f"srun accelerate launch --config_file {accelerate} --machine_rank $SLURM_NODEID \\\n"
        "  --main_process_ip $MASTER_ADDR --main_process_port 29500 \\\n" + args
    )


def _nemo2(job: JobLaunch, rng: random.Random) -> str:
    recipe = {"llama3-70b": "llama3_70b", "gpt3-175b": "llama31_405b"}.get(job.model, "llama3_8b")
    tp = min(job.tp, job.gpus)
    pp = job.pp if tp * job.pp <= job.gpus else 1
    return (
        "export NEMO_HOME=$HOME/nemo\n"
        f'srun nemo llm pretrain --factory "{recipe}(num_nodes={job.nodes})" -y \\\n'
        f"  trainer.devices={job.nproc} trainer.max_steps={job.train_iters} \\\n"
        f"  trainer.strategy.tensor_model_parallel_size={tp} "
        f"trainer.strategy.pipeline_model_parallel_size={pp} \\\n"
        "  trainer.strategy.context_parallel_size=1 "
        "trainer.strategy.virtual_pipeline_model_parallel_size=None \\\n"
        f"  data.global_batch_size={job.gbs} data.micro_batch_size=1 "
        f"log.ckpt.save_last={rng.choice(['True', 'False'])}\n"
    )


def _torchtune(job: JobLaunch, rng: random.Random) -> str:
    lora = job.big or rng.random() < 0.5
    size = "70b" if job.big else "8b"
    builder = f"torchtune.models.llama3_1.{'lora_' if lora else ''}llama3_1_{size}"
    lora_lines = "  lora_attn_modules: [q_proj, v_proj, output_proj]\n  lora_rank: 16\n"
    config = _write(
        _configs(job) / f"tune-llama3_1-{size}-{'lora' if lora else 'full'}.yaml",
        f"""# Llama 3.1 {size.upper()} {"LoRA" if lora else "full"} fine-tune on the team's chats
output_dir: outputs/llama3_1-{size}
model:
  _component_: {builder}
{lora_lines if lora else ""}tokenizer:
  _component_: torchtune.models.llama3.llama3_tokenizer
  path: /models/llama3_1-{size}/original/tokenizer.model
  max_seq_len: 4096
dataset:
  _component_: torchtune.datasets.alpaca_cleaned_dataset
  packed: true
seed: 1234
shuffle: true
batch_size: 2
epochs: 1
max_steps_per_epoch: 1000
gradient_accumulation_steps: 4
optimizer:
  _component_: torch.optim.AdamW
  lr: 2.0e-5
  fused: true
loss:
  _component_: torchtune.modules.loss.LinearCrossEntropyLoss
device: cuda
dtype: bf16
enable_activation_checkpointing: true
""",
    )
    recipe = "lora_finetune_distributed" if lora else "full_finetune_distributed"
    return (
        "source ~/venvs/tune/bin/activate\n"
        f"tune run --nnodes {job.nodes} --nproc_per_node {job.nproc} {recipe} \\\n"
        f"  --config {config} max_steps_per_epoch={job.train_iters} "
        f"batch_size={rng.choice([1, 2, 4])}\n"
    )


def _megatron_deepspeed(job: JobLaunch, rng: random.Random) -> str:
    layers, hidden, heads = _SHAPES[job.model]
    tp = min(job.tp, job.gpus)
    pp = job.pp if tp * job.pp <= job.gpus else 1
    zero = rng.choice([0, 1])
    return (
        f"NLAYERS={layers}\nHIDDEN={hidden}\nHEADS={heads}\nSEQ=2048\n"
        f"MICRO_BATCH=1\nGLOBAL_BATCH={job.gbs}\nTP={tp}\nPP={pp}\nZERO_STAGE={zero}\n"
        "DS_CONFIG=ds_config_${SLURM_JOB_ID}.json\n"
        "cat <<EOT > $DS_CONFIG\n"
        "{\n"
        '  "train_batch_size": $GLOBAL_BATCH,\n'
        '  "train_micro_batch_size_per_gpu": $MICRO_BATCH,\n'
        '  "zero_optimization": {"stage": $ZERO_STAGE},\n'
        '  "bf16": {"enabled": true},\n'
        '  "steps_per_print": 100\n'
        "}\n"
        "EOT\n"
        'ds_args="--deepspeed --deepspeed_config $DS_CONFIG --zero-stage $ZERO_STAGE"\n'
        'ds_args="$ds_args --deepspeed-activation-checkpointing"\n'
        "srun python pretrain_gpt.py \\\n"
        "  --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP \\\n"
        "  --num-layers $NLAYERS --hidden-size $HIDDEN --num-attention-heads $HEADS \\\n"
        "  --seq-length $SEQ --max-position-embeddings $SEQ \\\n"
        "  --micro-batch-size $MICRO_BATCH --global-batch-size $GLOBAL_BATCH \\\n"
        f"  --train-iters {job.train_iters} --lr 1.0e-4 --bf16 --log-interval 10 $ds_args\n"
    )


def _axolotl(job: JobLaunch, rng: random.Random) -> str:
    base = "meta-llama/Meta-Llama-3-70B" if job.big else "meta-llama/Meta-Llama-3-8B"
    size = "70b" if job.big else "8b"
    config = _write(
        _configs(job) / f"axolotl-llama3-{size}-lora.yaml",
        f"""base_model: {base}
load_in_8bit: false
adapter: lora
lora_r: 16
lora_alpha: 32
lora_dropout: 0.05
lora_target_linear: true
datasets:
  - path: data/support-chats.jsonl
    type: chat_template
sequence_len: 4096
sample_packing: true
micro_batch_size: 2
gradient_accumulation_steps: 4
max_steps: 1000
learning_rate: 0.0002
optimizer: adamw_torch_fused
bf16: true
gradient_checkpointing: true
output_dir: ./outputs/llama3-{size}-lora
""",
    )
    return (
        f"srun axolotl train {config} --max-steps {job.train_iters} "
        f"--learning-rate {rng.choice(['0.0001', '0.0002'])}\n"
    )


def _llamafactory(job: JobLaunch, rng: random.Random) -> str:
    model = (
        "meta-llama/Meta-Llama-3-70B-Instruct" if job.big else "meta-llama/Meta-Llama-3-8B-Instruct"
    )
    size = "70b" if job.big else "8b"
    ds = _write(
        _configs(job) / "ds-z2.json",
        json.dumps(
            {
                "zero_optimization": {"stage": 2},
                "bf16": {"enabled": "auto"},
                "train_batch_size": "auto",
                "train_micro_batch_size_per_gpu": "auto",
            }
        )
        + "\n",
    )
    config = _write(
        _configs(job) / f"lmf-llama3-{size}-sft.yaml",
        f"""### model
model_name_or_path: {model}
### method
stage: sft
do_train: true
finetuning_type: {"lora" if job.big else "full"}
deepspeed: {ds}
### dataset
dataset: team_chats
template: llama3
cutoff_len: 4096
### train
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 1.0e-5
max_steps: 2000
bf16: true
output_dir: outputs/llama3-{size}-sft
""",
    )
    return (
        f"export FORCE_TORCHRUN=1 NNODES={job.nodes} NPROC_PER_NODE={job.nproc}\n"
        f"srun llamafactory-cli train {config} max_steps={job.train_iters} "
        f"gradient_accumulation_steps={rng.choice([4, 8, 16])}\n"
    )


def _plain(job: JobLaunch, _rng: random.Random) -> str:
    return f"srun python train.py --config configs/{job.name}.yaml\n"
