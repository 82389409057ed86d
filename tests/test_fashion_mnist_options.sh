#!/usr/bin/env bash
# test_fashion_mnist_options.sh TIDE_PROGRAM SOURCE_DIR — examples/fashion_mnist.lua's options:
# each bad value ends the script at once with one line on stderr naming the option and the value,
# exit status 2 and no traceback; an unwritable --checkpoint is refused before training (and the
# writability check leaves no file behind); a --limit beyond the data set is fine; a diverging
# loss (a huge --lr) prints one warning that suggests a lower --lr, a sane run none. The runs
# that train need the dataset (exit 77, skipped, without it, once the rest has passed).
set -uo pipefail
tide=$1 src=$2
script=$src/examples/fashion_mnist.lua
dataset=${TIDE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d /tmp/tide_fmnist_opts.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }

# run ARGS...: the script's stdout, stderr and status in $tmp/out, $tmp/err, $rc
run() {
  "$tide" "$script" --data "$dataset" --checkpoint "$tmp/ck.safetensors" "$@" \
    > "$tmp/out" 2> "$tmp/err"
  rc=$?
}

# rejects EXPECTED_TEXT ARGS...: status 2, stderr one line containing EXPECTED_TEXT, no traceback,
# and nothing trained (the data set is read only after the options are checked)
rejects() {
  local want=$1; shift
  run "$@"
  local lines
  lines=$(wc -l < "$tmp/err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$tmp/err" &&
     ! grep -q "traceback" "$tmp/err" && ! grep -q "Fashion-MNIST:" "$tmp/out"; then
    ok "$* -> $(cat "$tmp/err")"
  else
    bad "$* -> status $rc, stderr:"; cat "$tmp/err"
  fi
}

rejects "--epochs must be a positive integer, got '0'" --epochs 0
rejects "--epochs must be a positive integer, got '2.5'" --epochs 2.5
rejects "--epochs must be a positive integer, got '-1'" --epochs=-1
rejects "--batch-size must be a positive integer, got '0'" --batch-size 0
rejects "--batch-size must be a positive integer, got '-5'" --batch-size -5
rejects "--batch-size must be a positive integer, got 'x'" --batch-size x
rejects "--autocast must be float32 or bfloat16, got 'int8'" --autocast int8
rejects "--lr must be a finite number > 0, got '0'" --lr 0
rejects "--lr must be a finite number > 0, got '-0.1'" --lr -0.1
rejects "--lr must be a finite number > 0, got '1e999'" --lr 1e999
rejects "--limit must be a positive integer, got '0'" --limit 0
rejects "--test-limit must be a positive integer, got '0'" --test-limit 0
rejects "--test-limit must be a positive integer, got '1.5'" --test-limit 1.5
rejects "--seed must be an integer, got '0.5'" --seed 0.5
rejects "--epochs needs a value" --epochs
rejects "--model must be mlp or cnn, got 'rnn'" --model rnn
rejects "unknown option '--epoch'" --epoch 3
rejects "--device foo: " --device foo
rejects "cannot write the checkpoint (--checkpoint): /nonexistent/dir/x: No such file or directory" \
  --checkpoint /nonexistent/dir/x
rejects "cannot write the checkpoint (--checkpoint): $tmp: Is a directory" --checkpoint "$tmp"

# --help: status 0, and every option the parser knows is in the text
"$tide" "$script" --help > "$tmp/help" 2>&1
rc=$?
missing=""
for o in model epochs batch-size lr device limit test-limit checkpoint seed data eager quiet help; do
  grep -q -- "--$o " "$tmp/help" || missing="$missing --$o"
done
if [ "$rc" -eq 0 ] && [ -z "$missing" ]; then ok "--help lists every option"; else
  bad "--help: status $rc, missing:$missing"; cat "$tmp/help"; fi

# The writability check makes no file that stays: a run failing later (no data set) leaves none.
"$tide" "$script" --data "$tmp/no-such-dataset" --checkpoint "$tmp/left.safetensors" \
  > /dev/null 2>&1
rc=$?
if [ "$rc" -eq 1 ] && [ ! -e "$tmp/left.safetensors" ]; then
  ok "the checkpoint check leaves no file behind"
else
  bad "a failed run left $tmp/left.safetensors (or status $rc is not 1)"
fi

# ... and leaves an existing checkpoint as it was.
echo "an older checkpoint" > "$tmp/old.safetensors"
"$tide" "$script" --data "$tmp/no-such-dataset" --checkpoint "$tmp/old.safetensors" \
  > /dev/null 2>&1
if [ "$(cat "$tmp/old.safetensors")" = "an older checkpoint" ]; then
  ok "the checkpoint check leaves an existing file unchanged"
else
  bad "the checkpoint check changed an existing file"
fi

if [ ! -e "$dataset/t10k-images-idx3-ubyte.gz" ] || [ ! -e "$dataset/train-images-idx3-ubyte.gz" ]; then
  echo "$passed passed, $failed failed; skip the training runs: no Fashion-MNIST at $dataset"
  [ "$failed" -eq 0 ] && exit 77
  exit 1
fi

# A limit beyond the data set takes all of it; a sane lr does not warn.
run --epochs 1 --limit 256 --test-limit 20000 --batch-size 64 --quiet
if [ "$rc" -eq 0 ] && grep -q "^Fashion-MNIST: 256 training and 10000 test images" "$tmp/out" &&
   grep -q "^test accuracy" "$tmp/out" && grep -q "^jit: " "$tmp/out" &&
   [ -s "$tmp/ck.safetensors" ] && ! grep -q "warning" "$tmp/err"; then
  ok "--test-limit 20000 evaluates all 10000 test images; lr 0.05: no warning"
else
  bad "--limit 256 --test-limit 20000: status $rc"; cat "$tmp/out" "$tmp/err"
fi

# lr 100 diverges within a few batches (the loss passes 10x its first value, then NaN: exit 1).
run --epochs 1 --limit 512 --test-limit 100 --batch-size 64 --lr 100 --quiet
warnings=$(grep -c "warning: the loss is diverging" "$tmp/err")
if [ "$warnings" -eq 1 ] && grep -q "try a lower --lr than 100" "$tmp/err" &&
   ! grep -q "traceback" "$tmp/err"; then
  ok "--lr 100: $(grep warning "$tmp/err")"
else
  bad "--lr 100: $warnings divergence warnings, status $rc"; cat "$tmp/err"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
