#!/bin/bash
OUT=./tmp
DS_JSON=${OUT}/ds.json
MICRO=2
GLOBAL=64
STAGE=1
USE_CKPT="yes"
LAYERS=12

mkdir -p $OUT
cat > $DS_JSON <<CONFIG
{
  "train_batch_size": $GLOBAL,
  "train_micro_batch_size_per_gpu": $MICRO,
  "zero_optimization": { "stage": $STAGE }
}
CONFIG

cat <<'RAW' > ${OUT}/raw.txt
keep $GLOBAL as written
RAW

extra=""
if [ "$USE_CKPT" = "yes" ]; then
  extra="--checkpoint-activations"
elif [ "$USE_CKPT" = "partial" ]; then
  extra="--partial"
else
  extra="--none"
fi

deepspeed --num_gpus 4 --num_nodes 2 ../toy_pretrain.py \
  --num-layers $LAYERS --micro-batch-size $MICRO --global-batch-size $GLOBAL \
  --deepspeed_config $DS_JSON $extra
