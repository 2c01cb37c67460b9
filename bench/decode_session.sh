#!/bin/bash
# SPDX-License-Identifier: MIT
# The decoding paths on a GPU machine, for a short device call: conformance's decoding,
# split-key, per-sequence-length, paged and append cases on each GPU backend (Vulkan with both of
# its decoding modules), then `bench --decode` rows at D=128 (B=1 at 4k, 32k and 128k keys, B=16
# at 32k, B=64 at 4k) on each, each row's bench in a process of its own (a later row of a Vulkan
# process often runs 3-5x slower, docs/PERF.md), Vulkan's with its GPU timestamps. Logs go to
# $OUT (or ./decode-session), a one-line result per step in summary.txt.
#
#   bench/decode_session.sh BUILD_DIR
#
# BUILD_DIR holds `flashattn` and libflashattn.so; ./.gl as for bench/gpu_session.sh.
set -u
build=${1:?usage: bench/decode_session.sh BUILD_DIR}
out=${OUT:-decode-session}
# shellcheck source=bench/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
cases='decode|splitkv|seqlens|paged|append'
{
    step cuda_conf 90 "$tool" conformance --backend cuda --full --filter "$cases"
    step vk_conf 90 "$tool" conformance --backend vulkan --full --filter "$cases"
    FA_VULKAN_DECODE=sg32 step vk_sg32_conf 90 "$tool" conformance --backend vulkan --full \
        --filter "$cases"
    # the OpenCL decoding kernels failed to build on NVIDIA's driver once: last, logged in full
    step cl_conf 90 "$tool" conformance --backend opencl --full \
        --filter "$cases" --verbose
    for row in "1 32768" "1 4096" "1 131072" "16 32768" "64 4096"; do
        set -- $row
        for be in cuda vulkan vulkan_sg32 opencl; do
            b=${be%_sg32}
            if [ "$be" = vulkan_sg32 ]; then export FA_VULKAN_DECODE=sg32; else unset FA_VULKAN_DECODE; fi
            # Vulkan: the GPU's own times per kernel and the idle time between submissions
            # (FA_VULKAN_PROFILE=1, logged at each synchronisation) beside the bench's rows
            log=""
            if [ "$b" = vulkan ]; then export FA_VULKAN_PROFILE=1 && log="--log info"; else unset FA_VULKAN_PROFILE; fi
            # shellcheck disable=SC2086
            step "${be}_$1_$2" 60 "$tool" bench --backend "$b" --decode --head-dim 128 \
                --batch "$1" --seqlen "$2" $log
        done
    done
    unset FA_VULKAN_DECODE FA_VULKAN_PROFILE
} | tee "$out/summary.txt"
