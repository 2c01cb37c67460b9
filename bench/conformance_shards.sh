#!/bin/bash
# SPDX-License-Identifier: MIT
# The conformance matrix split over N processes on one machine (`conformance --shard I/N`), so
# that the float64 reference, the data generation and the program builds use every core while
# the GPU runs each shard's cases in turn. Each shard writes OUTDIR/shard-I.{md,log}; the last
# line sums them as 'N passed, N failed, N skipped'. Exit status 0 when no shard failed.
# SHARD_TIMEOUT=SECONDS stops each shard after that long (its cases so far stay in its .progress).
#
#   bench/conformance_shards.sh TOOL N OUTDIR [conformance options...]
#   e.g. bench/conformance_shards.sh build/flashattn 12 out --full --backend cuda,opencl
set -u
tool=${1:?usage: conformance_shards.sh TOOL N OUTDIR [options...]}
n=${2:?usage: conformance_shards.sh TOOL N OUTDIR [options...]}
dir=${3:?usage: conformance_shards.sh TOOL N OUTDIR [options...]}
shift 3
mkdir -p "$dir"
pids=()
for ((i = 0; i < n; i++)); do
    timeout "${SHARD_TIMEOUT:-0}" "$tool" conformance --shard "$i/$n" --report "$dir/shard-$i.md" "$@" \
        >"$dir/shard-$i.log" 2>"$dir/shard-$i.progress" &
    pids+=($!)
done
status=0
for ((i = 0; i < n; i++)); do
    wait "${pids[$i]}"
    rc=$?
    [ $rc -ne 0 ] && status=1
    echo "shard $i/$n: exit $rc: $(tail -1 "$dir/shard-$i.log")"
done
# A finished shard's last line reads 'N passed, N failed, N skipped'.
for ((i = 0; i < n; i++)); do tail -1 "$dir/shard-$i.log"; done |
    awk '/ passed, .* failed, .* skipped$/ { p += $1; f += $3; s += $5; k++ }
         END { printf "%d of '"$n"' shards finished: %d passed, %d failed, %d skipped\n", k, p, f, s }'
exit $status
