#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains a classifier on the real
# Fashion-MNIST training set, then reports its test-set accuracy (examples/fashion_mnist.lua).
# Arguments go to the example: bash scripts/run.sh --model cnn --epochs 3
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
model=mlp
prev=
for a in "$@"; do
  case "$prev" in --model) model=$a ;; esac
  case "$a" in --model=*) model=${a#--model=} ;; esac
  prev=$a
done
./build/lua/tide examples/fashion_mnist.lua --checkpoint "build/fashion_mnist_${model}.safetensors" "$@"
