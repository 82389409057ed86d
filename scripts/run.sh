#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the example program.
# (For now a linear model fitted by gradient steps written with tide ops; the Fashion-MNIST
# training run takes its place once autograd and nn land.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/examples/linear_fit
