#!/usr/bin/env bash
# Ape-X DQN on Atari at the hardware's limit, one GPU machine, one command (fits 9 minutes):
#   (a) whole-system env steps/s with 1, 2, 4, 8 and 14 actors of the atari-gpu preset (~15 s each)
#   (b) Pong with the atari-gpu preset until greedy evaluation >= 19 or a 7-minute cap
#   (c) metrics, the curve and a stamped result (commit, date, host, GPU, command) under $DEST
#   (d) the learner's update rate alone on this GPU (bench update), beside its in-run rate from (b): goal >= 80 %
#   FEED=1: also the replay feed to a null learner on this machine's cores and GPU (bench feed, ~2 min)
# Replay settings come from the atari-gpu preset: 2 shards x 4 batches per request, chosen with `apexrl bench feed`
# (one shard core served 167 batches/s of 512 Atari transitions on the 2-core dev host; docs/benchmarks.md
# "Replay feed"), so the feed is not what holds a 100 updates/s learner back.
# On the GPU machine:   bash benchmarks/atari_gpu.sh                      (DEST defaults to bench-results/)
# Try it on a CPU host: DEVICE=cpu ACTORS=1,2 SCALE_S=30 PONG_S=60 bash benchmarks/atari_gpu.sh
set -euo pipefail
DEVICE=${DEVICE:-cuda}
ACTORS=${ACTORS:-1,2,4,8,14}       # (a): actor counts
SCALE_S=${SCALE_S:-15}             # (a): seconds per count
PONG_S=${PONG_S:-420}              # (b): cap in seconds
TARGET=${TARGET:-19}
GAME=${GAME:-ALE/Pong-v5}
DEST=${DEST:-bench-results/atari-gpu-$(date +%Y%m%d-%H%M%S)}
APEXRL=${APEXRL:-apexrl}           # or "python3 -m apexrl" where the script is not installed
export PYTHONUNBUFFERED=1
mkdir -p "$DEST"
ON=() SMALL=()
if [ "$DEVICE" = cpu ]; then        # the same script on a host without a GPU: everything on the CPU, small
  ON=(--set actors.device=cpu --set actors.num_gpus=0 --set learner.device=cpu --set learner.num_gpus=0
      --set replay.capacity=100000 --set replay.learning_starts=2000)
  SMALL=(--set actors.num_actors=1)
else
  python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device: set DEVICE=cpu'"
fi
stamp() {
  echo "commit $(git describe --always --dirty 2>/dev/null || echo unknown) date $(date -Is) host $(hostname)" \
       "cpus $(nproc) gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo none)"
  echo "command: DEVICE=$DEVICE ACTORS=$ACTORS SCALE_S=$SCALE_S PONG_S=$PONG_S TARGET=$TARGET GAME=$GAME bash benchmarks/atari_gpu.sh"
}
stamp > "$DEST/result.txt"

# (a) scaling: each count is a real train() run, evaluation off, free-running learner
$APEXRL bench scaling actors --config atari-gpu --actors "$ACTORS" --total-envs 0 --seconds "$SCALE_S" \
  --set env.id="$GAME" --set logging.report_interval_s=2 --set replay.learning_starts=5000 "${ON[@]}" 2>&1 | tee "$DEST/scaling.log" | grep '^actors='
{ echo "## whole system, env steps/s by actor count"; grep '^actors=' "$DEST/scaling.log"; } >> "$DEST/result.txt"

# (b) Pong until the target or the cap
$APEXRL train --config atari-gpu --set env.id="$GAME" --target-return "$TARGET" --max-time "$PONG_S" \
  --run-dir "$DEST/run" --console plain "${ON[@]}" "${SMALL[@]}" 2>&1 | tee "$DEST/train.log" | grep -E '^ +[0-9]+s|^stopping|^done|eval' || true
$APEXRL plot "$DEST/run" -o "$DEST/curve.png" >/dev/null 2>&1 || echo "plot failed" >> "$DEST/result.txt"
cp "$DEST/run/metrics.jsonl" "$DEST/metrics.jsonl"
{ echo "## $GAME, target $TARGET, cap ${PONG_S}s"; grep -E '^stopping|^done' "$DEST/train.log" || true
  python3 - "$DEST/metrics.jsonl" <<'PY'
import json, sys
recs = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
ev = [r for r in recs if r.get("eval_return_mean") is not None]
best = max(ev, key=lambda r: r["eval_return_mean"]) if ev else None
print("evaluations:", [(round(r["time_s"]), r["eval_return_mean"]) for r in ev])
print("best:", None if best is None else (best["eval_return_mean"], "at", round(best["time_s"]), "s"))
import statistics
learning = [r for r in recs if r.get("updates_per_s")][1:-1] or recs
def med(k):
    v = [r[k] for r in learning if r.get(k) is not None]
    return round(statistics.median(v), 3) if v else None
print("env steps", recs[-1].get("env_steps") if recs else None, "| median over reports while learning: env steps/s",
      med("env_steps_per_s"), "updates/s", med("updates_per_s"), "learner idle", med("learner_idle_fraction"))
PY
} >> "$DEST/result.txt"

# (d) the learner alone on the same device: one process, one fixed batch, no Ray (bench update)
LEARNER_DEVICE=$([ "$DEVICE" = cpu ] && echo cpu || echo cuda)
$APEXRL bench update --preset atari-gpu --variant "learner.device=$LEARNER_DEVICE" --updates 100 --repeats 3 \
  --out "$DEST/update.json" 2>&1 | tee "$DEST/update.log" | tail -2
python3 - "$DEST/update.json" "$DEST/metrics.jsonl" <<'PY' >> "$DEST/result.txt"
import json, statistics, sys
alone = 1e6 / json.load(open(sys.argv[1]))["rows"][0]["us_per_update"]
recs = [json.loads(x) for x in open(sys.argv[2]) if x.strip()]
run = [r["updates_per_s"] for r in recs if r.get("updates_per_s")][1:-1]
in_run = statistics.median(run) if run else float("nan")
print(f"## learner: {in_run:.1f} updates/s in the run, {alone:.1f} alone: {100 * in_run / alone:.0f} % (goal >= 80 %)")
PY
if [ "${FEED:-0}" = 1 ]; then
  $APEXRL bench feed --config atari --shards 1,2,4 --k 1,4 --capacity 400000 --seconds 3 --blocks 3 \
    --set learner.device="$LEARNER_DEVICE" --out "$DEST/feed.json" 2>&1 | tee "$DEST/feed.log" | grep -v '^wrote'
  { echo "## replay feed (bench feed)"; grep -E '^ +(preset|atari)' "$DEST/feed.log"; } >> "$DEST/result.txt"
fi
cat "$DEST/result.txt"
