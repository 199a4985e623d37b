#!/usr/bin/env bash
# Record the dev-stack training logs of the ETA replay (tests/data/logs/README.md, "Runs of the
# dev stack for the ETA"): real runs of train.py under the local Slurm with the pauses, phases,
# restarts and slowed ranks real runs have. Run once, as root, from the repository root:
#   flock /tmp/planner-integration.lock bash deploy/dev/tiny_gpt/record-eta-logs.sh [OUT_DIR]
# OUT_DIR defaults to tests/data/logs. Starts the dev Slurm (slurm-up.sh) and stops it again
# when it started it. Each run's batch script holds its arguments literally, as a user's would.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$repo/tests/data/logs}
py=${PLANNER_PYTHON:-$repo/.venv/bin/python}
stack=${STACK_ROOT:-/tmp/planner-dev-stack}
work=$(mktemp -d /tmp/eta-logs.XXXXXX)
chmod 777 "$work"
started=0
pgrep -x slurmctld >/dev/null || started=1
bash "$repo/deploy/dev/slurm-up.sh" # idempotent: daemons already running are left alone
# shellcheck disable=SC1091
source "$stack/slurm/env.sh"
cleanup() { ((started == 0)) || bash "$repo/deploy/dev/slurm-down.sh"; }
trap cleanup EXIT

common="--num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length 128
  --max-position-embeddings 128 --vocab-size 1024 --micro-batch-size 4 --global-batch-size 8
  --lr 1.0e-3 --min-lr 1.0e-4 --lr-warmup-iters 10 --lr-decay-style cosine --log-interval 10"

script() { # name, args... : a batch script with the arguments written out
  local name=$1
  shift
  cat >"$work/$name.sbatch" <<EOF
#!/bin/bash
#SBATCH -J $name
#SBATCH -N 1
#SBATCH -n 2
#SBATCH -c 1
#SBATCH --gres=gpu:h100:2
#SBATCH --open-mode=append
#SBATCH -o $work/$name.out
export OMP_NUM_THREADS=1
srun $py $repo/deploy/dev/tiny_gpt/train.py $(echo $common) $*
EOF
  echo "$work/$name.sbatch"
}

wait_job() {
  local id=$1
  while squeue -h -j "$id" 2>/dev/null | grep -q .; do sleep 2; done
  sacct -n -X -j "$id" -o JobID,State,Start,End,Elapsed 2>/dev/null || true
}

# A: an evaluation every 20 % of the run and a slower phase (every rank x1.5) from 40 % to 60 %
a=$(sbatch --parsable "$(script tiny_gpt_eval_slowphase_1500it --train-iters 1500 \
  --eval-interval 300 --eval-iters 150 --slow-phase-from-iteration 601 \
  --slow-phase-to-iteration 900 --slow-phase-factor 1.5 --no-rank-lines)")
wait_job "$a"
# B: checkpoints every 200, an evaluation every 400; the first job exits at 700, a second job
# continues the run from the checkpoint of 600 (the iterations 601-700 are done again)
ck="$work/ckpt"
b1=$(sbatch --parsable "$(script tiny_gpt_ckpt_restart_1200it --train-iters 1200 \
  --eval-interval 400 --eval-iters 100 --save "$ck" --save-interval 200 --exit-interval 700 \
  --load "$ck" --no-rank-lines)")
wait_job "$b1"
b2=$(sbatch --parsable "$(script tiny_gpt_ckpt_restart_1200it --train-iters 1200 \
  --eval-interval 400 --eval-iters 100 --save "$ck" --save-interval 200 --load "$ck" \
  --no-rank-lines)")
wait_job "$b2"
# C: rank 1 slowed x1.6 from iteration 400 (a straggler: every rank waits for it), an
# evaluation every 250
c=$(sbatch --parsable "$(script tiny_gpt_slowrank_eval_1000it --train-iters 1000 \
  --eval-interval 250 --eval-iters 150 --slow-rank 1 --slow-factor 1.6 \
  --slow-from-iteration 400)")
wait_job "$c"

for name in tiny_gpt_eval_slowphase_1500it tiny_gpt_ckpt_restart_1200it tiny_gpt_slowrank_eval_1000it; do
  cp "$work/$name.out" "$out/$name.log"
  echo "recorded $out/$name.log"
done
