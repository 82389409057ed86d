#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the release build under ctest, its
# numeric suites once more under each CPU tier the machine can run (TIDE_CPU_ISA), an
# AddressSanitizer+UndefinedBehaviorSanitizer build under ctest, the release test programs under
# valgrind's memcheck, and a ThreadSanitizer stress test. Prints each stage's minutes and each
# tier's counts, and ends with one line: "tests: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
# The three builds (release, sanitizers, ThreadSanitizer) take about 4 GB here; a disk that fills
# up midway fails them with the linker's "No space left on device", so say so first.
free_mb=$(df -Pm . | awk 'NR == 2 { print $4 }')
if [ -n "$free_mb" ] && [ "$free_mb" -lt 6144 ]; then
  echo "scripts/test.sh: only ${free_mb} MB free on this disk; the builds need about 4 GB" \
       "(6 GB to be safe): builds that run out of space fail and count as failed tests"
fi
jobs=$(nproc)
passed=0
failed=0
start=$(date +%s)
stage_start=$start
times=""
tiers_tally=""

# Ends a stage: its minutes go to the time table printed at the end.
stage_done() {
  local now; now=$(date +%s)
  times+=$(awk -v s="$1" -v t=$((now - stage_start)) 'BEGIN { printf "%-34s %5.1f min", s, t / 60 }')$'\n'
  stage_start=$now
}

# Reads ctest's "N% tests passed, F tests failed out of T" line into the totals.
tally_ctest() {
  local line total fails
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
  if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
  fails=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/')
  total=$(echo "$line" | sed -E 's/.*out of ([0-9]+).*/\1/')
  passed=$((passed + total - fails))
  failed=$((failed + fails))
}

build() { # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -DTIDE_WERROR=ON "$@" >/dev/null && cmake --build "$dir" -j"$jobs"
}

echo "== release build"
if build build -DCMAKE_BUILD_TYPE=Release; then
  (cd build && ctest --output-on-failure) 2>&1 | tee build/ctest.log
  tally_ctest build/ctest.log
else
  echo "release build failed"; failed=$((failed + 1))
fi

stage_done "release build + ctest"

# The numeric suites under every tier this CPU runs: the C op tests, test_jit, and the Lua ops,
# jit and random-program tests. Each tier must give the jit eager's bits (jit/README.md).
tiers="baseline avx2"
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
   grep -qw avx512dq /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
  tiers="$tiers avx512"
fi
# The numeric suites, run under every tier: one name per line, so additions merge.
numeric_c=(
  grid_sample
  vulkan_half
  half_cast
  div_single
  matmul_bf16
  jit_half
  elementwise
  half
  half_files
  autocast
  reduce
  matmul
  conv
  movement
  indexing
  nn
  autograd
  autograd_accumulate
  onnx_symbolic
  creation
  random
  jit
  jit_symbolic
  ref_device
  ref_jit
  erf
  gelu
  triu_cumsum
  sdpa
  multinomial
  jit_capture_dynamic
  embed_llama
  quant
  linear_half
  autograd_higher
  nn_resize
  conv_nd
  stats
  linalg_ops
  math_ulps
  math_ops
  onnx
  onnx_reduce
  onnx_elementwise
  onnx_conv
  onnx_shape_index
  onnx_nn
  graph_file
  distributed
  distributed_mpi
)
numeric_lua=(
  ops
  half
  half_files
  autocast
  jit
  jit_random
  jit_symbolic
  autograd
  nn
  ref_jit
  activations
  triu_cumsum
  nn_attention
  nn_norm_clip
  optim_sched
  sdpa
  multinomial
  nn_transformer
  gpt_parity
  gpt_decode
  llama
  quant
  linear_half
  nn_rnn
  optim_more
  api_coverage
  autograd_higher
  nn_extra
  conv_family
  stats
  linalg_ops
  math
  onnx
  export
  distributed
)
numeric="^(test_($(IFS='|'; echo "${numeric_c[*]}"))|lua_($(IFS='|'; echo "${numeric_lua[*]}"))(_tideprog)?|onnx_conformance(_jit|_vulkan)?)$"
for tier in $tiers; do
  echo "== numeric suites, TIDE_CPU_ISA=$tier"
  if [ -d build ]; then
    (cd build && TIDE_CPU_ISA=$tier ctest -R "$numeric" --output-on-failure) 2>&1 | tee "build/ctest_$tier.log"
    p0=$passed; f0=$failed
    tally_ctest "build/ctest_$tier.log"
    tiers_tally+="tier $tier: $((passed - p0)) passed, $((failed - f0)) failed"$'\n'
  fi
done
# bfloat16 products have up to three paths at the avx512 tier (devices/cpu/cpu_matmul_bf16.c):
# the best one ran above; the others run the suites that multiply bfloat16 here.
bf16_suites="^(test_(matmul_bf16|jit_half|half_cast|autocast)|lua_(half|autocast|autocast_train)(_tideprog)?)$"
bf16_paths=""
case " $tiers " in *" avx512 "*)
  grep -qw avx512_bf16 /proc/cpuinfo && bf16_paths="dot-forced off" ;;
esac
for path in $bf16_paths; do
  echo "== bfloat16 suites, TIDE_CPU_ISA=avx512 TIDE_CPU_BF16=$path"
  if [ -d build ]; then
    (cd build && TIDE_CPU_ISA=avx512 TIDE_CPU_BF16=$path ctest -R "$bf16_suites" \
       --output-on-failure) 2>&1 | tee "build/ctest_bf16_$path.log"
    p0=$passed; f0=$failed
    tally_ctest "build/ctest_bf16_$path.log"
    tiers_tally+="bfloat16 path $path: $((passed - p0)) passed, $((failed - f0)) failed"$'\n'
  fi
done
stage_done "tiers ($tiers${bf16_paths:+; bfloat16 paths $bf16_paths})"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
if build build-asan -DCMAKE_BUILD_TYPE=Debug -DTIDE_SANITIZE=ON; then
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure) 2>&1 \
    | tee build-asan/ctest.log
  tally_ctest build-asan/ctest.log
else
  echo "sanitizer build failed"; failed=$((failed + 1))
fi

stage_done "sanitizer build + ctest"

echo "== valgrind memcheck of the release test programs"
# valgrind's emulation of some AVX2/AVX-512 compare instructions gives wrong NaN results, so
# under valgrind the kernels run their baseline (SSE2) build; the sanitizer build covers the rest.
# The Vulkan tests run on lavapipe here too, as under ctest; tests/valgrind.supp says why it is
# needed (a glibc false positive while a Vulkan driver loads).
vk_icd=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
[ -f "$vk_icd" ] || vk_icd=""
for t in build/tests/test_*; do
  [ -x "$t" ] || continue
  if env ${vk_icd:+VK_DRIVER_FILES=$vk_icd} TIDE_CPU_ISA=baseline valgrind -q --num-callers=40 --error-exitcode=99 \
       --suppressions=tests/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite \
       --show-leak-kinds=definite "$t" > "$t.valgrind.log" 2>&1; then
    echo "valgrind $(basename "$t"): clean"
    passed=$((passed + 1))
  else
    echo "valgrind $(basename "$t"): FAILED"; tail -40 "$t.valgrind.log"
    failed=$((failed + 1))
  fi
done

stage_done "valgrind memcheck"

echo "== ThreadSanitizer build of tests/test_threads.c"
# Only the thread stress test: 8 threads calling tide at once (docs/threads.md); any report fails.
if cmake -S . -B build-tsan -DTIDE_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DTIDE_TSAN=ON >/dev/null &&
   cmake --build build-tsan -j"$jobs" --target test_threads; then
  if TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tests/test_threads > build-tsan/test_threads.log 2>&1 &&
     ! grep -q "WARNING: ThreadSanitizer" build-tsan/test_threads.log; then
    echo "tsan test_threads: clean"; passed=$((passed + 1))
  else
    echo "tsan test_threads: FAILED"; tail -60 build-tsan/test_threads.log; failed=$((failed + 1))
  fi
else
  echo "ThreadSanitizer build failed"; failed=$((failed + 1))
fi

stage_done "ThreadSanitizer"

echo "== time table (CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores)"
printf '%s' "$times"
awk -v t=$(($(date +%s) - start)) 'BEGIN { printf "%-34s %5.1f min\n", "total", t / 60 }'
printf '%s' "$tiers_tally"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
