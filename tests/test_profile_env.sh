#!/bin/bash
# test_profile_env.sh TIDE — TIDE_PROFILE=path profiles a whole process: at exit the Chrome
# trace goes to path (parsed here, one event per kernel) and the table to stderr, its rows
# naming the script's Lua lines.
set -euo pipefail
tide=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/step.lua" <<'LUA'
local tide = require "tide"
local a = tide.randn(64, 64)
local b = a:matmul(a)
local f = tide.jit(function(x) return (x * 2 + 1):exp() end)
f(b); f(b)
LUA
TIDE_PROFILE="$dir/trace.json" "$tide" "$dir/step.lua" 2> "$dir/err"
grep -q "^tide profile:" "$dir/err" || { echo "no table on stderr:"; cat "$dir/err"; exit 1; }
grep -q "roofline: STREAM triad" "$dir/err" || { echo "no roofline header"; cat "$dir/err"; exit 1; }
grep -Eq "matmul +step.lua:3$|matmul +.*/step.lua:3$" "$dir/err" ||
    { echo "the matmul row does not name step.lua:3:"; cat "$dir/err"; exit 1; }
grep -Eq "fused\([a-z+]*exp\) +.*step.lua:4$" "$dir/err" ||
    { echo "the fused row does not name step.lua:4:"; cat "$dir/err"; exit 1; }
python3 - "$dir/trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
assert events and all(e["ph"] == "X" and e["dur"] >= 0 for e in events), events
names = [e["name"] for e in events]
groups = [n for n in names if n.startswith("fused(") and n.endswith("exp)")]
assert names.count("matmul") == 1 and len(groups) == 2, names
print("test_profile_env: %d events; 1 passed, 0 failed" % len(events))
PY
