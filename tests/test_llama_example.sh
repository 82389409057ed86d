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
run "$tmp/none.bin"
if [ "$rc" = 1 ] && grep -qF "cannot open" "$tmp/err"; then ok "a missing checkpoint"; else
  bad "missing checkpoint: rc $rc $(cat "$tmp/err")"; fi

echo "test_llama_example: $passed passed, $failed failed"
[ "$failed" = 0 ]
