#!/usr/bin/env bash
# bench_gpt_peers.sh [BUILD_DIR] [ROUNDS] — bench/bench_gpt.lua with PyTorch 2 beside it: the
# GPT training step under tide.jit against the same step in PyTorch eager and under
# torch.compile (bench/bench_gpt_torch.py), same threads. PyTorch comes from PyPI into
# BUILD_DIR/bench-venv (made when missing; several GB); not part of the tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
rounds=${2:-7}
venv=$build/bench-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    "$venv/bin/pip" install -q torch numpy
fi
cd "$here/.."
TIDE_TORCH_PYTHON="$venv/bin/python" "$build/lua/tide" bench/bench_gpt.lua "$rounds" "$build"
