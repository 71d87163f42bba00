#!/usr/bin/env bash
# Issue 37 part 2: every stage of experiments/vanilla_arms.py that is not done yet, in the plan's order (data, the
# vanilla start's evaluation, train + eval of each arm, seed by seed, then the report), one child process at a time,
# one torch thread, niced. It first waits for the vanilla pretraining (experiments/vanilla.py) to finish. A killed
# queue is simply started again: finished stages are skipped, a training resumes from its last checkpoint and an
# evaluation from its last recorded part. Extra arguments go to `vanilla_arms.py run-all` (e.g. --scifact,
# --arms simcse,hicl, --seeds 1). Start it detached from the repository root:
#
#   setsid nohup experiments/run_vanilla_arms.sh > experiments/runs/vanilla_arms.log 2>&1 < /dev/null &
#
# Progress: grep run-all experiments/runs/vanilla_arms.log; what is missing: python experiments/vanilla_arms.py
# report --check. The report goes to docs/results/vanilla_arms.json and docs/results/vanilla_arms.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
exec nice -n "${NICE:-15}" "${PYTHON:-python}" experiments/vanilla_arms.py run-all --wait --threads 1 "$@"
