#!/usr/bin/env bash
# bench_embed.sh [BUILD_DIR] [CHECKPOINT GRAPH] — batch-1 (and batch-64) classification latency
# of examples/embed running the graph file fashion_mnist.lua --export writes, against PyTorch
# running the same model on the same weights (bench_embed_torch.py on the checkpoint; "absent"
# when python3 cannot import torch); peak RSS of the example. Without files, trains the MLP
# first with examples/fashion_mnist.lua (one epoch, ~30 s on 2 cores).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
ckpt=${2:-}
graph=${3:-}
if [ -z "$ckpt" ] || [ -z "$graph" ]; then
  tmp=$(mktemp -d /tmp/tide_bench_embed.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  ckpt=$tmp/mlp.safetensors graph=$tmp/mlp.tgraph
  "$build/lua/tide" "$here/../examples/fashion_mnist.lua" --epochs 1 --quiet \
    --checkpoint "$ckpt" --export "$graph" >&2
fi
out=$("$build/examples/embed/embed" "$graph")
echo "$out" | grep -E '^(accuracy|model)' >&2
echo "$out" | grep -E '^(latency|peak_rss)'
c1=$(echo "$out" | sed -n 's/^latency_batch1: \([0-9.]*\) us/\1/p')
# the first Python that imports torch: the PATH's, else Debian's own (python3-torch's)
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
done
torch=absent
[ -n "$py" ] && torch=$("$py" "$here/bench_embed_torch.py" "$ckpt" 2>/dev/null || echo "absent")
echo "latency_batch1_pytorch: $torch"
if [[ "$torch" =~ ^[0-9.]+\ us$ ]]; then
  awk -v c="$c1" -v t="${torch% us}" 'BEGIN {
    printf "latency_batch1_ratio_graph_file_over_pytorch: %.2f x\n", c / t }'
fi
