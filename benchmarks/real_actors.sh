#!/usr/bin/env bash
# The driver's cost with real actors, as a cluster user runs apexrl: a `ray start` head with 56 logical CPUs on
# this host, `apexrl train --address`, N single-env actors on a CartPole whose step takes 1/35 s (the paper's
# per-actor Atari rate: 48 actors are then not starved on 2 cores), no periodic evaluation. For each N: the
# driver process's CPU over a 40 s window after a 25 s warm-up, the actors' env steps/s (from the run's last
# reports) and the training return at the end.
#
#   bash benchmarks/real_actors.sh [N ...]        (default: 4 48; ~2 min per N)
#
# Output: bench-results/real-actors-<date>.txt, stamped with commit, date, host and command.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python)}
COUNTS=("$@"); [ ${#COUNTS[@]} -eq 0 ] && COUNTS=(4 48)
OUT=bench-results/real-actors-$(date +%Y%m%d-%H%M%S).txt
mkdir -p bench-results
{
  echo "# real actors on a ray start head (56 logical CPUs); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'), $(date -Is), host $(hostname), $(nproc) cores"
  echo "# command: bash benchmarks/real_actors.sh $*"
  echo "# actors | driver CPU (% of a core, 40 s) | env steps/s per actor (env allows 35) | train return (low-explore mean) at the end"
} | tee "$OUT"
WORK=$(mktemp -d)
PORT=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
TOKEN=$(openssl rand -hex 32)
setsid env RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_AUTH_MODE=token "RAY_AUTH_TOKEN=$TOKEN" \
    "$(dirname "$PY")/ray" start --head --block --port="$PORT" --num-cpus=56 --node-ip-address=127.0.0.1 \
    --include-dashboard=false --disable-usage-stats > "$WORK/head.log" 2>&1 & HEAD=$!
trap 'kill -TERM -- -"$HEAD" 2>/dev/null || true; sleep 2; kill -KILL -- -"$HEAD" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 60); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.5; done
# utime + stime of the apexrl command and its descendants (it runs the driver in a child of its own)
ticks() {
  local t=0 p
  for p in $(pstree -p -T "$1" | grep -o '([0-9]*)' | tr -d '()'); do
    t=$((t + $(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0)))
  done
  echo "$t"
}
for N in "${COUNTS[@]}"; do
  sleep 15  # the previous run's workers give their CPUs back to the head
  RUN="$WORK/run-$N"
  # The head listens on loopback only; without this Ray's driver swaps 127.0.0.1 for the host's address.
  (cd "$WORK" && exec env RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_AUTH_TOKEN="$TOKEN" "$PY" -m apexrl train --address "127.0.0.1:$PORT" --max-time 75 \
      --console plain --run-dir "$RUN" --set env.id=apexrl.envs.testing:PacedCartPole-v1 \
      --set actors.num_actors="$N" --set actors.envs_per_actor=1 --set evaluation.interval_s=0 \
      > "$WORK/run-$N.log" 2>&1) & PID=$!
  sleep 25
  C0=$(ticks "$PID"); T0=$(date +%s.%N)
  sleep 40
  C1=$(ticks "$PID"); T1=$(date +%s.%N)
  wait "$PID" || { echo "run with $N actors failed:"; tail -5 "$WORK/run-$N.log"; exit 1; }
  "$PY" - "$N" "$C0" "$C1" "$T0" "$T1" "$RUN/metrics.jsonl" <<'EOF' | tee -a "$OUT"
import json, os, sys
n, c0, c1, t0, t1, path = int(sys.argv[1]), *map(float, sys.argv[2:6]), sys.argv[6]
cpu = 100 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0)
recs = [json.loads(x) for x in open(path)]
late = [r for r in recs if r["time_s"] >= 25][:-1]  # the last record is the final one, after the stop
rate = (late[-1]["env_steps"] - late[0]["env_steps"]) / (late[-1]["time_s"] - late[0]["time_s"]) / n \
    if len(late) > 1 else float("nan")
shown = [r["env_steps_per_s"] / n for r in late if r.get("env_steps_per_s")]
print(f"# {n} actors: env steps/s per actor as the reports showed it: {sum(shown) / max(1, len(shown)):.1f}")
ret = recs[-1].get("train_return_low_explore_mean") or recs[-1].get("train_return_mean")
print(f"{n:>6} | {cpu:6.2f} | {rate:5.1f} | {ret}")
EOF
done
echo "wrote $OUT"
