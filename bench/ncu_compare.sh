#!/bin/bash
# SPDX-License-Identifier: MIT
# Nsight Compute on this library's forward and on PyTorch's cuDNN forward at one shape, the third
# call of each profiled (after two warm-up calls): launch configuration, occupancy, speed of
# light, scheduler and warp-state statistics, memory and instruction mix, as text.
#
# usage: bench/ncu_compare.sh FLASHATTN B H N D [causal] [f16|bf16] >report.txt
# (FLASHATTN: the `flashattn` program; libflashattn.so beside it or on LD_LIBRARY_PATH)
set -u
if [ $# -lt 5 ]; then
    sed -n 3,8p "$0"
    exit 2
fi
tool=$1 b=$2 h=$3 n=$4 d=$5 causal=${6:-} dtype=${7:-f16}
c=0 flag=
[ "$causal" = causal ] && c=1 flag=--causal
here=$(dirname "$0")
sections=(--section LaunchStats --section Occupancy --section SpeedOfLight
    --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis
    --section ComputeWorkloadAnalysis --section InstructionStats)
echo "=== flashattn: B=$b H=$h N=$n D=$d $dtype $causal"
# shellcheck disable=SC2086
ncu "${sections[@]}" -k regex:'^fa_' --launch-skip 2 -c 1 "$tool" run --backend cuda \
    --dtype "$dtype" --batch "$b" --heads "$h" --seq "$n" --head-dim "$d" $flag --warmup 2 \
    --repeat 1
echo "=== cuDNN: B=$b H=$h N=$n D=$d $dtype $causal"
ncu "${sections[@]}" -k regex:'sdpa|fmha|attn|flash|cudnn' --launch-skip 2 -c 1 \
    python3 "$here/sdpa_once.py" "$b" "$h" "$n" "$d" "$c" 0 cudnn "$dtype"
