#!/usr/bin/env bash
# Separate virtualenv for the RLlib peer of `apexrl bench e2e`. RLlib 2.60 pins gymnasium==1.2.2 and needs
# dm-tree, so it would downgrade the main venv's gymnasium; the benchmark runs its RLlib child with this
# venv's interpreter instead (--rllib-python / APEXRL_RLLIB_PYTHON) and everything else with the main one.
#
#   bash benchmarks/make_rllib_venv.sh [VENV_DIR]          # default .venv-rllib in the repository root
#   APEXRL_RLLIB_PYTHON=$PWD/.venv-rllib/bin/python apexrl bench e2e --peers apexrl,sb3,rllib
#
# PYTHON picks the interpreter (default python3.11); TORCH the torch requirement (default torch==2.13.0:
# pinned, as in the README, because an unpinned torch pulls a multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-rllib}"
PYTHON="${PYTHON:-python3.11}"
TORCH="${TORCH:-torch==2.13.0}"

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
# apexrl (editable, for apexrl.config and the shared apexrl.evaluation) and RLlib in one resolve.
"$VENV/bin/python" -m pip install "$TORCH" -e . "ray[rllib]==2.60.0"
"$VENV/bin/python" -m pip check
"$VENV/bin/python" -c "import ray, gymnasium, torch, ray.rllib.algorithms.dqn, apexrl.evaluation
print(f'ray {ray.__version__}, gymnasium {gymnasium.__version__}, torch {torch.__version__}')"
echo "RLlib peer ready: APEXRL_RLLIB_PYTHON=$(cd "$VENV" && pwd)/bin/python apexrl bench e2e --peers rllib"
