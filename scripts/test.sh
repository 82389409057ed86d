#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test three ways: the release build under
# ctest, an AddressSanitizer+UndefinedBehaviorSanitizer build under ctest, and the release test
# programs under valgrind's memcheck. Ends with one line: "tests: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
jobs=$(nproc)
passed=0
failed=0

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

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
if build build-asan -DCMAKE_BUILD_TYPE=Debug -DTIDE_SANITIZE=ON; then
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure) 2>&1 \
    | tee build-asan/ctest.log
  tally_ctest build-asan/ctest.log
else
  echo "sanitizer build failed"; failed=$((failed + 1))
fi

echo "== valgrind memcheck of the release test programs"
# valgrind's emulation of some AVX2/AVX-512 compare instructions gives wrong NaN results, so
# under valgrind the kernels run their baseline (SSE2) build; the sanitizer build covers the rest.
# The Vulkan tests run on lavapipe here too, as under ctest; tests/valgrind.supp says why it is
# needed (a glibc false positive while a Vulkan driver loads).
vk_icd=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
[ -f "$vk_icd" ] || vk_icd=""
for t in build/tests/test_*; do
  [ -x "$t" ] || continue
  if env ${vk_icd:+VK_DRIVER_FILES=$vk_icd} TIDE_CPU_ISA=baseline valgrind -q --error-exitcode=99 \
       --suppressions=tests/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite \
       --show-leak-kinds=definite "$t" > "$t.valgrind.log" 2>&1; then
    echo "valgrind $(basename "$t"): clean"
    passed=$((passed + 1))
  else
    echo "valgrind $(basename "$t"): FAILED"; tail -40 "$t.valgrind.log"
    failed=$((failed + 1))
  fi
done

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

echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
