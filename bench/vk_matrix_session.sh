#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan backend's cooperative-matrix path on a GPU machine, in one device call: devices,
# conformance (--quick under the validation layer, then the f16 and bf16 cases of --full: the
# filter 'f16' matches both), the driver's pipeline statistics (registers, spills), the bench
# grid on Vulkan (matrix and scalar) and CUDA, and a sweep of tilings (FA_VULKAN_MATRIX_*_TILES).
# Logs go to a folder packed into $OUT/vk-session.tgz at the end (a device call brings back few
# files).
#
#   bench/vk_matrix_session.sh BUILD_DIR [conformance|bench|all|probe] [TILES...]
#
# probe: a short call for one kernel change: devices, the pipeline statistics, conformance
# --quick's f16 cases, and D=128 N=16k (and N=512) with the probed layout, without it
# (FA_VULKAN_MATRIX_LAYOUT=0), with its row form only (=rows: no register conversion of P and
# dS), with each TILES and with the modules of each folder in SPV_DIRS
# (FA_VULKAN_SPV_DIR: shader variants built beside the library), beside CUDA's.
#
# BUILD_DIR holds `flashattn` and libflashattn.so; bench/gpu_env.sh sets up the drivers.
set -u
build=${1:?usage: bench/vk_matrix_session.sh BUILD_DIR [conformance|bench|all] [TILES...]}
what=${2:-all}
shift $(($# > 2 ? 2 : $#))
out=/tmp/vk-session
# shellcheck source=bench/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"

step devices 60 "$tool" devices
if [ "$what" = probe ]; then
    row=(bench --backend vulkan --seqlen 16384 --head-dim 128 --causal no)
    step stats 120 env FA_VULKAN_PIPELINE_STATS=1 "$tool" bench --backend vulkan --seqlen 2048 \
        --head-dim 128 --causal no --log debug
    [ -n "${SKIP_CONF:-}" ] || step conf_quick_f16 200 "$tool" conformance --backend vulkan --quick --filter f16 \
        --report "$out/conf_quick_f16.md"
    step n16k 90 "$tool" "${row[@]}"
    step n16k_no_layout 90 env FA_VULKAN_MATRIX_LAYOUT=0 "$tool" "${row[@]}"
    step n16k_rows_only 90 env FA_VULKAN_MATRIX_LAYOUT=rows "$tool" "${row[@]}"
    for tiles in "$@"; do
        step "n16k_$tiles" 90 env FA_VULKAN_MATRIX_FWD_TILES="$tiles" \
            FA_VULKAN_MATRIX_BWD_TILES="$tiles" "$tool" "${row[@]}"
    done
    for dir in ${SPV_DIRS:-}; do
        step "n16k_spv_$(basename "$dir")" 90 env FA_VULKAN_SPV_DIR="$dir" "$tool" "${row[@]}"
    done
    for tiles in default "$@"; do
        step "n512_$tiles" 60 env FA_VULKAN_MATRIX_FWD_TILES="${tiles#default}" \
            FA_VULKAN_MATRIX_BWD_TILES="${tiles#default}" "$tool" bench --backend vulkan \
            --seqlen 512 --head-dim 128 --causal no --repeat 100
    done
    step n16k_cuda 60 "$tool" bench --backend cuda --seqlen 16384 --head-dim 128 --causal no
    tar -czf "${OUT:-.}/vk-session.tgz" -C "$out" .
    exit 0
fi
step conf_quick_validation 240 env FA_VULKAN_VALIDATION=1 "$tool" conformance \
    --backend vulkan --quick --report "$out/conf_quick.md"
if [ "$what" != bench ]; then
    SHARD_TIMEOUT=300 step conf_full_f16 320 bench/conformance_shards.sh "$tool" "$(nproc)" \
        "$out/full_f16" --full --backend vulkan --filter 'f16'
fi
if [ "$what" != conformance ]; then
    step stats 120 env FA_VULKAN_PIPELINE_STATS=1 "$tool" bench --backend vulkan --seqlen 2048 \
        --head-dim 128 --log debug
    step bench_vulkan 300 "$tool" bench --backend vulkan --csv "$out/bench_vulkan.csv"
    step bench_vulkan_scalar 200 env FA_VULKAN_MATRIX=0 "$tool" bench --backend vulkan --quick \
        --csv "$out/bench_vulkan_scalar.csv"
    step bench_cuda 200 "$tool" bench --backend cuda --csv "$out/bench_cuda.csv"
    for tiles in "$@"; do
        step "sweep_$tiles" 120 env FA_VULKAN_MATRIX_FWD_TILES="$tiles" \
            FA_VULKAN_MATRIX_BWD_TILES="$tiles" "$tool" bench --backend vulkan --seqlen 16384 \
            --head-dim 128 --causal no
    done
fi
tar -czf "${OUT:-.}/vk-session.tgz" -C "$out" .
