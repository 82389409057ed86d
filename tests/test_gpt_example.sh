#!/usr/bin/env bash
# test_gpt_example.sh TIDE_PROGRAM SOURCE_DIR — examples/gpt.lua end to end on a tiny config
# (2 layers, 32 wide, context 32) and a small corpus (the repository's docs/*.md, ~200 KB):
# each bad option ends the script at once with one line on stderr (status 2, nothing trained);
# 30 training steps lower the validation loss; the checkpoint is written and reloads with the
# same weights; --sample writes the prompt and exactly N bytes, the same ones for the same
# --seed; --time-budget stops a long run early; the jit's training step matches the eager one.
set -uo pipefail
tide=$1 src=$2
script=$src/examples/gpt.lua
tmp=$(mktemp -d /tmp/tide_gpt_example.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/corpus"
cat "$src"/docs/*.md > "$tmp/corpus/docs.txt"
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }

tiny=(--data "$tmp/corpus" --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --context 32
      --batch-size 8 --warmup 5 --lr 3e-3 --eval-batches 4)

# run ARGS...: the script's stdout, stderr and status in $tmp/out, $tmp/err, $rc
run() {
  "$tide" "$script" "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
}

# rejects EXPECTED_TEXT ARGS...: status 2, one line on stderr containing EXPECTED_TEXT, no
# traceback, nothing trained (the corpus is read only after the options are checked)
rejects() {
  local want=$1; shift
  run "${tiny[@]}" --checkpoint "$tmp/ck.safetensors" "$@"
  if [ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -qF -- "$want" "$tmp/err" &&
     ! grep -q "traceback" "$tmp/err" && ! grep -q "^corpus" "$tmp/out"; then
    ok "$* -> $(cat "$tmp/err")"
  else
    bad "$* -> status $rc, stderr:"; cat "$tmp/err"
  fi
}

rejects "--batch-size must be a positive integer, got '0'" --batch-size 0
rejects "--steps must be a positive integer, got '2.5'" --steps 2.5
rejects "--sample must be a positive integer, got 'ten'" --sample ten
rejects "--warmup must be an integer >= 0, got '-1'" --warmup=-1
rejects "--autocast must be float32 or bfloat16, got 'half'" --autocast half
rejects "--temperature must be a finite number > 0, got '0'" --temperature 0
rejects "--time-budget must be a finite number > 0, got 'inf'" --time-budget inf
rejects "unknown option '--step'" --step 3
rejects "--prompt needs a value" --prompt
rejects "--n-embd (30) must be a multiple of --n-head (4)" --n-embd 30 --n-head 4
rejects "--context (64) must be at most --block-size (32)" --context 64
rejects "--top-k must be at most 256" --top-k 300
rejects "cannot write the checkpoint (--checkpoint): /nonexistent/dir/x: No such file or directory" \
  --checkpoint /nonexistent/dir/x
rejects "cannot write the checkpoint (--checkpoint): $tmp: Is a directory" --checkpoint "$tmp"

"$tide" "$script" --help > "$tmp/help" 2>&1
rc=$?
missing=""
for o in steps time-budget batch-size context lr min-lr warmup weight-decay clip eval-every \
         eval-batches n-layer n-head n-embd block-size data eager quiet sample prompt \
         temperature top-k checkpoint seed help; do
  grep -q -- "--$o " "$tmp/help" || missing="$missing --$o"
done
if [ "$rc" -eq 0 ] && [ -z "$missing" ]; then ok "--help lists every option"; else
  bad "--help: status $rc, missing:$missing"; cat "$tmp/help"; fi

# --sample before any training: status 1 and the reason
run --sample 5 --checkpoint "$tmp/none.safetensors"
if [ "$rc" -eq 1 ] && grep -q "cannot load the checkpoint $tmp/none.safetensors" "$tmp/err"; then
  ok "--sample without a checkpoint -> $(head -c 120 "$tmp/err")"
else
  bad "--sample without a checkpoint: status $rc"; cat "$tmp/err"
fi
# ... or with a file that is not a checkpoint
run --sample 5 --checkpoint "$tmp/corpus/docs.txt"
if [ "$rc" -eq 1 ] && grep -q "cannot load the checkpoint" "$tmp/err" &&
   ! grep -q "traceback" "$tmp/err"; then
  ok "--sample with a text file as the checkpoint -> status 1"
else
  bad "--sample with a text file as the checkpoint: status $rc"; cat "$tmp/err"
fi

# 30 steps, validated at steps 10, 20 and 30 (the same 4 x 8 windows each time). The first
# validation comes after the warmup, at about ln(256) = 5.5 nats or a little below; 20 more
# steps at lr 3e-3 lower it by well over 0.3 nats on this corpus (about 1 nat in practice).
run "${tiny[@]}" --steps 30 --eval-every 10 --checkpoint "$tmp/ck.safetensors"
val() { sed -n "s/^step $1: .*validation \([0-9.]*\) nats.*/\1/p" "$tmp/out"; }
v10=$(val 10) v30=$(val 30)
if [ "$rc" -eq 0 ] && [ -n "$v10" ] && [ -n "$v30" ] &&
   awk -v a="$v10" -v b="$v30" 'BEGIN { exit !(b < a - 0.3) }'; then
  ok "30 steps: validation loss $v10 nats at step 10, $v30 at step 30"
else
  bad "30 steps: status $rc, validation $v10 -> $v30"; cat "$tmp/out" "$tmp/err"
fi
if grep -q "^validation loss .* nats = .* bits per byte" "$tmp/out" &&
   grep -q "^jit: training step 2 compiles, 28 hits, 0 fallbacks" "$tmp/out" &&
   grep -q "reloaded, same weights" "$tmp/out" && [ -s "$tmp/ck.safetensors" ]; then
  ok "$(grep '^jit:' "$tmp/out"); $(grep '^checkpoint' "$tmp/out")"
else
  bad "the training run's report or checkpoint"; cat "$tmp/out"
fi
cp "$tmp/out" "$tmp/jit_out"

# The same run eagerly: the same losses (the jit reorders float32 sums in its fused kernels;
# over 30 steps the difference stays far below 1e-3 nats)
run "${tiny[@]}" --steps 30 --eval-every 10 --checkpoint "$tmp/eager.safetensors" --eager
e30=$(val 30)
if [ "$rc" -eq 0 ] && [ -n "$e30" ] && awk -v a="$v30" -v b="$e30" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }'
then
  ok "--eager: validation $e30 nats at step 30 (jit: $v30)"
else
  bad "--eager: status $rc, validation $e30 (jit: $v30)"; cat "$tmp/out" "$tmp/err"
fi

# --sample N: stdout is the prompt, N generated bytes and a newline; the same seed, the same text
sample() {
  "$tide" "$script" --sample 50 --prompt "The " --checkpoint "$tmp/ck.safetensors" "$@"
}
sample --seed 7 > "$tmp/s1" 2> "$tmp/serr"
rc=$?
sample --seed 7 > "$tmp/s2" 2> /dev/null
size=$(wc -c < "$tmp/s1")
if [ "$rc" -eq 0 ] && [ "$size" -eq $((4 + 50 + 1)) ] && [ "$(head -c 4 "$tmp/s1")" = "The " ] &&
   cmp -s "$tmp/s1" "$tmp/s2" && grep -q "^generated 50 bytes" "$tmp/serr"; then
  ok "--sample 50: $size bytes, reproducible with --seed: $(tr '\n' ' ' < "$tmp/s1")"
else
  bad "--sample 50: status $rc, $size bytes"; cat "$tmp/s1" "$tmp/serr"
fi
# the decoding step captured and replayed: at most two compiles for every length (a capture
# per cache; the cache is rebuilt once the context fills), --eager's text
sample --seed 7 --eager > "$tmp/s4" 2> /dev/null
line=$(grep "^decoding step: " "$tmp/serr")
compiles=$(echo "$line" | sed -n 's/.*(\([0-9]*\) compiles).*/\1/p')
replays=$(echo "$line" | sed -n 's/.*, \([0-9]*\) replays.*/\1/p')
if cmp -s "$tmp/s1" "$tmp/s4" && [ -n "$compiles" ] && [ "$compiles" -le 2 ] &&
   [ -n "$replays" ] && [ "$replays" -ge 40 ]; then
  ok "--sample 50 captured: $line; the same text as --eager"
else
  bad "--sample captured vs --eager: '$line'"; cat "$tmp/s1" "$tmp/s4" "$tmp/serr"
fi
# beyond the model's context (32): generation goes on
"$tide" "$script" --sample 100 --prompt "x" --top-k 1 --checkpoint "$tmp/ck.safetensors" \
  > "$tmp/s3" 2> "$tmp/serr"
rc=$?
if [ "$rc" -eq 0 ] && [ "$(wc -c < "$tmp/s3")" -eq $((1 + 100 + 1)) ]; then
  ok "--sample 100 past the context of 32, --top-k 1"
else
  bad "--sample 100 --top-k 1: status $rc"; cat "$tmp/s3" "$tmp/serr"
fi

# --time-budget: a run of 100000 planned steps stops within about a second and still validates
run "${tiny[@]}" --steps 100000 --time-budget 1 --quiet --checkpoint "$tmp/tb.safetensors"
steps=$(sed -n 's/^trained \([0-9]*\) steps.*/\1/p' "$tmp/out")
if [ "$rc" -eq 0 ] && [ -n "$steps" ] && [ "$steps" -lt 100000 ] &&
   grep -q "^validation loss" "$tmp/out" && [ -s "$tmp/tb.safetensors" ]; then
  ok "--time-budget 1: $(grep '^trained' "$tmp/out")"
else
  bad "--time-budget 1: status $rc"; cat "$tmp/out" "$tmp/err"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
