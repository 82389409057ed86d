#!/usr/bin/env bash
# test_embed.sh TIDE_PROGRAM EMBED_PROGRAM SOURCE_DIR — trains the MLP of
# examples/fashion_mnist.lua briefly (first 2000 training images, one epoch), then runs
# examples/embed on its checkpoint over the whole test set: embed exits non-zero unless its
# accuracy equals the one the Lua script recorded; here every mode (eager/compiled, batch 1/64)
# must agree with it within 0.1 %. Skips (77) without the dataset.
set -uo pipefail
tide=$1 embed=$2 src=$3
dataset=${TIDE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -e "$dataset/t10k-images-idx3-ubyte.gz" ] || [ ! -e "$dataset/train-images-idx3-ubyte.gz" ]; then
  echo "skip: no Fashion-MNIST at $dataset (set TIDE_FASHION_MNIST)"; exit 77
fi
tmp=$(mktemp -d /tmp/tide_embed_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
if "$tide" "$src/examples/fashion_mnist.lua" --epochs 1 --limit 2000 --quiet --data "$dataset" \
     --checkpoint "$tmp/mlp.safetensors" > "$tmp/train.log" 2>&1; then
  passed=$((passed + 1)); echo "ok: fashion_mnist.lua wrote a checkpoint"
else
  failed=$((failed + 1)); echo "FAILED: fashion_mnist.lua"; cat "$tmp/train.log"
fi
cat "$tmp/train.log"
if "$embed" --data "$dataset" "$tmp/mlp.safetensors" > "$tmp/embed.log" 2>&1; then
  passed=$((passed + 1)); echo "ok: embed gives the accuracy the Lua script recorded"
else
  failed=$((failed + 1)); echo "FAILED: embed"
fi
cat "$tmp/embed.log"
ref=$(sed -n 's/^accuracy (eager, batch 1000): \([0-9.]*\) %.*/\1/p' "$tmp/embed.log")
for mode in eager_batch1 compiled_batch1 eager_batch64 compiled_batch64; do
  acc=$(sed -n "s/^$mode: accuracy \([0-9.]*\) %.*/\1/p" "$tmp/embed.log")
  if [ -n "$acc" ] && [ -n "$ref" ] && awk -v a="$acc" -v r="$ref" 'BEGIN { d = a - r; exit !(d < 0.1 && d > -0.1) }'; then
    passed=$((passed + 1)); echo "ok: $mode accuracy $acc % (batch 1000: $ref %)"
  else
    failed=$((failed + 1)); echo "FAILED: $mode accuracy '$acc' vs '$ref'"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
