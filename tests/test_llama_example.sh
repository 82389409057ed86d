#!/usr/bin/env bash
# test_llama_example.sh TIDE_PROGRAM SOURCE_DIR — examples/llama.lua on the PyTorch oracle
# (tests/lua/data/llama_tiny.bin, scripts/make_llama_fixture.py): --temperature 0 --ids prints
# exactly PyTorch's 32 greedy ids on one line and nothing else on stdout, from llama2.c's file and
# from the Hugging Face safetensors (with --n-heads), jitted and eager; a seeded sampled run
# repeats; bad options end it with one line and status 2.
set -uo pipefail
tide=$1 src=$2
script=$src/examples/llama.lua
data=$src/tests/lua/data
tmp=$(mktemp -d /tmp/tide_llama_example.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }
run() {
  "$tide" "$script" "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
}

prompt=1,17,42,5,88,23,9,60
want="47 90 84 90 74 29 46 79 62 17 30 72 48 24 0 35 89 80 8 20 89 80 8 17 53 53 53 53 53 53 17 87"
for args in "$data/llama_tiny.bin" "$data/llama_tiny.bin --eager" \
            "$data/llama_tiny_hf.safetensors --n-heads 4"; do
  # shellcheck disable=SC2086
  run $args --prompt-ids $prompt --steps 32 --temperature 0 --ids
  if [ "$rc" = 0 ] && [ "$(cat "$tmp/out")" = "$want" ] && [ "$(wc -l < "$tmp/out")" = 1 ]; then
    ok "greedy ids equal PyTorch's ($args)"
  else
    bad "greedy ids ($args): rc $rc, got '$(cat "$tmp/out")' $(cat "$tmp/err")"
  fi
done

run "$data/llama_tiny.bin" --steps 12 --seed 9 --temperature 0.8 --ids
first=$(cat "$tmp/out")
run "$data/llama_tiny.bin" --steps 12 --seed 9 --temperature 0.8 --ids
if [ "$rc" = 0 ] && [ "$first" = "$(cat "$tmp/out")" ] && [ "$(echo "$first" | wc -w)" = 12 ]; then
  ok "a seeded sampled run repeats (12 ids)"
else
  bad "seeded sampling: '$first' vs '$(cat "$tmp/out")'"
fi

# With a tokenizer: a small random llama2.c checkpoint whose vocabulary is the fixture
# tokenizer's 512 tokens (written here by a Lua script), a text prompt encodes to the same ids as
# --prompt-ids of its encoding, and the text printed is the generated ids streamed to text.
tok=$data/tokenizer_small.bin
cat > "$tmp/make.lua" <<'LUA'
-- dim 32, hidden 64, 1 layer, 4 heads, 2 kv heads, vocab 512 (shared classifier), seq_len 32
local path = arg[1]
local dim, hidden, kv, seq = 32, 64, 16, 32
local parts, seed = { string.pack("<i4i4i4i4i4i4i4", dim, hidden, 1, 4, 2, 512, seq) }, 7
local function floats(n, value)
  local t = {}
  for i = 1, n do
    seed = (seed * 1103515245 + 12345) % 2147483648
    t[i] = string.pack("<f", value or (seed / 2147483648 - 0.5))
  end
  parts[#parts + 1] = table.concat(t)
end
floats(512 * dim); floats(dim, 1); floats(dim * dim); floats(kv * dim); floats(kv * dim)
floats(dim * dim); floats(dim, 1); floats(hidden * dim); floats(dim * hidden)
floats(hidden * dim); floats(dim, 1); floats(seq * 8 / 2 * 2, 0)
local f = assert(io.open(path, "wb"))
f:write(table.concat(parts))
f:close()
LUA
cat > "$tmp/tok.lua" <<'LUA'
-- encode: the prompt's 0-based ids, comma-separated; decode: the printable text of 0-based ids
-- as the streamer gives it (control bytes dropped, bad UTF-8 as U+FFFD: a random model emits
-- byte tokens)
local tok = require("tide.models.tokenizer").load(arg[1], 512)
if arg[2] == "encode" then
  local ids = tok:encode(arg[3], { bos = true })
  for i, id in ipairs(ids) do ids[i] = id - 1 end
  io.write(table.concat(ids, ","))
else
  local emit = tok:streamer()
  for id in arg[3]:gmatch("%d+") do io.write(emit(tonumber(id) + 1)) end
  io.write(emit())
end
LUA
"$tide" "$tmp/make.lua" "$tmp/tiny512.bin"
run "$tmp/tiny512.bin" --tokenizer "$tok" --prompt "hello world" --steps 8 --temperature 0 --ids
text_ids=$(cat "$tmp/out")
encoded=$("$tide" "$tmp/tok.lua" "$tok" encode "hello world")
run "$tmp/tiny512.bin" --prompt-ids "$encoded" --steps 8 --temperature 0 --ids
if [ -n "$text_ids" ] && [ "$(echo "$text_ids" | wc -w)" = 8 ] && [ "$text_ids" = "$(cat "$tmp/out")" ]; then
  ok "--prompt TEXT gives the ids of --prompt-ids $encoded ($text_ids)"
else
  bad "--prompt: '$text_ids' vs --prompt-ids $encoded: '$(cat "$tmp/out")' $(cat "$tmp/err")"
fi
run "$tmp/tiny512.bin" --tokenizer "$tok" --prompt "hello world" --steps 8 --temperature 0
want_text=$("$tide" "$tmp/tok.lua" "$tok" decode "$text_ids")
if [ "$rc" = 0 ] && [ "$(cat "$tmp/out")" = "$want_text" ]; then
  ok "the text printed is the ids streamed to text"
else
  bad "text: rc $rc, got '$(cat "$tmp/out")', want '$want_text' $(cat "$tmp/err")"
fi
run "$data/llama_tiny.bin" --tokenizer "$tok" --steps 2
if [ "$rc" = 1 ] && grep -qF "512" "$tmp/err" && grep -qF "96" "$tmp/err"; then
  ok "a tokenizer for another vocabulary is an error naming both sizes"
else
  bad "vocabulary mismatch: rc $rc $(cat "$tmp/err")"
fi

rejects() {
  local want=$1; shift
  run "$@"
  if [ "$rc" = 2 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -qF -- "$want" "$tmp/err"; then
    ok "rejects $*"
  else
    bad "$* : rc $rc, stderr: $(cat "$tmp/err")"
  fi
}
rejects "no CHECKPOINT" --steps 3
rejects "--steps must be" "$data/llama_tiny.bin" --steps 0
rejects "--temperature must be" "$data/llama_tiny.bin" --temperature -1
rejects "--topp must be" "$data/llama_tiny.bin" --topp 1.5
rejects "--dtype must be" "$data/llama_tiny.bin" --dtype int8
rejects "--prompt-ids must be" "$data/llama_tiny.bin" --prompt-ids 1,96
rejects "unknown option" "$data/llama_tiny.bin" --bogus
rejects "--prompt needs --tokenizer" "$data/llama_tiny.bin" --prompt hi
rejects "not both" "$data/llama_tiny.bin" --tokenizer "$tok" --prompt hi --prompt-ids 1
run "$tmp/none.bin"
if [ "$rc" = 1 ] && grep -qF "cannot open" "$tmp/err"; then ok "a missing checkpoint"; else
  bad "missing checkpoint: rc $rc $(cat "$tmp/err")"; fi

echo "test_llama_example: $passed passed, $failed failed"
[ "$failed" = 0 ]
