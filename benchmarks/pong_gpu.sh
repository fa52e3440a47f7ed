#!/usr/bin/env bash
# Ape-X DQN on ALE/Pong-v5 with the learner on one GPU and actors on every other core, for a fixed time;
# writes the run dir, the greedy-eval curve and a stamped result line. On a machine with a GPU:
#   pip install torch==2.13.0 -e ".[test]"      # a CUDA build of torch on the GPU machine
#   MINUTES=8 ACTORS=14 bash benchmarks/pong_gpu.sh
set -euo pipefail
MINUTES=${MINUTES:-8}
ACTORS=${ACTORS:-$(( $(nproc) - 2 ))}
RUN=${RUN:-bench-results/pong-gpu-$(date +%Y%m%d-%H%M%S)}
APEXRL=${APEXRL:-apexrl}   # or "python3 -m apexrl" where the script is not installed
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device: this benchmark needs a GPU'"
mkdir -p "$(dirname "$RUN")"
$APEXRL train --config atari --run-dir "$RUN" --console plain \
  --set learner.device=cuda --set learner.num_gpus=1 --set actors.num_actors="$ACTORS" \
  --set stop.max_time_s=$(( MINUTES * 60 )) --set evaluation.interval_s=60 2>&1 | tee "$RUN.log"
$APEXRL plot "$RUN" -o "$RUN.png"
{ echo "commit $(git describe --always --dirty 2>/dev/null || echo unknown) date $(date -Is) host $(hostname)";
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true;
  echo "command: MINUTES=$MINUTES ACTORS=$ACTORS bash benchmarks/pong_gpu.sh";
  grep '^done:' "$RUN.log"; } > "$RUN.txt"
cat "$RUN.txt"
