#!/bin/bash
# SPDX-License-Identifier: MIT
# One pass over the GPU backends on a GPU machine, for a session with little device time:
# devices, conformance on each GPU backend's GPU device, CUDA under compute-sanitizer, the bench
# on each GPU backend, and PyTorch SDPA on the same grid. Logs go to $OUT (or ./gpu-session).
#
#   bench/gpu_session.sh BUILD_DIR [--quick|--full]
#
# BUILD_DIR holds the `flashattn` tool and libflashattn.so (built here or carried). Debian
# packages of the Vulkan and OpenCL loaders (and libglvnd, which NVIDIA's Vulkan driver needs),
# if present in ./.gl, are unpacked first; the NVIDIA OpenCL ICD is registered.
#
# With --full the matrix runs on every GPU backend at once, split over all cores
# (bench/conformance_shards.sh: ~7.5 min on the 16-core H200 machine). FA_CONFORMANCE_FILTER
# (e.g. 'fwd f16 d|bwd f16 d') limits the conformance cases. The program caches (OpenCL binaries, the Vulkan
# pipeline cache) are written to $OUT/fa-cache.tar; carried back as ./fa-cache.tar, they spare
# the next call its program builds (most of a cold --full run on OpenCL).
set -u
build=${1:?usage: bench/gpu_session.sh BUILD_DIR [--quick|--full]}
mode=${2:---quick}
out=${OUT:-gpu-session}
# shellcheck source=bench/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
[ -f fa-cache.tar ] && tar -xf fa-cache.tar -C "$XDG_CACHE_HOME"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >"$out/gpu.txt" 2>&1
step devices 60 "$tool" devices
if [ "$mode" = --full ]; then # every core: whole program groups per process, one reference
    SHARD_TIMEOUT=540 step conformance_full 560 bench/conformance_shards.sh "$tool" "$(nproc)" \
        "$out/full" --full --backend cuda,vulkan,opencl \
        ${FA_CONFORMANCE_FILTER:+--filter "$FA_CONFORMANCE_FILTER"}
else
    for backend in cuda vulkan opencl; do
        step "conformance_$backend" 300 "$tool" conformance --backend "$backend" "$mode" \
            ${FA_CONFORMANCE_FILTER:+--filter "$FA_CONFORMANCE_FILTER"} \
            --report "$out/conformance_$backend.md"
    done
fi
# the whole quick matrix: ~15 s under memcheck, ~260 s under racecheck on the H200
step sanitizer_memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$tool" conformance --backend cuda --quick
step sanitizer_racecheck 330 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$tool" conformance --backend cuda --quick
for backend in cuda vulkan opencl; do
    step "bench_$backend" 200 "$tool" bench --backend "$backend" --quick \
        --csv "$out/bench_$backend.csv"
done
step torch 240 python3 bench/compare_torch.py --quick --lib "$build/libflashattn.so" \
    --json "$out/torch.json" --png "$out/torch.png"
tar -cf "$out/fa-cache.tar" -C "$XDG_CACHE_HOME" flashattn 2>/dev/null
