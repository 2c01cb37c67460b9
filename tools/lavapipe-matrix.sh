#!/bin/sh
# SPDX-License-Identifier: MIT
# Debian unstable's lavapipe (Mesa >= 25) lists VK_KHR_cooperative_matrix (f16 8x8x8, subgroup 8),
# which Debian 12's Mesa 22.3 lacks: with it the Vulkan matrix shaders run on a CPU-only machine.
# It needs unstable's glibc, so nothing is installed system-wide: the packages are unpacked into a
# private prefix and a program is started under that prefix's dynamic loader, with the Vulkan
# loader pointed at lavapipe and unstable's validation layer alone.
#
#   tools/lavapipe-matrix.sh setup CACHE_DIR      fetch (about 90 MB) and unpack (250 MB); does
#                                                 nothing when done. If apt or the network fails
#                                                 it says why and exits 0 without the marker
#                                                 (the test then skips).
#   tools/lavapipe-matrix.sh run CACHE_DIR CMD..  run CMD, a dynamically linked x86-64 program
#                                                 (e.g. build/flashattn), under that prefix.
#   tools/lavapipe-matrix.sh test CACHE_DIR CLI [CONFORMANCE ARGS..]
#                                                 the CTest: exit 77 (skipped) without a setup
#                                                 or without matrix shaders in the build;
#                                                 fails unless `CLI devices` shows lavapipe on
#                                                 the cooperative-matrix path and `CLI conformance
#                                                 --backend vulkan ARGS` (under validation) passes
#                                                 with every f16 forward, dK/dV and dQ pipeline
#                                                 on the matrix kernels (the library's debug log
#                                                 names each pipeline it builds).
#
# CACHE_DIR/ready marks a finished setup; CACHE_DIR/mesa-shader-cache keeps lavapipe's compiled
# shaders (the matrix shaders take LLVM minutes to compile on a small CPU, seconds once cached).
set -eu

usage() {
    echo "usage: $0 setup CACHE_DIR | run CACHE_DIR CMD [ARGS..] | test CACHE_DIR CLI [ARGS..]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
self=$0
mode=$1
[ "$mode" != setup ] || mkdir -p "$2"
cache=$(cd "$2" 2>/dev/null && pwd || echo "$2")
shift 2
root=$cache/root
lib=$root/usr/lib/x86_64-linux-gnu

skip_setup() {
    [ -f "${log:-}" ] && tail -n 3 "$log"
    echo "lavapipe-matrix: setup skipped: $*"
    exit 0
}

setup() {
    if [ -f "$cache/ready" ]; then
        echo "lavapipe-matrix: already set up in $cache: $(cat "$cache/ready")"
        return 0
    fi
    if [ "$(dpkg --print-architecture 2>/dev/null)" != amd64 ] || ! command -v apt-get >/dev/null
    then
        skip_setup "needs Debian's apt-get and dpkg on amd64"
    fi
    # A private apt: its own sources list, package lists and an empty dpkg status, so that apt
    # resolves the whole dependency closure from unstable and touches nothing of the system's.
    apt=$cache/apt
    log=$apt/log
    rm -rf "$cache/debs" "$root"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$cache/debs"
    echo 'deb [trusted=yes] http://deb.debian.org/debian unstable main' >"$apt/sources.list"
    : >"$apt/status"
    set -- -q -oDir::Etc::SourceList="$apt/sources.list" -oDir::Etc::SourceParts=/dev/null \
        -oDir::State::Lists="$apt/lists" -oDir::State::status="$apt/status" \
        -oDir::Cache="$apt/cache" -oAPT::Architecture=amd64 -oAPT::Install-Recommends=false \
        -oAPT::Sandbox::User=root
    # lavapipe, the Vulkan loader, the validation layer and the OpenMP runtime that libflashattn
    # links; apt adds glibc, LLVM and the rest of what they need.
    wanted="mesa-vulkan-drivers libvulkan1 vulkan-validationlayers libgomp1"
    apt-get "$@" update >"$log" 2>&1 || skip_setup "apt-get update failed (no network?)"
    # shellcheck disable=SC2086
    pkgs=$(apt-get "$@" -s install $wanted 2>>"$log" | awk '/^Inst /{print $2}')
    [ -n "$pkgs" ] || skip_setup "apt could not resolve $wanted in unstable"
    # shellcheck disable=SC2086
    (cd "$cache/debs" && apt-get "$@" download $pkgs) >>"$log" 2>&1 ||
        skip_setup "apt-get download failed"
    mkdir -p "$root"
    for deb in "$cache"/debs/*.deb; do
        case ${deb##*/} in
        # Of Mesa's Vulkan drivers only lavapipe: the others are most of the package unpacked.
        mesa-vulkan-drivers_*)
            dpkg-deb --fsys-tarfile "$deb" |
                tar -x -C "$root" --wildcards '*/libvulkan_lvp.so' '*/lvp_icd*.json' ;;
        *) dpkg-deb -x "$deb" "$root" ;;
        esac || skip_setup "could not unpack ${deb##*/}"
    done
    # shellcheck disable=SC2012
    versions=$(cd "$cache/debs" && ls mesa-vulkan-drivers_* libllvm* libc6_* 2>/dev/null |
        sed 's/_amd64.deb//; s/%3a/:/' | tr '\n' ' ')
    rm -rf "$cache/debs" "$apt/cache" "$apt/lists"
    # The ICD manifest names the driver by file name: make it the unpacked one's absolute path,
    # so that the system's (Debian 12's) lavapipe is never picked up instead.
    # shellcheck disable=SC2012
    icd=$(ls "$root"/usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -n 1)
    [ -n "$icd" ] || skip_setup "mesa-vulkan-drivers has no lvp_icd.json"
    sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$lib/libvulkan_lvp.so\"#" "$icd" \
        >"$cache/lvp_icd.json"
    mkdir -p "$cache/no-implicit-layers"
    # Every library that the driver needs must resolve inside the prefix.
    missing=$("$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$lib" --list \
        "$lib/libvulkan_lvp.so" 2>&1 | grep 'not found' || true)
    [ -z "$missing" ] || skip_setup "libvulkan_lvp.so has unresolved libraries: $missing"
    echo "$versions" >"$cache/ready"
    echo "lavapipe-matrix: ready in $cache ($(du -sh "$root" | cut -f1) unpacked): $versions"
}

run() {
    if [ ! -f "$cache/ready" ]; then
        echo "lavapipe-matrix: not set up in $cache (run: $self setup $cache)" >&2
        exit 2
    fi
    [ $# -ge 1 ] || usage
    # Only lavapipe, only unstable's layers (Debian 12's validation layer predates
    # VK_KHR_cooperative_matrix), and no implicit layer such as Mesa's device_select, whose
    # filtering out the validation messenger would report.
    export VK_DRIVER_FILES="$cache/lvp_icd.json"
    export VK_LAYER_PATH="$root/usr/share/vulkan/explicit_layer.d"
    export VK_IMPLICIT_LAYER_PATH="$cache/no-implicit-layers"
    export MESA_SHADER_CACHE_DIR="$cache/mesa-shader-cache"
    unset VK_ICD_FILENAMES VK_ADD_DRIVER_FILES VK_ADD_LAYER_PATH VK_INSTANCE_LAYERS
    # The program's RUNPATH (build/ for the CLI's libflashattn) is still searched after these.
    exec "$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$lib" "$@"
}

test_matrix() {
    if [ ! -f "$cache/ready" ]; then
        echo "skipped: Debian unstable's lavapipe is not set up in $cache" \
            "(tools/lavapipe-matrix.sh setup $cache; it needs network access to Debian)"
        exit 77
    fi
    [ $# -ge 1 ] || usage
    cli=$1
    shift
    echo "lavapipe: $(cat "$cache/ready")"
    unset FA_BACKEND FA_DEVICE FA_VULKAN_MATRIX FA_VULKAN_NO_16BIT_STORAGE FA_VULKAN_SPV_DIR
    kernels=$(sh "$self" run "$cache" "$cli" devices 2>&1 |
        sed -n '/\[vulkan 0\] llvmpipe/,/kernels:/p' | grep 'kernels:' || true)
    echo "devices:$kernels"
    case $kernels in
    *"f16: cooperative matrix"*) ;;
    *"matrix shaders not built"*)
        # The build found no glslang with GL_KHR_cooperative_matrix (PyPI unreachable, say):
        # an environment limit the configure step already reported, not a failure here.
        echo "skipped: this build has no matrix shaders (see 'kernels:' above)"
        exit 77 ;;
    *)
        echo "FAIL: lavapipe is not on the cooperative-matrix path (see 'kernels:' above;" \
            "empty: no llvmpipe device)"
        exit 1 ;;
    esac
    # Under the validation layer (any message fails its case); a filter that matches no case
    # fails too, and so does an f16 case that a scalar shader served (variant 1: f16 in 16-bit
    # storage), which the matrix kernels should have.
    # A log of this run's own (two tests may run at once), read as text (grep -a) whatever
    # bytes the driver's messages hold.
    out=$cache/test-$$.log
    rc=0
    FA_VULKAN_VALIDATION=1 sh "$self" run "$cache" "$cli" conformance --backend vulkan --verbose \
        --log debug "$@" >"$out" 2>&1 || rc=$?
    grep -av '^flashattn debug' "$out"
    echo "matrix pipelines built:"
    grep -a 'built attn_[a-z_]*_cm ' "$out" || true
    [ "$rc" -eq 0 ] || exit "$rc"
    # FA_LAVAPIPE_EXPECT: text that some matrix pipeline's module name must contain (a test that
    # forces a tiling checks that its module, not a fallback, ran).
    if [ -n "${FA_LAVAPIPE_EXPECT:-}" ] &&
        ! grep -a 'built attn_[a-z_]*_cm ' "$out" | grep -q "module cat_[a-z0-9_]*$FA_LAVAPIPE_EXPECT"
    then
        echo "FAIL: no matrix pipeline came from a module whose name contains '$FA_LAVAPIPE_EXPECT'"
        exit 1
    fi
    grep -aEq '^[1-9][0-9]* passed, 0 failed' "$out" || { echo "FAIL: no case ran"; exit 1; }
    if grep -aE 'built attn_(fwd|bwd_dkdv|bwd_dq) \(variant 1\)' "$out"; then
        echo "FAIL: the scalar shaders served f16 (above), not the matrix kernels"
        exit 1
    fi
    rm -f "$out" # kept where a check failed
}

case $mode in
setup) setup ;;
run) run "$@" ;;
test) test_matrix "$@" ;;
*) usage ;;
esac
