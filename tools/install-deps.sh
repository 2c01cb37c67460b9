#!/bin/sh
# Installs, on Debian or Ubuntu, the packages flashattn needs to build and test that are missing.
# Runs apt-get through sudo when not root. Safe to run again.
set -eu
# Build: compiler, CMake, test framework; GPU headers and shader tools (the GPU drivers themselves
# are opened at run time); lavapipe and PoCL so that the Vulkan and OpenCL backends can be tested
# without a GPU.
packages="cmake ninja-build gcc libc6-dev pkg-config libcriterion-dev
  opencl-headers ocl-icd-libopencl1 pocl-opencl-icd
  libvulkan-dev libvulkan-volk-dev glslang-tools spirv-tools mesa-vulkan-drivers vulkan-validationlayers"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
as_root=""
[ "$(id -u)" -eq 0 ] || as_root="sudo"
echo "installing:$missing" >&2
$as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
