#!/bin/sh
# SPDX-License-Identifier: MIT
# Cross-compiles the Windows x86-64 build with MinGW-w64 into BUILD_DIR (CPU backend only: the DLL
# and its import library, the static library, flashattn.exe, the examples and the C++ header
# check) and runs it under wine: the device list, the CPU conformance matrix and the examples.
# Needs `tools/install-deps.sh windows`. Exits non-zero on the first failure.
#
#   tools/windows-check.sh [BUILD_DIR]        default: build-win
set -eu
out=${1:-build-win}
root=$(cd "$(dirname "$0")/.." && pwd)
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver)
[ -x "$wine" ] || { echo "windows-check: no wine64 (tools/install-deps.sh windows)" >&2; exit 1; }

cmake -S "$root" -B "$out" -G Ninja --toolchain "$root/cmake/mingw-w64-x86_64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DFA_WERROR=ON \
    -DFA_WITH_CUDA=OFF -DFA_WITH_VULKAN=OFF -DFA_WITH_OPENCL=OFF >/dev/null
cmake --build "$out"
for f in flashattn.dll libflashattn.dll.a libflashattn.a flashattn.exe basic_forward.exe \
    split_keys.exe header_cxx.exe; do
    [ -f "$out/$f" ] || { echo "windows-check: $out/$f was not built" >&2; exit 1; }
done

# A fresh prefix, so that nothing from an earlier run (or the user's ~/.wine) takes part; its
# first start, which sets the prefix up, takes seconds.
WINEPREFIX=$(mktemp -d "${TMPDIR:-/tmp}/flashattn-wine.XXXXXX")
export WINEPREFIX WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
trap '"$wineserver" -k 2>/dev/null || true; rm -rf "$WINEPREFIX"' EXIT
"$wine" "$out/flashattn.exe" devices
"$wine" "$out/flashattn.exe" conformance --backend cpu --quick
"$wine" "$out/basic_forward.exe"
"$wine" "$out/split_keys.exe"
echo "windows-check: passed"
