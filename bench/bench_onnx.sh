#!/usr/bin/env bash
# bench_onnx.sh [BUILD_DIR] — tide against ONNX Runtime on three models exported from PyTorch
# (bench/onnx_models.py: an MLP, a conv net, a transformer encoder layer): batch-1 latency and
# batch-64 throughput, tide's compiled graph called from C (bench_onnx) and ONNX Runtime's CPU
# session from Python (bench_onnx_ort.py), same inputs, same thread count (1, and every core).
# The two run alternately, ROUNDS times (default 3), each round a few slices per case, and each
# figure is the median over rounds: these VMs drift, and alternating spreads the drift over
# both. Prints each side's lines (tide_*, ort_*), the output checksums of both (they must
# agree), and the ratios: latency tide/ORT (goal <= 1) and throughput tide/ORT, by wall time and
# (_cpu_ lines) by each process's CPU time per call, which other jobs on the machine disturb less.
# ONNX Runtime and numpy come from PyPI into BUILD_DIR/bench-venv (made when missing); the models
# go to BUILD_DIR/bench-onnx (made when missing, with Debian's python3-torch). Not part of the
# tests; ~5 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
rounds=${ROUNDS:-3}
slices=${SLICES:-3}
seconds=${SLICE_SECONDS:-0.2}
sys_python=/usr/bin/python3
[ -x "$sys_python" ] || sys_python=python3
venv=$build/bench-venv
models=$build/bench-onnx
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import onnxruntime, numpy' 2>/dev/null
then
    "$sys_python" -m venv "$venv"
    "$venv/bin/pip" install -q onnxruntime numpy
fi
if [ ! -f "$models/encoder.onnx" ]; then
    "$sys_python" "$here/onnx_models.py" "$models" >/dev/null 2>&1 ||
        { echo "bench_onnx.sh: exporting the models failed (python3-torch?)" >&2; exit 1; }
fi
echo "# bench_onnx.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# $(nproc) cores; $rounds rounds of $slices slices (>= $seconds s) per case, tide and ORT alternating"
# A model with an op tide's importer lacks is left out, with the importer's reason.
files=()
for m in mlp cnn encoder; do
    if why=$("$build/bench/bench_onnx" --slices 1 --seconds 0 --reference 0 --batches 1 \
             "$models/$m.onnx" 2>&1 >/dev/null); then
        files+=("$models/$m.onnx")
    else
        echo "# $m left out: $why"
    fi
done
[ ${#files[@]} -gt 0 ] || exit 1
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# The median over rounds of the figure NAME in files PREFIX.*.
median_of_rounds() {
    grep -h "^$2:" "$1".* | awk '{print $2}' | sort -g |
        awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'
}

threads_list=1
[ "$(nproc)" -gt 1 ] && threads_list="1 $(nproc)"
for t in $threads_list; do
    args=(--threads "$t" --slices "$slices" --seconds "$seconds" "${files[@]}")
    for r in $(seq "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then
            "$build/bench/bench_onnx" "${args[@]}" >"$log/tide.$t.$r"
            "$venv/bin/python" "$here/bench_onnx_ort.py" "${args[@]}" >"$log/ort.$t.$r"
        else
            "$venv/bin/python" "$here/bench_onnx_ort.py" "${args[@]}" >"$log/ort.$t.$r"
            "$build/bench/bench_onnx" "${args[@]}" >"$log/tide.$t.$r"
        fi
    done
    echo
    echo "## $t thread(s)"
    if [ "$t" = 1 ]; then
        grep -E '^(cpu_model|cpu_isa):' "$log/tide.1.1"
        grep -h '^# tide\|^# onnxruntime' "$log/tide.1.1" "$log/ort.1.1"
        paste -d' ' <(grep '^# .*checksum' "$log/tide.1.1" | sed 's/^#/# tide/') \
            <(grep '^# .*checksum' "$log/ort.1.1" | sed 's/^# .*checksum/ORT/')
    fi
    echo "sgemm_512_t${t}_openblas: $(median_of_rounds "$log/tide.$t" "sgemm_512_t${t}_openblas") GFLOP/s"
    for name in $(grep -hoE '^[a-z0-9]+_b[0-9]+_t[0-9]+_(cpu_)?(latency|throughput)' "$log/tide.$t.1"); do
        tv=$(median_of_rounds "$log/tide.$t" "$name")
        ov=$(median_of_rounds "$log/ort.$t" "$name")
        unit=$(grep -h "^$name:" "$log/tide.$t.1" | awk '{print $3}')
        echo "tide_$name: $tv $unit"
        echo "ort_$name: $ov $unit"
        ratio=$(awk -v a="$tv" -v b="$ov" 'BEGIN {printf "%.2f", a / b}')
        case $name in
        *_latency) verdict=$(awk -v r="$ratio" 'BEGIN {print (r <= 1) ? "met" : "NOT met"}')
                   echo "${name}_ratio: $ratio (tide/ORT time; goal <= 1: $verdict)" ;;
        *) echo "${name}_ratio: $ratio (tide/ORT samples/s; > 1: tide faster)" ;;
        esac
    done
done
