#!/usr/bin/env bash
# test_embed_llama.sh EMBED_LLAMA TIDE_PROGRAM SOURCE_DIR — examples/embed's generation from C
# (embed_llama) against the Lua model: on the PyTorch oracle (tests/lua/data/llama_tiny.bin,
# scripts/make_llama_fixture.py: GQA, an unshared classifier) its 32 greedy ids equal PyTorch's
# and examples/llama.lua's, and its compiled step agrees with its eager one (exit status 0); on a
# small random checkpoint with a shared classifier it agrees with examples/llama.lua from BOS;
# latency lines go to stderr; a truncated or padded file, a short header, an out-of-range prompt
# id and a missing file are errors with one message.
set -uo pipefail
embed=$1 tide=$2 src=$3
data=$src/tests/lua/data
tmp=$(mktemp -d /tmp/tide_embed_llama.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }
run() {
  "$embed" "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
}
lua_ids() {
  "$tide" "$src/examples/llama.lua" "$@" --temperature 0 --ids 2> "$tmp/lua_err"
}

prompt=1,17,42,5,88,23,9,60
# PyTorch's greedy ids (tests/test_llama_example.sh checks examples/llama.lua against them too)
want="47 90 84 90 74 29 46 79 62 17 30 72 48 24 0 35 89 80 8 20 89 80 8 17 53 53 53 53 53 53 17 87"
run "$data/llama_tiny.bin" --prompt-ids $prompt --steps 32 --ids --threads 1
if [ "$rc" = 0 ] && [ "$(cat "$tmp/out")" = "$want" ] && [ "$(wc -l < "$tmp/out")" = 1 ]; then
  ok "32 greedy ids equal PyTorch's, compiled and eager agree"
else
  bad "greedy ids: rc $rc, got '$(cat "$tmp/out")' $(cat "$tmp/err")"
fi
lua=$(lua_ids "$data/llama_tiny.bin" --prompt-ids $prompt --steps 32)
if [ -n "$lua" ] && [ "$lua" = "$(cat "$tmp/out")" ]; then
  ok "they equal examples/llama.lua's"
else
  bad "examples/llama.lua gave '$lua' $(cat "$tmp/lua_err")"
fi
if grep -qE '^compiled: 39 steps, latency per token median [0-9.]+ ms, p90 [0-9.]+ ms \(min [0-9.]+ ms\); [0-9.]+ tokens/s$' "$tmp/err" &&
   grep -qE '^eager: 39 steps, .* tokens/s$' "$tmp/err"; then
  ok "latency per token of both on stderr"
else
  bad "latency lines: $(cat "$tmp/err")"
fi
# one compile (the capture), then each of the 39 steps a run of the same graph: no recompile
if grep -qE '^jit: 1 compile\(s\) in [0-9.]+ ms, 39 runs of compiled plans$' "$tmp/err"; then
  ok "one compile serves every position"
else
  bad "jit line: $(grep jit "$tmp/err")"
fi

# A shared classifier, from BOS (no --prompt-ids), with the default thread count.
cat > "$tmp/make.lua" <<'LUA'
-- dim 32, hidden 48, 2 layers, 4 heads, 1 kv head, vocab 64 (shared classifier), seq_len 24
local path = arg[1]
local dim, hidden, layers, kv, seq = 32, 48, 2, 8, 24
local parts, seed = { string.pack("<i4i4i4i4i4i4i4", dim, hidden, layers, 4, 1, 64, seq) }, 11
local function floats(n, value)
  local t = {}
  for i = 1, n do
    seed = (seed * 1103515245 + 12345) % 2147483648
    t[i] = string.pack("<f", value or (seed / 2147483648 - 0.5))
  end
  parts[#parts + 1] = table.concat(t)
end
floats(64 * dim); floats(layers * dim, 1); floats(layers * dim * dim)
floats(layers * kv * dim); floats(layers * kv * dim); floats(layers * dim * dim)
floats(layers * dim, 1); floats(layers * hidden * dim); floats(layers * dim * hidden)
floats(layers * hidden * dim); floats(dim, 1); floats(seq * 8 / 2 * 2, 0)
local f = assert(io.open(path, "wb"))
f:write(table.concat(parts))
f:close()
LUA
"$tide" "$tmp/make.lua" "$tmp/shared.bin"
run "$tmp/shared.bin" --ids
lua=$(lua_ids "$tmp/shared.bin" --steps 23)
if [ "$rc" = 0 ] && [ "$(wc -w < "$tmp/out")" = 23 ] && [ "$lua" = "$(cat "$tmp/out")" ]; then
  ok "a shared classifier, 1 kv head, from BOS to seq_len: examples/llama.lua's ids"
else
  bad "shared classifier: rc $rc, '$(cat "$tmp/out")' vs '$lua' $(cat "$tmp/err")"
fi
run "$tmp/shared.bin" --steps 3
if [ "$rc" = 0 ] && [ "$(wc -l < "$tmp/out")" = 2 ] && grep -qF "dim 32, hidden 48" "$tmp/out" &&
   [ "$(tail -n 1 "$tmp/out")" = "$(echo "$lua" | cut -d' ' -f1-3)" ]; then
  ok "without --ids: a model line, then the ids"
else
  bad "without --ids: rc $rc $(cat "$tmp/out") $(cat "$tmp/err")"
fi

fails() {
  local want_rc=$1 want=$2; shift 2
  run "$@"
  if [ "$rc" = "$want_rc" ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -qF -- "$want" "$tmp/err" &&
     [ ! -s "$tmp/out" ]; then
    ok "fails with '$want': $*"
  else
    bad "$*: rc $rc, stderr: $(cat "$tmp/err")"
  fi
}
size=$(stat -c %s "$data/llama_tiny.bin")
head -c $((size - 4)) "$data/llama_tiny.bin" > "$tmp/truncated.bin"
cat "$data/llama_tiny.bin" "$data/llama_tiny.bin" > "$tmp/padded.bin"
head -c 20 "$data/llama_tiny.bin" > "$tmp/short.bin"
fails 1 "needs $size bytes, but the file has $((size - 4))" "$tmp/truncated.bin"
fails 1 "needs $size bytes, but the file has $((2 * size))" "$tmp/padded.bin"
fails 1 "28" "$tmp/short.bin"
# dim 64 with 3 heads: not a whole head size
printf '\x40\0\0\0\xac\0\0\0\x02\0\0\0\x03\0\0\0\x01\0\0\0\x60\0\0\0\x40\0\0\0' > "$tmp/heads.bin"
fails 1 "is not a Llama" "$tmp/heads.bin"
fails 2 "integers in 0..95" "$data/llama_tiny.bin" --prompt-ids 1,96 --ids
fails 2 "integers in 0..95" "$data/llama_tiny.bin" --prompt-ids 1,-2
fails 2 "--steps must be" "$data/llama_tiny.bin" --steps 0
fails 2 "no CHECKPOINT" --steps 3
run "$tmp/none.bin"
if [ "$rc" = 1 ] && grep -qF "none.bin" "$tmp/err"; then ok "a missing checkpoint"; else
  bad "missing checkpoint: rc $rc $(cat "$tmp/err")"; fi

echo "test_embed_llama: $passed passed, $failed failed"
[ "$failed" = 0 ]
