#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan decoding forward on cooperative matrices (attn_decode_cm, the default for f16 where
# the catalogue has the device's layout) against the scalar modules (FA_VULKAN_DECODE=scalar),
# in turns, ROUNDS times: GB/s of K and V end to end (`flashattn run`, its own warm-up, so that
# the GPU's clock has risen), then the split kernel's GPU time (FA_VULKAN_PROFILE=1) at B=1
# Sk=32k. GQA 32:8, one query token, f16 (docs/PERF.md, fiftieth session).
#
#   bench/vk_decode_matrix.sh TOOL [ROUNDS]   (on the device: gpu_env.sh's set-up done)
# Rows with B x Sk of 512k keys spend most of a minute generating their inputs on the host.
set -u
tool=${1:?usage: $0 TOOL [ROUNDS]}
rounds=${2:-2}
vk=(--backend vulkan --seq-q 1 --heads 32 --kv-heads 8 --dtype f16)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rows=("128 --seq-k 32768" "128 --seq-k 131072" "128 --batch 64 --seq-k 4096"
    "128 --batch 16 --seq-k 32768" "128 --seq-k 4096" "64 --seq-k 32768"
    "64 --batch 16 --seq-k 32768")
timeout 60 "$tool" run "${vk[@]}" --head-dim 128 --seq-k 32768 --repeat 200 </dev/null \
    >/dev/null 2>&1
for round in $(seq "$rounds"); do
    for r in "${rows[@]}"; do
        for form in scalar matrix; do
            e=(FA_VULKAN_DECODE=)
            [ "$form" = scalar ] && e=(FA_VULKAN_DECODE=scalar)
            # shellcheck disable=SC2086 # the row is words
            env "${e[@]}" timeout 120 "$tool" run "${vk[@]}" --head-dim $r --repeat 30 \
                </dev/null >"$log" 2>&1
            echo "round $round D=$r $form: $(grep -o '[0-9.]* GB/s' "$log" | head -1)"
        done
    done
done
for form in scalar matrix; do
    e=(FA_VULKAN_PROFILE=1 FA_VULKAN_DECODE=)
    [ "$form" = scalar ] && e=(FA_VULKAN_PROFILE=1 FA_VULKAN_DECODE=scalar)
    env "${e[@]}" timeout 60 "$tool" run "${vk[@]}" --head-dim 128 --seq-k 32768 --repeat 30 \
        --log info </dev/null >"$log" 2>&1
    echo "profile B=1 Sk=32k $form: $(grep -o '[0-9.]* GB/s' "$log" | head -1)" \
        "$(grep 'vulkan profile' "$log" | tail -1 | grep -o 'attn_decode[a-z_]* [0-9.]* us')"
done
