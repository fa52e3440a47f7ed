#!/usr/bin/env bash
# The MinAtar preset on each game and seed in turn (one run at a time: a run uses every core of a small
# host), then random play on each game, and the markdown table and figure (curves.png: a column per game,
# median over seeds, min-max band) of docs/benchmarks.md. Budgets are per game, in seconds:
#   pip install -e ".[minatar]"
#   bash benchmarks/minatar.sh                                   # all five games, seeds 0-2 (~2 h)
#   GAMES="Seaquest Asterix" SEEDS="0" bash benchmarks/minatar.sh
set -euo pipefail
GAMES=${GAMES:-"Breakout Asterix Seaquest Freeway SpaceInvaders"}
SEEDS=${SEEDS:-"0 1 2"}
OUT=${OUT:-bench-results/minatar-$(date +%Y%m%d-%H%M%S)}
APEXRL=${APEXRL:-apexrl}
declare -A BUDGET=([Breakout]=${BREAKOUT_S:-600} [Asterix]=${ASTERIX_S:-600} [Seaquest]=${SEAQUEST_S:-600}
                   [Freeway]=${FREEWAY_S:-300} [SpaceInvaders]=${SPACEINVADERS_S:-300})
mkdir -p "$OUT"
for game in $GAMES; do
  for seed in $SEEDS; do
    run="$OUT/${game,,}-s$seed"
    [ -f "$run/metrics.jsonl" ] && continue   # rerunning the script finishes what is missing
    $APEXRL train --config minatar --set env.id="MinAtar/$game-v1" --set seed="$seed" \
      --set stop.max_time_s="${BUDGET[$game]}" --console plain --run-dir "$run" > "$run.log" 2>&1
  done
  first=$(ls -d "$OUT/${game,,}"-s* | grep -v '\.log$' | head -1)
  [ -f "$OUT/${game,,}-random.txt" ] || $APEXRL eval "$first" --episodes 20 --epsilon 1 > "$OUT/${game,,}-random.txt"
done
{ echo "commit $(git describe --always --dirty 2>/dev/null || echo unknown) date $(date -Is) host $(hostname) cores $(nproc)"
  echo "command: GAMES=\"$GAMES\" SEEDS=\"$SEEDS\" bash benchmarks/minatar.sh"
  python3 "$(dirname "$0")/minatar_table.py" "$OUT" --png "$OUT/curves.png"; } | tee "$OUT/table.md"
