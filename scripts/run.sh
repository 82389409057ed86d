#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains a classifier on the real
# Fashion-MNIST training set, then reports its test-set accuracy (examples/fashion_mnist.lua).
# Arguments go to the example: bash scripts/run.sh --model cnn --epochs 3
#
# The second job: bash scripts/run.sh gpt [options] trains a byte-level GPT on the fortunes
# corpus for 10 minutes (examples/gpt.lua --time-budget 600; options given after `gpt` go to
# it and override the preset), reports the validation bits per byte, then prints a sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
if [ "${1:-}" = gpt ]; then
  shift
  ck=build/gpt.safetensors
  prev=
  for a in "$@"; do
    case "$prev" in --checkpoint) ck=$a ;; esac
    case "$a" in --checkpoint=*) ck=${a#--checkpoint=} ;; esac
    prev=$a
  done
  ./build/lua/tide examples/gpt.lua --time-budget 600 --checkpoint "$ck" "$@"
  echo "--- a sample (examples/gpt.lua --sample 400 --checkpoint $ck):"
  ./build/lua/tide examples/gpt.lua --sample 400 --prompt "The " --checkpoint "$ck"
  exit 0
fi
model=mlp
prev=
for a in "$@"; do
  case "$prev" in --model) model=$a ;; esac
  case "$a" in --model=*) model=${a#--model=} ;; esac
  prev=$a
done
./build/lua/tide examples/fashion_mnist.lua --checkpoint "build/fashion_mnist_${model}.safetensors" "$@"
