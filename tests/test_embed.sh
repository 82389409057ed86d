#!/usr/bin/env bash
# test_embed.sh TIDE_PROGRAM EMBED_PROGRAM SOURCE_DIR — trains each model of
# examples/fashion_mnist.lua briefly with --export, then runs examples/embed (C, no Lua) on the
# exported graph file over the test images the script evaluated:
#   mlp: the first 2000 training images, one epoch; the whole test set
#   cnn: the first 512 training images (8 batches of 64), one epoch; the first 300 test images
#        (the CNN's conv, BatchNorm2d in eval mode with its running statistics, ReLU, max pool)
# embed exits non-zero unless its batch-1000 accuracy equals the one the Lua script recorded;
# here the accuracy the script printed must equal embed's too (same ops, same images: the same
# predictions), and batches of 64 and 1 must agree with it within 0.1 % (batch size may
# reorder float sums, which can flip a near-tie).
# Skips (77) without the dataset.
set -uo pipefail
tide=$1 embed=$2 src=$3
dataset=${TIDE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -e "$dataset/t10k-images-idx3-ubyte.gz" ] || [ ! -e "$dataset/train-images-idx3-ubyte.gz" ]; then
  echo "skip: no Fashion-MNIST at $dataset (set TIDE_FASHION_MNIST)"; exit 77
fi
tmp=$(mktemp -d /tmp/tide_embed_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }

# check_model MODEL "TRAIN ARGS" "EMBED ARGS"
check_model() {
  local model=$1 train_args=$2 embed_args=$3 ck=$tmp/$1.safetensors graph=$tmp/$1.tgraph
  # shellcheck disable=SC2086
  if "$tide" "$src/examples/fashion_mnist.lua" --model "$model" --epochs 1 --quiet \
       --data "$dataset" --checkpoint "$ck" --export "$graph" $train_args > "$tmp/train.log" 2>&1; then
    ok "fashion_mnist.lua --model $model exported its forward pass"
  else
    bad "fashion_mnist.lua --model $model"
  fi
  cat "$tmp/train.log"
  # shellcheck disable=SC2086
  if "$embed" --data "$dataset" $embed_args "$graph" > "$tmp/embed.log" 2>&1; then
    ok "embed ($model) gives the accuracy the Lua script recorded"
  else
    bad "embed ($model)"
  fi
  cat "$tmp/embed.log"
  local lua ref acc mode
  lua=$(sed -n 's/^test accuracy \([0-9.]*\)% after.*/\1/p' "$tmp/train.log")
  ref=$(sed -n 's/^accuracy (batch 1000): \([0-9.]*\) %.*/\1/p' "$tmp/embed.log")
  if grep -q "(same)$" "$tmp/embed.log" && [ -n "$lua" ] && [ "$lua" = "$ref" ]; then
    ok "$model: embed's accuracy $ref % is the one the Lua script printed ($lua %)"
  else
    bad "$model: embed's accuracy '$ref' vs the Lua script's '$lua' (or not compared)"
  fi
  for mode in batch64 batch1; do
    acc=$(sed -n "s/^$mode: accuracy \([0-9.]*\) %.*/\1/p" "$tmp/embed.log")
    if [ -n "$acc" ] && [ -n "$ref" ] && awk -v a="$acc" -v r="$ref" 'BEGIN { d = a - r; exit !(d < 0.1 && d > -0.1) }'; then
      ok "$model: $mode accuracy $acc % (batch 1000: $ref %)"
    else
      bad "$model: $mode accuracy '$acc' vs '$ref'"
    fi
  done
}

check_model mlp "--limit 2000" ""
check_model cnn "--limit 512 --test-limit 300 --batch-size 64" "--limit 300"

# embed without the script's --limit classifies more images: it says so and does not compare.
"$embed" --data "$dataset" --limit 301 "$tmp/cnn.tgraph" > "$tmp/embed.log" 2>&1
if grep -q "not compared: --limit 300 compares" "$tmp/embed.log"; then
  ok "embed --limit 301 on a 300-image record: not compared, and says why"
else
  bad "embed --limit 301"; cat "$tmp/embed.log"
fi
# A graph of another model is refused with a message naming its input; a checkpoint is no graph.
"$tide" -e "local tide = require 'tide'
  tide.export(function(x) return x * 2 end, { tide.zeros(2, 20) }, '$tmp/other.tgraph')"
"$embed" --data "$dataset" "$tmp/other.tgraph" > "$tmp/embed.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "embed: the graph's input 'input0' is float32 with 2 dims" "$tmp/embed.log"; then
  ok "a graph that is not fashion_mnist.lua's: $(head -1 "$tmp/embed.log")"
else
  bad "a foreign graph: status $rc"; cat "$tmp/embed.log"
fi
"$embed" --data "$dataset" "$tmp/cnn.safetensors" > "$tmp/embed.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "not a tide graph file" "$tmp/embed.log"; then
  ok "a checkpoint given as the graph: $(head -1 "$tmp/embed.log")"
else
  bad "a checkpoint given as the graph: status $rc"; cat "$tmp/embed.log"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
