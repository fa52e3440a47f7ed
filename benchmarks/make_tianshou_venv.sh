#!/usr/bin/env bash
# Separate virtualenv for the Tianshou peer of `apexrl bench games`: PettingZoo's Tianshou tutorial pins
# tianshou==0.5.0 (tutorials/Tianshou/requirements.txt), whose API (offpolicy_trainer, DQNPolicy(model, optim))
# later releases replaced. The peer imports apexrl's evaluation code from this checkout (PYTHONPATH), so it
# needs only numpy-level dependencies here: pyyaml for apexrl.config, pygame for PettingZoo's classic games.
#
#   bash benchmarks/make_tianshou_venv.sh [VENV_DIR]      # default .venv-tianshou in the repository root
#   apexrl bench games --tianshou-python .venv-tianshou/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-tianshou}"
PYTHON="${PYTHON:-python3.11}"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install torch==2.13.0
"$VENV/bin/python" -m pip install tianshou==0.5.0 "pettingzoo==1.27.0" pygame pyyaml
"$VENV/bin/python" -c "import tianshou, pettingzoo.classic.tictactoe_v3; print('tianshou', tianshou.__version__)"
