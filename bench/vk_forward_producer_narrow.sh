#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan forward's producer form in workgroups of at most 8 warps (issue 12; docs/PERF.md,
# fifty-third session). On NVIDIA a workgroup's warps are dealt over the SM's four sub-partitions,
# each with a quarter of the registers, so the 9-warp workgroup of 8 computing subgroups and a
# producer got 168 registers a lane (3 warps x 32 lanes x 168 <= 16,384) and spilled. Here: 7 and
# 6 computing subgroups with one producer (8 and 7 warps: up to 255 registers), as catalogue
# tilings of a library built with them (after the shipped rows, so nothing else changes), chosen
# with FA_VULKAN_MATRIX_FWD_TILES.
#
# Here:   bench/vk_forward_producer_narrow.sh build DIR    (a build without CUDA, with the
#                                                          cooperative-matrix glslang on PATH)
# On the device (gpu_env.sh's set-up done, DIR's flashattn and library carried):
#         bench/vk_forward_producer_narrow.sh run TOOL
set -u
mode=${1:?usage: $0 build DIR | run TOOL}
tilings="1,7,64 1,6,64"
if [ "$mode" = build ]; then
    dir=${2:?build folder}
    set -e
    shipped=$(bash "$(dirname "$0")/vk_forward_floors.sh" tilings)
    extra="fwd: 16 16 16 32 7 1 64 8 2 1 3 0x76543210 128-128 producer bias-early"
    extra="$extra;fwd: 16 16 16 32 6 1 64 8 2 1 3 0x76543210 128-128 producer bias-early"
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_WITH_CUDA=OFF \
        -DFA_BUILD_TESTS=OFF -DFA_BUILD_EXAMPLES=OFF "-DFA_VK_CM_TILINGS=$shipped;$extra" >/dev/null
    ninja -C "$dir" flashattn >/dev/null
    echo "built $dir/flashattn"
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 build DIR | run TOOL" >&2; exit 2; }
tool=${2:?tool}
row() { # tiles ('' for the default), run arguments: rate, check, registers, module
    local t=$1
    shift
    env ${t:+FA_VULKAN_MATRIX_FWD_TILES=$t} FA_VULKAN_PIPELINE_STATS=1 timeout 40 "$tool" run \
        --backend vulkan --dtype f16 --head-dim 128 "$@" --log debug 2>&1 |
        grep -E '^rate|^check|Register Count|built attn_fwd_cm ' | sed 's/.*module //' |
        grep -o -E 'rate +[0-9.]+|PASS|FAIL|Register Count=[0-9]+|^cat_[a-z0-9_]+' | tr '\n' ' '
    echo
}
for t in $tilings; do # a hang here would hang every row: checks first, briefly
    echo "check $t causal GQA: $(row "$t" --heads 8 --kv-heads 2 --seq-q 700 --seq-k 1100 \
        --causal --check)"
    echo "check $t bias: $(row "$t" --batch 2 --heads 4 --seq 300 --bias --check)"
    echo "check $t f16 bias: $(row "$t" --batch 2 --heads 4 --seq 256 --bias --bias-dtype f16 \
        --check)"
done
for i in 1 2; do
    for shape in "--heads 16 --seq 16384" "--heads 16 --seq 16384 --causal" \
        "--batch 32 --heads 16 --seq 512"; do
        for t in "" $tilings; do
            # shellcheck disable=SC2086 # the shape is words
            echo "round $i ${t:-shipped} $shape: $(row "$t" $shape --warmup 150 --repeat 30)"
        done
    done
done
