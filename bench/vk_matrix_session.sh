#!/bin/bash
# The Vulkan backend's cooperative-matrix path on a GPU machine, in one device call: devices,
# conformance (--quick under the validation layer, then the f16 and bf16 cases of --full: the
# filter 'f16' matches both), the driver's pipeline statistics (registers, spills), the bench
# grid on Vulkan (matrix and scalar) and CUDA, and a sweep of tilings (FA_VULKAN_MATRIX_*_TILES).
# Logs go to a folder packed into $OUT/vk-session.tgz at the end (a device call brings back few
# files).
#
#   bench/vk_matrix_session.sh BUILD_DIR [conformance|bench|all] [TILES...]
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
