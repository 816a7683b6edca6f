#!/usr/bin/env bash
# CI stage: the verl bridge, run by verl's own agent-loop machinery. verl pins transformers < 5.11,
# which clashes with the main test env, so it gets a venv of its own (.venv-verl).
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m venv .venv-verl
# shellcheck disable=SC1091
. .venv-verl/bin/activate
python -m pip install -q --upgrade pip
pip install -q torch==2.13.0
pip install -q -e ".[verl]" pytest pytest-timeout
# the torchvision wheel pip brings in does not load against the CPU torch; text models need none of these
pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
python -c "import verl, transformers; print('verl', verl.__version__, 'transformers', transformers.__version__)"
pytest -p no:xdist -p no:cacheprovider -q tests/stacks/verl
