#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR [SANITIZE] — cmake --install into a temporary prefix, then
# use only the installed files: build a small C program and examples/embed with pkg-config (shared
# and static) and with find_package(tide), run them, and require "tide" / "tide.nn" from the
# stock lua5.4. Prints "N passed, N failed" like the other test programs.
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
sanitize=${3:-OFF}
tmp=$(mktemp -d /tmp/tide_install_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
passed=0
failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
check() { # description, command...
  local what=$1; shift
  if "$@" > "$tmp/out.log" 2>&1; then ok "$what"; else bad "$what"; tail -20 "$tmp/out.log"; fi
}

san_flags=()
if [ "$sanitize" = ON ]; then
  san_flags=(-fsanitize=address,undefined -fno-omit-frame-pointer)
fi

check "cmake --install --prefix" cmake --install "$build" --prefix "$prefix"
libdir=$(dirname "$(find "$prefix" -name libtide.so -print -quit)")
for f in "$libdir/libtide.so" "$libdir/libtide.a" "$libdir/libtide_tcc.a" \
         "$prefix/include/tide.h" "$prefix/bin/tide" "$libdir/pkgconfig/tide.pc" \
         "$libdir/cmake/tide/tideConfig.cmake" "$libdir/cmake/tide/tideConfigVersion.cmake" \
         "$prefix/lib/lua/5.4/tide.so"; do
  if [ -e "$f" ]; then ok "installed ${f#$prefix/}"; else bad "missing ${f#$prefix/}"; fi
done
# The public header is tide.h alone (core/tide_internal.h is the Lua binding's).
extra_headers=$(cd "$prefix/include" && ls | grep -v '^tide\.h$')
if [ -z "$extra_headers" ]; then ok "include/ holds tide.h only"
else bad "include/ also holds: $extra_headers"; fi
# pkg-config's and CMake's version are the header's.
hdr_version=$(sed -n 's/^#define TIDE_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' "$prefix/include/tide.h" |
              paste -sd.)
if grep -q "^Version: $hdr_version\$" "$libdir/pkgconfig/tide.pc" &&
   grep -q "PACKAGE_VERSION \"$hdr_version\"" "$libdir/cmake/tide/tideConfigVersion.cmake"; then
  ok "tide.pc and tideConfigVersion.cmake say $hdr_version, as tide.h"
else bad "tide.pc or tideConfigVersion.cmake disagree with tide.h's $hdr_version"; fi
if [ -d "$src/lua/tide" ]; then
  for f in $(cd "$src/lua" && find tide -name '*.lua'); do
    if [ -e "$prefix/share/lua/5.4/$f" ]; then ok "installed share/lua/5.4/$f"
    else bad "missing share/lua/5.4/$f"; fi
  done
fi

# A program that uses the installed header and library: a value checked against arithmetic.
cat > "$tmp/hello.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <tide.h>
int main(void)
{
    int64_t shape[2] = {2, 3};
    tide_tensor *x = tide_ones(2, shape, TIDE_FLOAT32);
    tide_tensor *y = tide_mul_scalar(x, 2.5);
    tide_tensor *s = tide_sum(y, NULL, 0, false);
    double v = 0;
    if (!s || tide_item(s, &v) < 0 || v != 15.0) {
        fprintf(stderr, "sum %g: %s\n", v, tide_last_error());
        return 1;
    }
    tide_set_memory_limit(1 << 20); /* 1 MiB: a 4 MiB tensor must fail with a clear error */
    int64_t big[1] = {1 << 20};
    tide_tensor *z = tide_zeros(1, big, TIDE_FLOAT32);
    if (z || !strstr(tide_last_error(), "out of memory") ||
        tide_last_error_code() != TIDE_ERR_OUT_OF_MEMORY) {
        fprintf(stderr, "the memory cap did not hold: %s\n", tide_last_error());
        return 1;
    }
    tide_set_memory_limit(0);
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", TIDE_VERSION_MAJOR, TIDE_VERSION_MINOR,
             TIDE_VERSION_PATCH);
    if (strcmp(version, tide_version()) != 0) {
        fprintf(stderr, "header version %s, library version %s\n", version, tide_version());
        return 1;
    }
    tide_release(s); tide_release(y); tide_release(x);
    tide_shutdown();
    printf("hello from tide: %g\n", v);
    return 0;
}
EOF
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc_pc() { # output, source, pkg-config options...
  local out=$1 srcf=$2; shift 2
  # shellcheck disable=SC2046
  cc -std=c11 "${san_flags[@]}" -o "$out" "$srcf" $(pkg-config --cflags "$@" tide) \
     -Wl,-rpath,"$libdir" -lm
}
check "pkg-config --cflags --libs tide" pkg-config --cflags --libs tide
if pkg-config --static --libs tide | grep -q -- '-lz' && pkg-config --static --libs tide | grep -q -- '-lpthread'; then
  ok "pkg-config --static names the private libs"
else bad "pkg-config --static: $(pkg-config --static --libs tide)"; fi
check "hello.c built with pkg-config (shared)" cc_pc "$tmp/hello" "$tmp/hello.c" --libs
check "hello (shared) runs" "$tmp/hello"
check "hello links libtide.so from the prefix" bash -c "ldd '$tmp/hello' | grep -q '$libdir/libtide.so'"
# Static: libtide.a and the private libs (libtcc included: the jit compiles to machine code).
# shellcheck disable=SC2046
check "hello.c built with pkg-config --static (libtide.a)" \
  cc -std=c11 "${san_flags[@]}" -o "$tmp/hello_static" "$tmp/hello.c" $(pkg-config --cflags tide) \
     $(pkg-config --static --libs tide | sed 's/-ltide /-l:libtide.a /') -lm
check "hello (static) runs" "$tmp/hello_static"

# examples/embed against the install: pkg-config, and find_package through its CMakeLists.txt.
# A graph file exported by the installed tide program (random weights: accuracy is not compared).
cat > "$tmp/make_graph.lua" <<'EOF'
local tide = require "tide"
local nn = require "tide.nn"
tide.manual_seed(1)
local m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                        nn.Linear(256, 10))
tide.export(function(x) return m(x) end, { tide.zeros(2, 784) }, arg[1],
            { dynamic = { [1] = { 1 } }, metadata = { model = "mlp" } })
print("exported")
EOF
if [ -d "$src/lua/tide" ]; then
  check "the installed tide program exports a graph" "$prefix/bin/tide" "$tmp/make_graph.lua" "$tmp/m.tgraph"
fi
check "embed.c built with pkg-config" cc_pc "$tmp/embed_pc" "$src/examples/embed/embed.c" --libs
cmake_args=(-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release)
if [ "$sanitize" = ON ]; then
  cmake_args+=(-DCMAKE_C_FLAGS="${san_flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}")
fi
check "examples/embed configured with find_package(tide)" \
  cmake -S "$src/examples/embed" -B "$tmp/embed_build" "${cmake_args[@]}"
check "examples/embed built with find_package(tide)" cmake --build "$tmp/embed_build"
check "examples/embed configured with find_package(tide), tide::tide (shared)" \
  cmake -S "$src/examples/embed" -B "$tmp/embed_shared" -DTIDE_EMBED_SHARED=ON "${cmake_args[@]}"
check "examples/embed built against libtide.so" cmake --build "$tmp/embed_shared"
check "that build links the installed libtide.so" bash -c "ldd '$tmp/embed_shared/embed' | grep -q '$libdir/libtide.so'"
dataset=${TIDE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ -e "$tmp/m.tgraph" ] && [ -e "$dataset/t10k-images-idx3-ubyte.gz" ]; then
  check "embed (pkg-config build) classifies 100 images" "$tmp/embed_pc" --limit 100 --data "$dataset" "$tmp/m.tgraph"
  check "embed (find_package build) classifies 100 images" "$tmp/embed_build/embed" --limit 100 --data "$dataset" "$tmp/m.tgraph"
  check "embed (find_package, shared) classifies 100 images" "$tmp/embed_shared/embed" --limit 100 --data "$dataset" "$tmp/m.tgraph"
else
  echo "skip: running embed (no graph file or no dataset at $dataset)"
fi

# The stock interpreter finds the installed module (paths point at the temporary prefix; with
# the default prefix /usr/local Debian's lua5.4 searches these places already).
if [ "$sanitize" != ON ] && command -v lua5.4 >/dev/null; then
  export LUA_CPATH="$prefix/lib/lua/5.4/?.so;;" LUA_PATH="$prefix/share/lua/5.4/?.lua;;"
  check 'lua5.4: require "tide"' lua5.4 -e \
    'local tide = require "tide"; assert(tide.ones(2, 3):sum():item() == 6)'
  if [ -d "$src/lua/tide" ]; then
    check 'lua5.4: require "tide.nn"' lua5.4 -e \
      'local nn = require "tide.nn"; local l = nn.Linear(3, 2); assert(l.weight.shape[2] == 3)'
  fi
  check "default cpath has /usr/local/lib/lua/5.4" lua5.4 -e \
    'assert(package.cpath:find("/usr/local/lib/lua/5.4/?.so", 1, true))'
else
  echo "skip: lua5.4 checks (sanitizer build: the stock interpreter is not instrumented)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
