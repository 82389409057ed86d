#!/usr/bin/env bash
# bench_ddp.sh [BUILD_DIR] [SLICES] — issue 27's DDP figure: the Fashion-MNIST MLP step
# (bench/bench_ddp.lua) on 2 ranks x 1 thread (DistributedDataParallel over mpirun) against
# 1 rank x 2 threads, alternating slice by slice (default 5) so a drift of the machine lands on
# both; medians of samples/s under tide.jit (DDP's default 25 MB buckets: one for this MLP, as
# examples/fashion_mnist.lua --ddp runs it) at the example's global batch (128) and at 512, and
# eagerly at 128; then the share of the all_reduce hidden under backward (eager DDP, 0.5 MB
# buckets). Target: ddp / single >= 0.8.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
slices=${2:-5}
tide="$build/lua/tide"
mpi=(mpirun -np 2 --oversubscribe -x TIDE_NUM_THREADS=1)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
echo "# bench_ddp.sh $(date -u '+%Y-%m-%d %H:%M UTC'), cpu: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//'), $(nproc) cores; $(mpirun --version | head -1)"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rate() { grep -oE '_samples_per_s: [0-9.]+' | awk '{ print $2 }'; }
cases="jit_b128 jit_b512 eager_b128"
declare -A all
for s in $(seq 1 "$slices"); do
  for c in $cases; do
    flag=""; [ "${c%%_*}" = eager ] && flag=--eager
    batch=${c##*_b}
    one() { TIDE_NUM_THREADS=2 "$tide" "$here/bench_ddp.lua" $flag --batch "$batch" --seconds 2 | rate; }
    two() { "${mpi[@]}" "$tide" "$here/bench_ddp.lua" --ddp $flag --batch "$batch" --seconds 2 | rate; }
    if [ $((s % 2)) -eq 1 ]; then a=$(one); b=$(two); else b=$(two); a=$(one); fi
    all[single_$c]+="$a "; all[ddp_$c]+="$b "
  done
done
for c in $cases; do
  single=$(echo ${all[single_$c]} | tr ' ' '\n' | median)
  ddp=$(echo ${all[ddp_$c]} | tr ' ' '\n' | median)
  echo "mlp_step_single_${c}: $single samples/s (1 rank x 2 threads)"
  echo "mlp_step_ddp_${c}: $ddp samples/s (2 ranks x 1 thread)"
  awk -v d="$ddp" -v s="$single" -v c="$c" \
    'BEGIN { r = d / s; printf "mlp_step_ddp_over_single_%s: %.3f ratio (target >= 0.8: %s)\n", c, r, (r >= 0.8 ? "met" : "NOT met") }'
done
"${mpi[@]}" "$tide" "$here/bench_ddp.lua" --ddp --eager --seconds 3 --bucket-mb 0.5 | grep -E '^ddp_(allreduce|hidden)'
