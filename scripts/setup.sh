#!/usr/bin/env bash
# Installs the Debian packages tide builds, tests and benchmarks with.
# Idempotent: when every package is present it changes nothing and needs no network.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libopenblas-dev liblua5.4-dev lua5.4 libreadline-dev libtcc-dev libsleef-dev
  libvulkan-dev mesa-vulkan-drivers glslc libshaderc-dev glslang-dev spirv-tools
  valgrind zlib1g-dev clang
  dataset-fashion-mnist fortunes
  libonnx-dev libonnx-testdata protobuf-c-compiler libprotobuf-c-dev
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
