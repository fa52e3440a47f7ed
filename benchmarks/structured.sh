#!/usr/bin/env bash
# Structured observations and action masks learning to a target, each task and seed in turn (one run at a
# time: a run uses every core of a small host), random legal play for reference, and the markdown table of
# docs/envs.md. Targets and why: docs/envs.md.
#   bash benchmarks/structured.sh                       # four tasks, seeds 0-2 (~15 min on 2 cores)
#   TASKS="taxi maze" SEEDS="0" bash benchmarks/structured.sh
set -euo pipefail
TASKS=${TASKS:-"frozenlake blackjack taxi maze"}
SEEDS=${SEEDS:-"0 1 2"}
BUDGET=${BUDGET:-300}
OUT=${OUT:-bench-results/structured-$(date +%Y%m%d-%H%M%S)}
APEXRL=${APEXRL:-apexrl}
declare -A ARGS=(
  [frozenlake]="--set env.id=FrozenLake-v1 --set evaluation.episodes=200 --target-return 0.7"
  [blackjack]="--set env.id=Blackjack-v1 --set evaluation.episodes=1000 --set evaluation.interval_s=3 --target-return -0.08"
  [taxi]="--config taxi"
  [maze]="--config maze --set env_config.illegal_log=$(realpath -m "$OUT")/maze-illegal-actions.txt")  # the env counts them
mkdir -p "$OUT"
for task in $TASKS; do
  for seed in $SEEDS; do
    run="$OUT/$task-s$seed"
    [ -f "$run/metrics.jsonl" ] && continue   # rerunning the script finishes what is missing
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    $APEXRL train ${ARGS[$task]} --set seed="$seed" --max-time "$BUDGET" --console plain --run-dir "$run" > "$run.log" 2>&1
    echo "$(date +%s.%N) - $t0" | bc > "$run.wall_s"
  done
  first="$OUT/$task-s$(echo "$SEEDS" | cut -d' ' -f1)"
  [ -f "$OUT/$task-random.txt" ] || $APEXRL eval "$first" --episodes 200 --epsilon 1 --newest > "$OUT/$task-random.txt"
done
{ echo "commit $(git describe --always --dirty 2>/dev/null || echo unknown) date $(date -Is) host $(hostname) cores $(nproc)"
  echo "command: TASKS=\"$TASKS\" SEEDS=\"$SEEDS\" bash benchmarks/structured.sh"
  python3 "$(dirname "$0")/structured_table.py" "$OUT"; } | tee "$OUT/table.md"
