#!/bin/bash
# The conformance matrix split over N processes on one machine (`conformance --shard I/N`), so
# that the float64 reference, the data generation and the program builds use every core while
# the GPU runs each shard's cases in turn. Each shard writes OUTDIR/shard-I.{md,log}; the last
# line sums them as 'N passed, N failed, N skipped'. Exit status 0 when no shard failed.
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
    "$tool" conformance --shard "$i/$n" --report "$dir/shard-$i.md" "$@" \
        >"$dir/shard-$i.log" 2>"$dir/shard-$i.progress" &
    pids+=($!)
done
status=0
for ((i = 0; i < n; i++)); do
    wait "${pids[$i]}" || status=1
    echo "shard $i/$n: $(tail -1 "$dir/shard-$i.log")"
done
# Each shard's last line reads 'N passed, N failed, N skipped'.
awk '{ p += $1; f += $3; s += $5 } END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' \
    < <(for ((i = 0; i < n; i++)); do tail -1 "$dir/shard-$i.log"; done)
exit $status
