#!/usr/bin/env bash
# bench_embed.sh [BUILD_DIR] [CHECKPOINT] — batch-1 (and batch-64) classification latency of
# examples/embed: the compiled graph against eager tide in the same run, and against PyTorch
# running the same model on the same weights (bench_embed_torch.py; "absent" when python3 cannot
# import torch); peak RSS of the example. Without a checkpoint, trains one first with
# examples/fashion_mnist.lua (one epoch, ~30 s on 2 cores).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
ckpt=${2:-}
if [ -z "$ckpt" ]; then
  ckpt=$(mktemp /tmp/tide_bench_embed.XXXXXX.safetensors)
  trap 'rm -f "$ckpt"' EXIT
  "$build/lua/tide" "$here/../examples/fashion_mnist.lua" --epochs 1 --quiet --checkpoint "$ckpt" >&2
fi
out=$("$build/examples/embed/embed" "$ckpt")
echo "$out" | grep -E '^(accuracy|model)' >&2
echo "$out" | grep -E '^(latency|peak_rss)'
e1=$(echo "$out" | sed -n 's/^latency_batch1_eager: \([0-9.]*\) us/\1/p')
c1=$(echo "$out" | sed -n 's/^latency_batch1_compiled: \([0-9.]*\) us/\1/p')
# the first Python that imports torch: the PATH's, else Debian's own (python3-torch's)
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
done
torch=absent
[ -n "$py" ] && torch=$("$py" "$here/bench_embed_torch.py" "$ckpt" 2>/dev/null || echo "absent")
echo "latency_batch1_pytorch: $torch"
if [[ "$torch" =~ ^[0-9.]+\ us$ ]]; then
  t=${torch% us}
  awk -v c="$c1" -v t="$t" -v e="$e1" 'BEGIN {
    printf "latency_batch1_ratio_compiled_over_pytorch: %.2f x\n", c / t
    printf "latency_batch1_ratio_eager_over_pytorch: %.2f x\n", e / t }'
fi
