#!/bin/bash
# SPDX-License-Identifier: MIT
# Where a forward's instructions go: Nsight Compute's per-instruction counts of this library's
# forward at one shape (the third call, after two warm-up calls), summed by opcode with the
# hottest instructions (bench/sass_counts.py), and the per-opcode counts of PyTorch's cuDNN
# forward at the same shape, for comparison.
#
# usage: bench/ncu_instructions.sh FLASHATTN OUTDIR B H N D [causal] [f16|bf16]
# (FLASHATTN: the `flashattn` program; libflashattn.so beside it or on LD_LIBRARY_PATH).
# Writes OUTDIR/flashattn.csv (the source page), OUTDIR/flashattn.txt (by opcode) and
# OUTDIR/cudnn.txt.
set -u
if [ $# -lt 6 ]; then
    sed -n 3,11p "$0"
    exit 2
fi
tool=$1 dir=$2 b=$3 h=$4 n=$5 d=$6 causal=${7:-} dtype=${8:-f16}
c=0 flag=
[ "$causal" = causal ] && c=1 flag=--causal
here=$(dirname "$0")
mkdir -p "$dir"
# shellcheck disable=SC2086
ncu --section SourceCounters --section InstructionStats -k regex:'^fa_' --launch-skip 2 -c 1 \
    -f -o "$dir/flashattn" "$tool" run --backend cuda --dtype "$dtype" --batch "$b" \
    --heads "$h" --seq "$n" --head-dim "$d" $flag --warmup 2 --repeat 1 </dev/null \
    >"$dir/flashattn.log" 2>&1 || { tail -5 "$dir/flashattn.log"; exit 1; }
ncu -i "$dir/flashattn.ncu-rep" --page source --csv --print-source sass >"$dir/flashattn.csv" ||
    exit 1
python3 "$here/sass_counts.py" "$dir/flashattn.csv" >"$dir/flashattn.txt" || exit 1
ncu --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum \
    --print-metric-instances details -k regex:'sdpa|fmha|attn|flash|cudnn' --launch-skip 2 -c 1 \
    python3 "$here/sdpa_once.py" "$b" "$h" "$n" "$d" "$c" 0 cudnn "$dtype" >"$dir/cudnn.txt" 2>&1
head -20 "$dir/flashattn.txt"
