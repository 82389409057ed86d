#!/usr/bin/env bash
# compare_builds.sh OLD_BUILD NEW_BUILD [SLICES] — the same benchmarks from two builds of tide on
# one machine, alternating old/new per benchmark program SLICES times (default 2), so a drift of
# the VM lands on both. Prints each `name: value unit` figure as the median over its slices for
# old and new, and new/old as a ratio where higher is better (times are inverted), with the CPU
# model and tier. Not part of the tests. Used for "performance unchanged" checks after a
# refactor: a ratio >= 0.95 is unchanged within this machine's noise.
set -uo pipefail
old=${1:?old build dir}; new=${2:?new build dir}; slices=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
tier=$(env -u TIDE_CPU_ISA "$new/bench/bench_jit" --isa)
echo "# compare_builds.sh $(date -u '+%Y-%m-%d %H:%M UTC'): old $old, new $new, $slices slices"
echo "# cpu: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//'), $(nproc) cores; tier $tier"
run() { # build, bench
    case $2 in
        *.lua) "$1/lua/tide" "$here/$2" 5 ;;
        *) "$1/bench/$2" ;;
    esac
}
benches="bench_ops bench_jit bench_jit_mlp.lua bench_lua.lua bench_mlp.lua bench_vulkan"
for s in $(seq 1 "$slices"); do
    for b in $benches; do
        first=old; second=new
        if [ $((s % 2)) -eq 0 ]; then first=new; second=old; fi
        for which in $first $second; do
            dir=$old; [ "$which" = new ] && dir=$new
            run "$dir" "$b" 2>&1 | grep -E '^[A-Za-z0-9_]+: [-0-9.e+]+ [^ ]+' |
                sed "s|^|$which $b |" >> "$out/all"
        done
    done
done
# median per (build, name), then new/old with the unit's direction
awk '
function med(k,   n, i, j, t, a) { n = split(v[k], a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
{ name = $2 " " $3; sub(/:$/, "", name); k = $1 SUBSEP name; v[k] = v[k] " " $4; unit[name] = $5; seen[name] = 1 }
END {
    for (name in seen) {
        if (!((("old" SUBSEP name) in v) && (("new" SUBSEP name) in v))) continue
        o = med("old" SUBSEP name); n = med("new" SUBSEP name); u = unit[name]
        lower = u ~ /^(s|ms|us|ns|sec)(\/.*)?$/ || u ~ /ulp|^(cycles|instructions|bytes)$/
        r = (o == 0 || n == 0) ? 1 : (lower ? o / n : n / o)
        printf "%-60s old %12.4g new %12.4g %-10s ratio %.3f%s\n", name, o, n, u, r, r < 0.95 ? "  (below 0.95)" : ""
    }
}' "$out/all" | sort
