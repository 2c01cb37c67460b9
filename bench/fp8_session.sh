#!/bin/bash
# SPDX-License-Identifier: MIT
# The CUDA FP8 (e4m3) forward on a GPU machine, for a short device call: conformance's fp8 cases
# (--full), the quick matrix on CUDA (the f16/bf16 wgmma forward shares the kernel's source),
# compute-sanitizer memcheck and racecheck over the fp8 cases, `run --check` on larger shapes
# than conformance's (every variant, GQA, packed batches, 16k keys), then the forward bench at
# head dim 128 in e4m3 and f16, non-causal and causal. Logs go to $OUT (or ./fp8-session), a
# one-line result per step in summary.txt.
#
#   bench/fp8_session.sh BUILD_DIR
#
# BUILD_DIR holds `flashattn` and libflashattn.so; ./.gl as for bench/gpu_session.sh.
set -u
build=${1:?usage: bench/fp8_session.sh BUILD_DIR}
out=${OUT:-fp8-session}
# shellcheck source=bench/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
run_check() { # name, run options...
    local name=$1
    shift
    step "check_$name" 120 "$tool" run --backend cuda --dtype e4m3 --check --repeat 3 "$@"
}
{
    step devices 60 "$tool" devices
    step fp8_conf 120 "$tool" conformance --backend cuda --full --filter fp8 --verbose
    step cuda_quick 300 "$tool" conformance --backend cuda --quick
    step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$tool" conformance --backend cuda --full --filter fp8
    step racecheck 300 compute-sanitizer --tool racecheck --error-exitcode 9 \
        "$tool" conformance --backend cuda --full --filter fp8
    run_check plain --batch 2 --heads 16 --seq 4096 --head-dim 128
    run_check causal_gqa --batch 2 --heads 16 --kv-heads 4 --seq 4096 --head-dim 128 --causal
    run_check long --batch 1 --heads 8 --seq 16384 --head-dim 128
    run_check d64_cross --batch 3 --heads 8 --seq-q 1000 --seq-k 3000 --head-dim 64
    run_check variants --batch 2 --heads 8 --kv-heads 2 --seq 2048 --window 256,0 \
        --softcap 30 --alibi
    run_check bias --batch 1 --heads 8 --seq 1024 --bias
    run_check varlen --batch 5 --heads 8 --seq 700 --varlen --causal
    run_check decode --batch 4 --heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768
    for causal in no yes; do
        for dtype in e4m3 f16; do
            step "bench_${dtype}_causal_$causal" 120 "$tool" bench --backend cuda --dtype "$dtype" \
                --head-dim 128 --causal "$causal"
        done
    done
} | tee "$out/summary.txt"
