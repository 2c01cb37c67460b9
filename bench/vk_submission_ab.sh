#!/bin/sh
# SPDX-License-Identifier: MIT
# The Vulkan backend's short calls with one submission in flight against four
# (FA_VULKAN_IN_FLIGHT), each with a sleeping fence wait and with polling (FA_VULKAN_WAIT_SPIN_US),
# alternated within one run, with the GPU's clocks read before each row where nvidia-smi exists.
# Rows of sub-millisecond calls (decoding at B=1, the N=512 forward) moved up to 3x between
# device calls on the H200 while long rows did not (docs/PERF.md, twentieth session); this
# separates the submission path from the machine.
#
#   bench/vk_submission_ab.sh TOOL [ROUNDS]     TOOL: the flashattn CLI; ROUNDS: default 2
#
# One line per row: round, in-flight, spin (us), the clocks, then the bench rows (ms, GB/s or
# TFLOP/s).
set -eu
tool=$1
rounds=${2:-2}
clocks() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu \
            --format=csv,noheader | tr -d ' ' | tr '\n' ' '
    else
        echo "(no nvidia-smi)"
    fi
}
rows() { grep -E '^ +[0-9]+ +[0-9]+ ' | tr -s ' ' | tr '\n' ';'; }
round=1
while [ "$round" -le "$rounds" ]; do
    for flight in 1 4; do
        for spin in 0 200; do
            c=$(clocks)
            d=$(FA_VULKAN_IN_FLIGHT=$flight FA_VULKAN_WAIT_SPIN_US=$spin "$tool" bench \
                --backend vulkan --decode --head-dim 128 --batch 1 2>&1 | rows)
            t=$(FA_VULKAN_IN_FLIGHT=$flight FA_VULKAN_WAIT_SPIN_US=$spin "$tool" bench \
                --backend vulkan --seqlen 512 --head-dim 128 --causal no 2>&1 | rows)
            echo "round $round in-flight $flight spin $spin | $c| decode B=1: $d | N=512: $t"
        done
    done
    round=$((round + 1))
done
