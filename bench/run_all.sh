#!/usr/bin/env bash
# run_all.sh [BUILD_DIR] — every benchmark of bench/ in one run, so that each figure sits beside
# the reference figures (STREAM triad, raw OpenBLAS, PyTorch when installed) measured on the same
# machine minutes apart. The kernel and jit benchmarks (bench_ops, bench_matmul, bench_conv,
# bench_jit, bench_half, bench_jit_mlp) run once per CPU tier: TIDE_CPU_ISA=avx2 and the best tier this
# machine has (avx512 where present; baseline alone on a CPU without AVX2), or the tiers named in
# TIDE_BENCH_TIERS (e.g. "baseline avx2"). The others run once, at the best tier. Each section's
# lines are the benchmark's own `name: value unit` lines; a closing summary gives, per tier, the
# references and every target line (met / NOT met). Not part of the tests; ~10 minutes per tier
# on 2 cores.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
vk_icd=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
section() { echo; echo "## $*"; }
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

model=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//')
best=$(env -u TIDE_CPU_ISA "$build/bench/bench_jit" --isa)
if [ -n "${TIDE_BENCH_TIERS:-}" ]; then
    tiers=$TIDE_BENCH_TIERS
elif [ "$best" = avx512 ]; then
    tiers="avx2 avx512"
else
    tiers=$best
fi
echo "# run_all.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# cpu: $model, $(nproc) cores; best tier: $best; tiers measured: $tiers"

for tier in $tiers; do
    export TIDE_CPU_ISA=$tier
    {
        section "bench_ops (issue 2) [TIDE_CPU_ISA=$tier]";     "$build/bench/bench_ops"
        section "bench_matmul (issue 3) [TIDE_CPU_ISA=$tier]";  "$build/bench/bench_matmul"
        section "bench_conv (issue 3) [TIDE_CPU_ISA=$tier]";    "$build/bench/bench_conv"
        section "bench_conv_family (issue 24) [TIDE_CPU_ISA=$tier]"
        "$build/bench/bench_conv_family"
        section "bench_small_gemm (issue 25) [TIDE_CPU_ISA=$tier, 1 thread]"
        TIDE_NUM_THREADS=1 "$build/bench/bench_small_gemm"
        section "bench_jit (issues 6, 18) [TIDE_CPU_ISA=$tier]"; "$build/bench/bench_jit"
        section "bench_half (issue 22) [TIDE_CPU_ISA=$tier]"; "$build/bench/bench_half"
        section "bench_jit_mlp (issues 6, 18) [TIDE_CPU_ISA=$tier]"
        "$build/lua/tide" "$here/bench_jit_mlp.lua" 5
    } 2>&1 | tee "$log/$tier"
done

export TIDE_CPU_ISA=$best
section "bench_lua (issue 4) [TIDE_CPU_ISA=$best]";   "$build/lua/tide" "$here/bench_lua.lua"
section "bench_mlp (issue 5) [TIDE_CPU_ISA=$best]";   "$build/lua/tide" "$here/bench_mlp.lua" 5
section "bench_gpt (issue 21) [TIDE_CPU_ISA=$best]"
"$build/lua/tide" "$here/bench_gpt.lua" 5 "$build" 2>&1 | tee "$log/gpt"
section "bench_llama (issue 23) [TIDE_CPU_ISA=$best]"
"$build/lua/tide" "$here/bench_llama.lua" "$build" 2>&1 | tee "$log/llama"
section "bench_symbolic (issue 20) [TIDE_CPU_ISA=$best]"
"$build/lua/tide" "$here/bench_symbolic.lua" 6 2>&1 | tee "$log/symbolic"
section "bench_attention (issue 21) [TIDE_CPU_ISA=$best]"
"$build/lua/tide" "$here/bench_attention.lua" 2>&1 | tee "$log/attention"
section "bench_vulkan (issue 7)"
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$vk_icd" ]; then export VK_DRIVER_FILES=$vk_icd; fi
"$build/bench/bench_vulkan"
section "bench_embed (issue 8) [TIDE_CPU_ISA=$best]"; bash "$here/bench_embed.sh" "$build"
section "bench_onnx (issue 25) [TIDE_CPU_ISA=$best]"
bash "$here/bench_onnx.sh" "$build" 2>&1 | tee "$log/onnx"
section "bench_distributed and bench_ddp (issue 27) [TIDE_CPU_ISA=$best]"
if [ -x "$build/bench/bench_distributed" ] && command -v mpirun >/dev/null; then
    mpi=(mpirun -np 2 --oversubscribe); [ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
    "${mpi[@]}" "$build/bench/bench_distributed" 5 2>&1 | tee "$log/distributed"
    bash "$here/bench_ddp.sh" "$build" 5 2>&1 | tee -a "$log/distributed"
else
    echo "skipped: tide built without MPI, or no mpirun" | tee "$log/distributed"
fi

# The summary: per tier, the references of that tier's sections and every target line.
refs='^(stream_copy_f32|stream_triad_f32|stream_triad_all|sgemm_1024_tide|sgemm_1024_openblas_best|chain_tanh_eager|chain_tanh_jit|chain_tanh_sleef_loop_[a-z0-9]*|tanh_f32_worst_ulp|sigmoid_f32_worst_ulp|softmax_4096x4096_(eager|jit|memory_floor)|mlp_b(128|32)_(eager|jit)):'
for tier in $tiers; do
    section "summary [TIDE_CPU_ISA=$tier] ($model)"
    echo "# references and figures"
    grep -E "$refs" "$log/$tier"
    echo "# targets"
    grep -E '(met|NOT met)\)?$' "$log/$tier"
done
section "summary: symbolic dims [TIDE_CPU_ISA=$best]"
grep -E '(met|NOT met)\)?$' "$log/symbolic"
section "summary: fused attention [TIDE_CPU_ISA=$best]"
grep -E '(met|NOT met)\)?$' "$log/attention"
section "summary: Llama generation [TIDE_CPU_ISA=$best]"
grep -E '(met|NOT met)\)?$|_(tok_s|floor|llama2c_tok_s):' "$log/llama"
section "summary: the GPT step [TIDE_CPU_ISA=$best]"
grep -E '^gpt_(step_(jit|gemms_openblas|target)|generate_(b1|floor|target[a-z_]*)):' "$log/gpt"
section "summary: ONNX models against ONNX Runtime [TIDE_CPU_ISA=$best]"
grep -E '_ratio:' "$log/onnx"
section "summary: collectives and DDP [TIDE_CPU_ISA=$best]"
grep -E '(met|NOT met)\)?$|_busbw:|stream_triad_all_ranks:|ddp_hidden_share:' "$log/distributed"
