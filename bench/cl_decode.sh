#!/bin/bash
# SPDX-License-Identifier: MIT
# OpenCL's decoding kernels on a GPU (issue 13): the default (fa_decode, 128 work-items) against
# the experiment of 32 work-items (FA_OPENCL_DECODE=w32), first for correctness (conformance's
# decoding cases and `run --check` with each), then `bench --decode`'s grouped timing in turns,
# the w32 rows also with 256 chunks (the split's choice stops at 128 for B=1 Sk=32k). f16,
# GQA 32:8 and 8:8 (docs/PERF.md, fifty-first session).
#
#   bench/cl_decode.sh TOOL [ROUNDS]   (on the device: gpu_env.sh's set-up done; lines to stdout)
set -u
tool=${1:?usage: $0 TOOL [ROUNDS]}
rounds=${2:-2}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for form in default w32; do
    e=(FA_OPENCL_DECODE=)
    [ "$form" = w32 ] && e=(FA_OPENCL_DECODE=w32)
    env "${e[@]}" timeout 120 "$tool" conformance --backend opencl \
        --filter 'decode|splitkv|paged|append' </dev/null >"$log" 2>&1
    echo "conformance $form: $(tail -1 "$log")"
    env "${e[@]}" timeout 60 "$tool" run --backend opencl --dtype f16 --batch 3 --seq-q 4 \
        --seq-k 5000 --heads 32 --kv-heads 8 --head-dim 128 --causal --check </dev/null \
        >"$log" 2>&1
    echo "check $form (B=3 Sq=4 Sk=5000 causal): $(grep -o 'PASS\|FAIL' "$log" | head -1)"
done
rows=("--batch 1 --seqlen 32768 --head-dim 128" "--batch 1 --seqlen 131072 --head-dim 128"
    "--batch 64 --seqlen 4096 --head-dim 128" "--batch 1 --seqlen 32768 --head-dim 64")
for round in $(seq "$rounds"); do
    for r in "${rows[@]}"; do
        for form in default w32 w32s256; do
            e=(FA_OPENCL_DECODE=) extra=()
            [ "$form" != default ] && e=(FA_OPENCL_DECODE=w32)
            [ "$form" = w32s256 ] && extra=(--splits 256)
            # shellcheck disable=SC2086 # the row is words
            env "${e[@]}" timeout 60 "$tool" bench --decode --backend opencl $r "${extra[@]}" \
                </dev/null >"$log" 2>/dev/null
            echo "round $round $r $form: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+:' "$log" |
                tr -s ' ' | tr '\n' '|')"
        done
    done
done
