#!/bin/bash
# SPDX-License-Identifier: MIT
# The experimental forward on VK_NV_cooperative_matrix2 (shaders/vulkan/attn_fwd_cm2.comp) on an
# NVIDIA GPU: workgroup-scope matrices, tensor-addressed loads and stores, head dim 128, each
# module standing in (FA_VULKAN_SPV_DIR) for the catalogue module of a tiling with as many rows
# a workgroup, timed against the shipped forward in the same process series.
#
#   bench/vk_cm2.sh prepare [DIR]     here: compiles the variants (BM,BN,invocations[,form])
#                                     into DIR (default .gpu/cm2)
#                                     with the glslang of tools/lavapipe-matrix.sh's prefix
#                                     (FA_LAVAPIPE_DIR, default ~/.cache/flashattn/
#                                     lavapipe-unstable), which knows GL_NV_cooperative_matrix2
#   bench/vk_cm2.sh run TOOL [DIR]    on the device (carry DIR): for each variant, three
#                                     `run --check` shapes (partial tiles, causal GQA, and that
#                                     with a softcap, ALiBi and a bias) and the N=16k row, with
#                                     FA_VULKAN_MATRIX2=1; the shipped module's
#                                     rows first (without and with the features enabled). The
#                                     debug line "VK_NV_cooperative_matrix2 ..." of the runs says
#                                     which shapes and workgroup sizes the driver takes; a
#                                     variant it refuses fails its checks.
set -eu
mode=${1:?usage: $0 prepare [DIR] | run TOOL [DIR]}
here=$(cd "$(dirname "$0")/.." && pwd)
# rows a workgroup -> the catalogue tiling (FA_VULKAN_MATRIX_FWD_TILES) and module it replaces
tiles_of() { case $1 in 128) echo 1,8,64 ;; 64) echo 1,4,32 ;; esac; }
module_of() {
    case $1 in
    128) echo cat_attn_fwd_cm_16x16x16_sg32x8_tm1_bn64_l8_2_1_3_a0x76543210_copy_biasearly_d128 ;;
    64) echo attn_fwd_cm_f16_s16 ;; # no catalogue tiling of 64 rows with a layout: the generic one
    esac
}
# BM,BN,invocations[,late: FA_CM2_LATE_SUM | ,narrow: FA_CM2_NARROW_STATS]
variants="128,64,128 128,64,256 128,32,128 128,32,256 64,64,128 64,32,128 128,64,128,late
    64,64,128,late 128,64,128,narrow 128,64,256,narrow 64,64,128,narrow"
if [ "$mode" = prepare ]; then
    dir=${2:-.gpu/cm2}
    cache=${FA_LAVAPIPE_DIR:-$HOME/.cache/flashattn/lavapipe-unstable}
    for v in $variants; do
        IFS=, read -r bm bn wg form <<<"$v"
        defs=()
        case ${form:-} in
        late) defs=(-DFA_CM2_LATE_SUM) ;;
        narrow) defs=(-DFA_CM2_NARROW_STATS) ;;
        esac
        mkdir -p "$dir/$v"
        sh "$here/tools/lavapipe-matrix.sh" run "$cache" "$cache/root/usr/bin/glslangValidator" \
            -V --target-env vulkan1.3 -DDTYPE_F16 -DSTORAGE16 -I"$here/shaders/vulkan" \
            -DFA_FIXED_D=128 -DFA_CM2_BM="$bm" -DFA_CM2_BN="$bn" -DFA_CM2_NARROW=16 \
            -DFA_CM2_WG="$wg" -DFA_CM2_TENSOR "${defs[@]}" \
            -o "$dir/$v/$(module_of "$bm").spv" "$here/shaders/vulkan/attn_fwd_cm2.comp" \
            >"$dir/glslang.log" 2>&1 || { cat "$dir/glslang.log"; exit 1; }
        echo "$v: $(module_of "$bm")"
    done
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare [DIR] | run TOOL [DIR]" >&2; exit 2; }
tool=${2:?tool}
dir=${3:-.gpu/cm2}
run() { # label, tiles ('' default), folder ('' none), args
    local n=$1 t=$2 d=$3 log
    shift 3
    log=$(env FA_VULKAN_MATRIX2="${M2:-1}" ${t:+FA_VULKAN_MATRIX_FWD_TILES=$t} \
        ${d:+FA_VULKAN_SPV_DIR=$d} FA_VULKAN_PIPELINE_STATS=1 timeout 90 "$tool" run \
        --backend vulkan --dtype f16 "$@" --log debug 2>&1) || true
    printf '%-28s %-24s %s ovr=%s %s\n' "$n" \
        "$(grep -m1 '^rate' <<<"$log" | awk '{print $2, $3}')" \
        "$(grep -m1 -o 'PASS\|FAIL' <<<"$log" || true)" "$(grep -c FA_VULKAN_SPV_DIR <<<"$log")" \
        "$(grep -m1 'attn_fwd_cm statistics' <<<"$log" |
            grep -o 'Register Count=[0-9]*\|Local Memory Size=[0-9]*' | tr '\n' ' ' || true)"
    grep -m1 'VK_NV_cooperative_matrix2' <<<"$log" >>"${note:-/dev/null}" || true
}
note=$(mktemp)
big=(--heads 16 --seq 16384 --head-dim 128 --warmup 150 --repeat 30)
M2=0 run "shipped, no matrix2" "" "" "${big[@]}"
run "shipped" "" "" "${big[@]}"
for v in $variants; do
    IFS=, read -r bm _ <<<"$v"
    t=$(tiles_of "$bm")
    run "check $v" "$t" "$PWD/$dir/$v" --heads 4 --seq 1000 --head-dim 128 --check
    run "check $v causal" "$t" "$PWD/$dir/$v" --heads 8 --kv-heads 2 --seq-q 700 --seq-k 1100 \
        --head-dim 128 --causal --check
    run "check $v variants" "$t" "$PWD/$dir/$v" --heads 8 --kv-heads 2 --seq-q 700 \
        --seq-k 1100 --head-dim 128 --causal --softcap 30 --alibi --bias --check
    run "cm2 $v" "$t" "$PWD/$dir/$v" "${big[@]}"
done
run "shipped" "" "" "${big[@]}"
sort -u "$note"
rm -f "$note"
