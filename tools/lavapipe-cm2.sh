#!/bin/sh
# SPDX-License-Identifier: MIT
# The experimental forward on VK_NV_cooperative_matrix2 (shaders/vulkan/attn_fwd_cm2.comp) on
# Debian unstable's lavapipe, which lists that extension with flexible dimensions, reductions,
# conversions and per-element functions at subgroup scope (no workgroup scope, no tensor
# addressing): the shader is compiled with the prefix's glslang (tools/lavapipe-matrix.sh
# setup) in its lavapipe form (subgroup scope, strided loads, 8 rows a workgroup: Mesa 26.2's
# row reductions of matrices taller than its 8x8x8 shape give the second block of rows the
# first block's values), as it is, with FA_CM2_LATE_SUM and with FA_CM2_NARROW_STATS (BN 16,
# NARROW 8, so that the maxima are spread from the narrow form), and stands in for the generic
# matrix forward (FA_VULKAN_SPV_DIR) with its features enabled (FA_VULKAN_MATRIX2=1), under the
# validation layer.
#
#   tools/lavapipe-cm2.sh CACHE_DIR CLI SHADER_DIR
#
# Exit 77 (skipped) without a setup, without the prefix's glslang or without matrix shaders in
# the build; fails unless every shape passes `CLI run --check` on that module. The strided form
# needs whole tiles, so the shapes are multiples of 16 (the tensor-addressed form, NVIDIA's,
# has no such bound).
set -eu
[ $# -eq 3 ] || { echo "usage: $0 CACHE_DIR CLI SHADER_DIR" >&2; exit 2; }
cache=$1 cli=$2 src=$3
here=$(dirname "$0")
root=$cache/root
[ -f "$cache/ready" ] || { echo "lavapipe-cm2: no setup in $cache: skipped"; exit 77; }
[ -x "$root/usr/bin/glslangValidator" ] ||
    { echo "lavapipe-cm2: the setup in $cache has no glslang (set up again): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compile() { # folder, more -D options
    mkdir -p "$work/$1"
    out=$work/$1/attn_fwd_cm_f16_s16.spv
    shift
    if ! sh "$here/lavapipe-matrix.sh" run "$cache" \
        "$root/usr/bin/glslangValidator" -V --target-env vulkan1.3 -DDTYPE_F16 -DSTORAGE16 \
        -I"$src" -DFA_FIXED_D=64 -DFA_CM2_BM=8 -DFA_CM2_BN=16 -DFA_CM2_NARROW=8 -DFA_CM2_WG=8 \
        -DFA_CM2_SUBGROUP "$@" -o "$out" "$src/attn_fwd_cm2.comp" >"$work/glslang.log" 2>&1; then
        cat "$work/glslang.log"
        echo "lavapipe-cm2: FAIL: attn_fwd_cm2.comp $* does not compile"
        exit 1
    fi
}
compile spv
compile spv_late -DFA_CM2_LATE_SUM
compile spv_narrow -DFA_CM2_NARROW_STATS
devices=$(sh "$here/lavapipe-matrix.sh" run "$cache" "$cli" devices 2>&1) || true
case $devices in
*"cooperative matrix"*) ;;
*) echo "lavapipe-cm2: this build has no matrix shaders on lavapipe: skipped"; exit 77 ;;
esac
failed=0
check() { # module folder, run arguments
    log=$work/run.log
    spv=$1
    shift
    FA_VULKAN_VALIDATION=1 FA_VULKAN_MATRIX2=1 FA_VULKAN_SPV_DIR="$work/$spv" \
        FA_VULKAN_MATRIX_FWD_TILES=1,1,16 sh "$here/lavapipe-matrix.sh" run "$cache" "$cli" run \
        --backend vulkan --dtype f16 --head-dim 64 --repeat 1 --warmup 0 --check --log debug \
        "$@" >"$log" 2>&1 || true
    result=$(grep -a '^check ' "$log" | tail -n 1)
    if grep -aq 'usable at subgroup scope.*(enabled: FA_VULKAN_MATRIX2)' "$log" &&
        grep -aq 'attn_fwd_cm_f16_s16 from .*(FA_VULKAN_SPV_DIR)' "$log" &&
        case $result in *PASS) true ;; *) false ;; esac; then
        echo "lavapipe-cm2: $spv $*: $result"
    else
        grep -a 'matrix2\|SPV_DIR\|rror' "$log" | tail -n 5
        echo "lavapipe-cm2: FAIL: $spv $*: ${result:-no check result}"
        failed=1
    fi
}
# Every shape on the plain form; two on the others (each new specialization is an LLVM compile
# on lavapipe, tens of seconds on CI's two cores).
check spv --seq 64
check spv --seq-q 64 --seq-k 96 --causal
check spv --heads 8 --kv-heads 2 --seq 128 --causal
check spv --seq 128 --window 20,5
check spv --seq-q 96 --seq-k 48 --causal --batch 2
check spv --seq 64 --softcap 30
check spv --heads 4 --seq-q 64 --seq-k 128 --bias --causal --alibi
check spv --batch 2 --heads 8 --kv-heads 2 --seq 128 --bias --window 30,10 --softcap 25
for spv in spv_late spv_narrow; do
    check "$spv" --seq-q 96 --seq-k 48 --causal --batch 2
    check "$spv" --heads 8 --kv-heads 2 --seq 128 --window 20,5
done
exit $failed
