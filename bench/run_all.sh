#!/usr/bin/env bash
# run_all.sh [BUILD_DIR] — every benchmark of bench/ one after the other, in one run, so the
# figures of an issue's closing note sit beside the reference figures (STREAM, raw OpenBLAS,
# PyTorch when installed) measured on the same machine minutes apart. Each section's lines are
# the benchmark's own `name: value unit` lines. Not part of the tests; ~10 minutes on 2 cores.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
vk_icd=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
section() { echo; echo "## $*"; }

section "bench_ops (issue 2)";        "$build/bench/bench_ops"
section "bench_matmul (issue 3)";     "$build/bench/bench_matmul"
section "bench_conv (issue 3)";       "$build/bench/bench_conv"
section "bench_lua (issue 4)";        "$build/lua/tide" "$here/bench_lua.lua"
section "bench_mlp (issue 5)";        "$build/lua/tide" "$here/bench_mlp.lua" 5
section "bench_jit (issue 6)";        "$build/bench/bench_jit"
section "bench_jit_mlp (issue 6)";    "$build/lua/tide" "$here/bench_jit_mlp.lua" 5
section "bench_vulkan (issue 7)"
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$vk_icd" ]; then export VK_DRIVER_FILES=$vk_icd; fi
"$build/bench/bench_vulkan"
section "bench_embed (issue 8)";      bash "$here/bench_embed.sh" "$build"
