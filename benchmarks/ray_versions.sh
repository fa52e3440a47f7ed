#!/usr/bin/env bash
# apexrl on each Ray of the supported range, as a user meets it: for every virtualenv given (each with one
# Ray, made as `python3 -m venv V && V/bin/pip install torch==2.13.0 "ray[default,tune]==X" -e .`),
#   (a) `apexrl train --target-return 475` on a private Ray: its start-up, time to the target, peak memory,
#       the start-up's warnings (no token, stock start), and every listening socket of the run on loopback
#   (b) `apexrl train --address` against a `ray start --head` of the same Ray (token mode where that Ray has
#       tokens), CartPole to 475 again; the head is ended by its own process group, never `ray stop`.
# No RAY_* variable reaches (a). Output: one stamped text file under bench-results/ (commit, date, host, command).
#   bash benchmarks/ray_versions.sh /tmp/v240 /tmp/v253 .venv
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench-results/ray-versions-$(date +%Y%m%d-%H%M%S).txt
mkdir -p bench-results
{
  echo "# apexrl on Ray versions; commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'), $(date -Is), host $(hostname), $(nproc) cores"
  echo "# command: bash benchmarks/ray_versions.sh $*"
} | tee "$OUT"
clean_env() { env $(env | grep -o '^RAY_[A-Z_]*' | sed 's/^/-u /') "$@"; }
for V in "$@"; do
  V=$(cd "$V" && pwd)
  PY="$V/bin/python"
  RAY=$("$PY" -c "import ray; print(ray.__version__)")
  TOKENS=$("$PY" -c "from apexrl.runtime.ray_compat import token_auth; print(int(token_auth()))")
  WORK=$(mktemp -d)
  echo "## Ray $RAY ($V)" | tee -a "$OUT"
  # (a) private run, sockets sampled while it trains
  (cd "$WORK" && clean_env "$PY" -m apexrl train --target-return 475 --max-time 240 --console plain \
      --run-dir "$WORK/private" > "$WORK/private.log" 2>&1) & RUN=$!
  EXPOSED=""
  for _ in $(seq 1 20); do
    sleep 1
    EXPOSED+=$("$PY" - "$RUN" <<'EOF'
import sys, psutil
try:
    root = psutil.Process(int(sys.argv[1]))
except psutil.Error:
    sys.exit()
for p in [root, *root.children(recursive=True)]:
    try:
        for c in p.net_connections(kind="inet"):
            if c.status == psutil.CONN_LISTEN and c.laddr.ip not in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
                print(f"{p.name()} {c.laddr.ip}:{c.laddr.port};", end="")
    except psutil.Error:
        pass
EOF
)
  done
  wait "$RUN" && RC=0 || RC=$?
  { grep -E "WARNING|Warning|start-up:|^done:|error" "$WORK/private.log" || true; } | sed 's/^/  private: /' | tee -a "$OUT"
  echo "  private: exit $RC; listening beyond loopback: ${EXPOSED:-none}" | tee -a "$OUT"
  # (b) a ray start head of the same Ray, the run joins it by address
  PORT=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
  HEAD_ENV=(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0)
  TOKEN=""
  if [ "$TOKENS" = 1 ]; then TOKEN=$(openssl rand -hex 32); HEAD_ENV+=(RAY_AUTH_MODE=token "RAY_AUTH_TOKEN=$TOKEN"); fi
  setsid env "${HEAD_ENV[@]}" "$V/bin/ray" start --head --block --port="$PORT" --num-cpus=3 \
      --node-ip-address=127.0.0.1 --include-dashboard=false --disable-usage-stats > "$WORK/head.log" 2>&1 & HEAD=$!
  for _ in $(seq 1 60); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.5; done
  START=$(date +%s.%N)
  (cd "$WORK" && env RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ${TOKEN:+RAY_AUTH_TOKEN=$TOKEN} "$PY" -m apexrl train \
      --address "127.0.0.1:$PORT" --target-return 475 --max-time 240 --console plain --run-dir "$WORK/cluster" \
      > "$WORK/cluster.log" 2>&1) && RC=0 || RC=$?
  END=$(date +%s.%N)
  kill -TERM -- -"$HEAD" 2>/dev/null || true; sleep 2; kill -KILL -- -"$HEAD" 2>/dev/null || true; wait "$HEAD" 2>/dev/null || true
  { grep -E "WARNING|Warning|^done:|error" "$WORK/cluster.log" || true; } | sed 's/^/  --address: /' | tee -a "$OUT"
  printf '  --address: exit %s, %.1f s from the command to its exit (token: %s)\n' "$RC" "$(echo "$END - $START" | bc)" \
      "$([ -n "$TOKEN" ] && echo yes || echo 'no, this Ray has none')" | tee -a "$OUT"
  rm -rf "$WORK"
done
echo "wrote $OUT"
