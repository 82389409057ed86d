#!/usr/bin/env bash
# test_distributed.sh BUILD_DIR — tide.distributed across two processes: mpirun -np 2 runs the C
# and Lua collective tests, the data-parallel training checks (tests/dist/ddp.lua) and a
# stalled rank (tests/dist/stall.lua), which must end the launch with tide's timeout error
# well before the stalled rank wakes. Skips (exit 77 with a reason) when tide was built without
# MPI or mpirun is missing.
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
  local good; good=$(echo "$out" | grep -cE ': [0-9]+ passed, 0 failed')
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
if [ $rc -ne 0 ] && echo "$out" | grep -q "rank 0 of 2 waited 2.0 s" && [ $took -lt 45 ] &&
   ! echo "$out" | grep -q "finished"; then
  ok "a stalled rank: timeout error on rank 0 after 2 s, launch over in $took s"
else
  echo "$out" | tail -30; bad "a stalled rank (exit $rc after $took s)"
fi
echo "test_distributed.sh: $passed passed, $failed failed"
[ $failed -eq 0 ]
