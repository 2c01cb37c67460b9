#!/bin/bash
# SPDX-License-Identifier: MIT
# The decoding paths on a GPU machine, for a short device call: conformance's decoding,
# split-key, per-sequence-length, paged and append cases on each GPU backend (Vulkan with both of
# its decoding modules, OpenCL with its decoding kernels forced on, since NVIDIA's driver has them
# off by default), then `bench --decode` rows at D=128 (B=1 and 16 at 32k keys, B=1 at 4k and 128k)
# on each. Logs go to $OUT (or ./decode-session), a one-line result per step in summary.txt.
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
    # the OpenCL decoding kernels crashed NVIDIA's driver once: last, and logged at debug level
    FA_OPENCL_DECODE=1 step cl_conf 90 "$tool" conformance --backend opencl --full \
        --filter "$cases" --verbose
    for sk in 32768 4096 131072; do
        step "cuda_$sk" 60 "$tool" bench --backend cuda --decode --head-dim 128 --seqlen "$sk"
        step "vk_$sk" 60 "$tool" bench --backend vulkan --decode --head-dim 128 --seqlen "$sk"
        FA_VULKAN_DECODE=sg32 step "vk_sg32_$sk" 60 "$tool" bench --backend vulkan --decode \
            --head-dim 128 --seqlen "$sk"
    done
    FA_OPENCL_DECODE=1 step cl_32768 60 "$tool" bench --backend opencl --decode --head-dim 128 \
        --seqlen 32768 --log debug
} | tee "$out/summary.txt"
