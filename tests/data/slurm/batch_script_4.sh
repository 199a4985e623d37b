#!/bin/bash
#SBATCH --job-name=gpt-7b
#SBATCH --nodes=1
#SBATCH --gres=gpu:h100:2
#SBATCH --ntasks-per-node=1
#SBATCH --output=logs/%x-%j.out
#SBATCH --comment=planner:scenario=/tmp/planner-rec/x.yaml
GPT_ARGS="--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 1024 \
  --train-iters 500000 --lr 3e-4 --bf16"
PARALLEL_ARGS="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1"
echo torchrun --nproc-per-node 2 pretrain_gpt.py $GPT_ARGS $PARALLEL_ARGS --log-interval 10
sleep 900
