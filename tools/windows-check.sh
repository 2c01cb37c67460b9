#!/bin/sh
# SPDX-License-Identifier: MIT
# Cross-compiles the Windows x86-64 build with MinGW-w64 into BUILD_DIR, with every backend whose
# build tools this machine has (the DLL and its import library, the static library,
# flashattn.exe, the examples and the C++ header check), and runs it under wine: the device list
# (wine's own vulkan-1.dll and opencl.dll pass calls on to this machine's Vulkan and OpenCL
# drivers; once more with those two turned off, so that every GPU backend says why it is
# unavailable), the CPU conformance matrix, a few OpenCL cases where wine reached a driver, and
# the examples. Needs `tools/install-deps.sh windows`. Exits non-zero on the first failure.
#
#   tools/windows-check.sh [BUILD_DIR [LINUX_BUILD_DIR]]        default: build-win
#
# LINUX_BUILD_DIR, a Linux build of this checkout, is brought up to date and its SPIR-V and CUDA
# fatbins are copied rather than compiled again (FA_DEVICE_CODE_FROM, cmake/fa_cross.cmake); that
# saves minutes of glslangValidator and nvcc on a small machine.
set -eu
out=${1:-build-win}
from=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver)
[ -x "$wine" ] || { echo "windows-check: no wine64 (tools/install-deps.sh windows)" >&2; exit 1; }

reuse=""
if [ -n "$from" ]; then
    cmake --build "$from"
    reuse="-DFA_DEVICE_CODE_FROM=$(cd "$from" && pwd)"
fi
mkdir -p "$out"
# shellcheck disable=SC2086
if ! cmake -S "$root" -B "$out" -G Ninja --toolchain "$root/cmake/mingw-w64-x86_64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DFA_WERROR=ON $reuse >"$out/configure.log" 2>&1; then
    cat "$out/configure.log" >&2
    exit 1
fi
grep -E 'flashattn: (backends built|.* not built)' "$out/configure.log" || true
cmake --build "$out"
for f in flashattn.dll libflashattn.dll.a libflashattn.a flashattn.exe basic_forward.exe \
    split_keys.exe fp8_kv_cache.exe header_cxx.exe; do
    [ -f "$out/$f" ] || { echo "windows-check: $out/$f was not built" >&2; exit 1; }
done

# A fresh prefix, so that nothing from an earlier run (or the user's ~/.wine) takes part; its
# first start, which sets the prefix up, takes seconds.
WINEPREFIX=$(mktemp -d "${TMPDIR:-/tmp}/flashattn-wine.XXXXXX")
export WINEPREFIX WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
trap '"$wineserver" -k 2>/dev/null || true; rm -rf "$WINEPREFIX"' EXIT
# One wineserver for every step, kept until the trap: by default it exits a few seconds after its
# last program, and a program started while it is going away fails ("recvmsg: Connection reset
# by peer").
"$wineserver" -p
devices=$("$wine" "$out/flashattn.exe" devices)
printf '%s\n' "$devices"
# Every backend of the Linux build must be in the Windows build too.
if [ -n "$from" ] && [ -x "$from/flashattn" ]; then
    built() { awk '$2 == "built" { print $1 }' | tr -d '\r' | sort | tr '\n' ' '; }
    linux=$("$from/flashattn" devices | built)
    windows=$(printf '%s\n' "$devices" | built)
    if [ "$linux" != "$windows" ]; then
        echo "windows-check: backends built for Linux: $linux; for Windows: $windows" >&2
        exit 1
    fi
fi
echo "windows-check: without wine's vulkan-1.dll and opencl.dll:"
WINEDLLOVERRIDES="$WINEDLLOVERRIDES;vulkan-1,opencl=" "$wine" "$out/flashattn.exe" devices
"$wine" "$out/flashattn.exe" conformance --backend cpu --quick
# Where wine's opencl.dll reached an OpenCL driver of this machine (PoCL), a few cases on it
# (the programs are built anew in each fresh prefix, so the whole matrix would take minutes).
if printf '%s\n' "$devices" | grep -Eq '^ +opencl +built +available'; then
    "$wine" "$out/flashattn.exe" conformance --backend opencl --quick --limit 4
fi
"$wine" "$out/basic_forward.exe"
"$wine" "$out/split_keys.exe"
"$wine" "$out/fp8_kv_cache.exe"
echo "windows-check: passed"
