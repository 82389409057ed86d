#!/usr/bin/env bash
# test_distributed.sh BUILD_DIR — tide.distributed across two processes: mpirun -np 2 runs the C
# and Lua collective tests, the data-parallel training checks (tests/dist/ddp.lua), a
# stalled rank (tests/dist/stall.lua), which must end the launch with tide's timeout error
# well before the stalled rank wakes, and the examples' --ddp: fashion_mnist.lua (one epoch of
# 4096 images; skipped without the dataset) and gpt.lua (a tiny model on docs/*.md) train, only
# rank 0 prints, and their checkpoints load in one process. Skips (exit 77 with a reason) when
# tide was built without MPI or mpirun is missing.
set -uo pipefail
build=${1:?build dir}
here=$(cd "$(dirname "$0")" && pwd)
tide="$build/lua/tide"
if ! command -v mpirun >/dev/null; then echo "SKIP: no mpirun (scripts/setup.sh installs openmpi-bin)"; exit 77; fi
if ! "$tide" -e 'os.exit(require("tide").distributed.is_available() and 0 or 1)'; then
  echo "SKIP: tide was built without MPI"; exit 77
fi
mpi=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}
mpi+=(-x VK_DRIVER_FILES -x TIDE_CPU_ISA)
export TIDE_CPU_ISA=${TIDE_CPU_ISA:-}
[ -z "$TIDE_CPU_ISA" ] && unset TIDE_CPU_ISA && mpi=("${mpi[@]:0:${#mpi[@]}-2}")
passed=0; failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }

run() { # name, expected "N passed" lines, command...
  local name=$1 want=$2; shift 2
  local out; out=$(timeout 600 "$@" 2>&1); local rc=$?
  local good; good=$(grep -cE ': [0-9]+ passed, 0 failed' <<< "$out")
  if [ $rc -eq 0 ] && [ "$good" -eq "$want" ]; then ok "$name"; else
    echo "$out" | tail -40; bad "$name (exit $rc, $good of $want clean summaries)"; fi
}

run "C collectives, 2 ranks" 2 "${mpi[@]}" "$build/tests/test_distributed"
run "Lua collectives, 2 ranks" 2 "${mpi[@]}" "$tide" "$here/lua/test_distributed.lua"
if [ -f "$here/dist/ddp.lua" ]; then
  run "DDP equals one process on the global batch" 2 "${mpi[@]}" "$tide" "$here/dist/ddp.lua"
fi

# A stalled rank: rank 0 fails with the timeout error, and the launch ends (rank 1 would sleep 60 s).
start=$(date +%s)
out=$(timeout 300 "${mpi[@]}" "$tide" "$here/dist/stall.lua" 2>&1); rc=$?
took=$(( $(date +%s) - start ))
# (here-strings, not pipes: under pipefail a grep -q that stops reading early can fail the echo)
why=""
[ $rc -ne 0 ] || why+=" the launch exited 0;"
grep -q "rank 0 of 2 waited 2.0 s" <<< "$out" || why+=" no timeout error from rank 0;"
[ $took -lt 45 ] || why+=" it took $took s;"
grep -q "finished" <<< "$out" && why+=" a rank finished;"
if [ -z "$why" ]; then
  ok "a stalled rank: timeout error on rank 0 after 2 s, launch over in $took s"
else
  echo "$out" | tail -30; bad "a stalled rank (exit $rc after $took s:$why)"
fi
# ---- the examples with --ddp -------------------------------------------------------------------
src=$(cd "$here/.." && pwd)
tmp=$(mktemp -d /tmp/tide_dist_examples.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
count() { grep -c -- "$1" "$tmp/out"; } # lines of the launch's output matching $1

# --batch-size must divide among the ranks: status 2 and one message (rank 0's), nothing trained
timeout 120 "${mpi[@]}" "$tide" "$src/examples/gpt.lua" --ddp --batch-size 7 \
  --checkpoint "$tmp/none.safetensors" > "$tmp/out" 2>&1; rc=$?
if [ $rc -eq 2 ] && [ "$(count 'must be a multiple of the 2 ranks')" -eq 1 ] &&
   [ "$(count '^corpus')" -eq 0 ]; then
  ok "gpt.lua --ddp --batch-size 7 on 2 ranks: status 2, $(grep -m1 'multiple' "$tmp/out")"
else
  cat "$tmp/out"; bad "gpt.lua --ddp --batch-size 7 (exit $rc)"
fi

# Fashion-MNIST: one epoch over 4096 images, 64 a rank a step; one set of report lines (rank 0's),
# a test accuracy well above chance, a checkpoint that loads in one process with the module's
# own names (no "module." prefix) and the same accuracy recorded.
dataset=${TIDE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ -e "$dataset/train-images-idx3-ubyte.gz" ] && [ -e "$dataset/t10k-images-idx3-ubyte.gz" ]; then
  start=$(date +%s)
  timeout 300 "${mpi[@]}" "$tide" "$src/examples/fashion_mnist.lua" --ddp --epochs 1 \
    --limit 4096 --test-limit 1000 --batch-size 128 --data "$dataset" \
    --checkpoint "$tmp/fm.safetensors" > "$tmp/out" 2>&1; rc=$?
  took=$(( $(date +%s) - start ))
  acc=$(sed -n 's/^test accuracy \([0-9.]*\)% after 1 epochs.*/\1/p' "$tmp/out")
  loads=$(CK="$tmp/fm.safetensors" "$tide" -e '
    local tide = require "tide"
    local nn = tide.nn
    local ts, meta = tide.load(os.getenv("CK"))
    local m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                            nn.Linear(256, 10))
    m:load_state_dict(ts)
    io.write(meta.accuracy)' 2>&1)
  if [ $rc -eq 0 ] && [ "$(count '^Fashion-MNIST: 4096 training and 1000 test images')" -eq 1 ] &&
     [ "$(count '^optimizer: .*batch 128, DDP over 2 ranks (64 samples a rank a step)')" -eq 1 ] &&
     [ "$(count '^epoch 1: train loss')" -eq 1 ] && [ "$(count '^test accuracy')" -eq 1 ] &&
     [ "$(count 'reloaded, same weights')" -eq 1 ] && [ -n "$acc" ] &&
     awk -v a="$acc" 'BEGIN { exit !(a > 60) }' &&
     awk -v a="$acc" -v b="$loads" 'BEGIN { exit !(b * 100 > a - 0.01 && b * 100 < a + 0.01) }'
  then
    ok "fashion_mnist.lua --ddp on 2 ranks: test accuracy $acc%, one report, checkpoint loads ($took s)"
  else
    cat "$tmp/out"; echo "load: $loads"
    bad "fashion_mnist.lua --ddp on 2 ranks (exit $rc, accuracy '$acc')"
  fi
else
  echo "skip: fashion_mnist.lua --ddp (no Fashion-MNIST at $dataset)"
fi

# GPT: 30 steps of a 2-layer model 32 wide on docs/*.md, 4 windows a rank a step; the validation
# loss falls by well over 0.3 nats from step 10 to 30 (as tests/test_gpt_example.sh asks of one
# process); one set of report lines; --sample from the checkpoint in one process. (Open MPI gives
# the ranks a terminal: progress bars, so the lines are matched unanchored.)
mkdir -p "$tmp/corpus"
cat "$src"/docs/*.md > "$tmp/corpus/docs.txt"
start=$(date +%s)
timeout 300 "${mpi[@]}" "$tide" "$src/examples/gpt.lua" --ddp --data "$tmp/corpus" --n-layer 2 \
  --n-head 2 --n-embd 32 --block-size 32 --context 32 --batch-size 8 --warmup 5 --lr 3e-3 \
  --eval-batches 4 --steps 30 --eval-every 10 --checkpoint "$tmp/gpt.safetensors" \
  > "$tmp/out" 2>&1; rc=$?
took=$(( $(date +%s) - start ))
val() { sed -n "s/^.*step $1: .*validation \([0-9.]*\) nats.*/\1/p" "$tmp/out"; }
v10=$(val 10) v30=$(val 30)
"$tide" "$src/examples/gpt.lua" --sample 20 --prompt "The " --checkpoint "$tmp/gpt.safetensors" \
  > "$tmp/sample" 2> "$tmp/serr"; src_rc=$?
if [ $rc -eq 0 ] && [ "$(count '^corpus ')" -eq 1 ] && [ "$(count 'trained 30 steps')" -eq 1 ] &&
   [ "$(count 'batch 8 x 32 tokens, DDP over 2 ranks (4 sequences a rank a step)')" -eq 1 ] &&
   [ "$(count 'reloaded, same weights')" -eq 1 ] && [ -n "$v10" ] && [ -n "$v30" ] &&
   awk -v a="$v10" -v b="$v30" 'BEGIN { exit !(b < a - 0.3) }' &&
   [ $src_rc -eq 0 ] && [ "$(wc -c < "$tmp/sample")" -eq $((4 + 20 + 1)) ]; then
  ok "gpt.lua --ddp on 2 ranks: validation $v10 -> $v30 nats, --sample 20 from its checkpoint ($took s)"
else
  cat "$tmp/out" "$tmp/serr"
  bad "gpt.lua --ddp on 2 ranks (exit $rc, validation '$v10' -> '$v30', --sample exit $src_rc)"
fi

echo "test_distributed.sh: $passed passed, $failed failed"
[ $failed -eq 0 ]
