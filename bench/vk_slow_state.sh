#!/bin/bash
# SPDX-License-Identifier: MIT
# Vulkan's slow state (docs/PERF.md, "What to try next" item 7): a process that compiled its
# pipelines ran the decoding kernel 4x slower than one that loaded them from the pipeline cache
# (the answer, thirty-second session: the GPU's idle clock after the compile's idle second).
# Each probe is a process of its own with GPU timestamps (FA_VULKAN_PROFILE=1, one line a
# synchronisation), in a cache folder that is fresh (cold) or that an earlier probe filled
# (warm); the cases separate this library's pipeline cache, the driver's own disk cache, a
# pipeline built twice, and time. The forward's plain row is probed cold and warm as well.
#
#   bench/vk_slow_state.sh BUILD_DIR
#
# Logs in $OUT/l (or ./vk-slow-state), one line per probe in summary.txt: the median call time
# and the kernel's mean GPU time over the first and last ten synchronisations.
set -u
# shellcheck disable=SC2034 # build: read by gpu_env.sh
build=${1:?usage: bench/vk_slow_state.sh BUILD_DIR}
out=${OUT:-vk-slow-state}/l
export XDG_CACHE_HOME=/tmp/slow-unused # each probe names its own
# shellcheck source=bench/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
S=$(dirname "$out")/summary.txt
decode=(--backend vulkan --batch 1 --heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768
    --head-dim 128 --dtype f16)
forward=(--backend vulkan --batch 1 --heads 16 --seq 16384 --head-dim 128 --dtype f16)

# probe NAME CACHE_DIR [VAR=VALUE...] -- flashattn run arguments
probe() {
    local name=$1 dir=$2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    mkdir -p "$dir"
    env XDG_CACHE_HOME="$dir" FA_VULKAN_PROFILE=1 "${envs[@]}" timeout 120 "$tool" run "$@" \
        --log info >"$out/$name.txt" 2>&1
    local rc=$?
    local gpu first last
    gpu=$(grep -o 'attn_[a-z_0-9]* [0-9.]* us' "$out/$name.txt" | awk '{print $2}')
    first=$(echo "$gpu" | head -10 | awk '{s+=$1} END {if (NR) printf "%.1f", s/NR}')
    last=$(echo "$gpu" | tail -10 | awk '{s+=$1} END {if (NR) printf "%.1f", s/NR}')
    printf '%-26s rc=%d %-34s gpu first10 %8s us last10 %8s us (%d syncs)\n' "$name" "$rc" \
        "$(grep -m1 -o 'median [^,]*\|time[^,]*ms' "$out/$name.txt" | head -1)" "$first" "$last" \
        "$(echo "$gpu" | grep -c .)" >>"$S"
}

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >>"$S"
r=(--warmup 20 --repeat 200)
probe dec_cold /tmp/c1 -- "${decode[@]}" "${r[@]}"
probe dec_warm /tmp/c1 -- "${decode[@]}" "${r[@]}"
probe dec_warm2 /tmp/c1 -- "${decode[@]}" "${r[@]}"
ls -R /tmp/c1 >"$out/c1_files.txt" 2>&1
# the driver's disk cache off
probe dec_cold_nodrv /tmp/c2 __GL_SHADER_DISK_CACHE=0 -- "${decode[@]}" "${r[@]}"
probe dec_warm_nodrv /tmp/c2 __GL_SHADER_DISK_CACHE=0 -- "${decode[@]}" "${r[@]}"
# the driver's disk cache only: this library's file removed after a cold run
probe dec_cold3 /tmp/c3 -- "${decode[@]}" "${r[@]}"
rm -rf /tmp/c3/flashattn
probe dec_drv_only /tmp/c3 -- "${decode[@]}" "${r[@]}"
# no VkPipelineCache at all, twice (the second with the driver's disk cache warm)
probe dec_nocache /tmp/c4 FA_VULKAN_PIPELINE_CACHE=0 -- "${decode[@]}" "${r[@]}"
probe dec_nocache2 /tmp/c4 FA_VULKAN_PIPELINE_CACHE=0 -- "${decode[@]}" "${r[@]}"
# each pipeline built twice, the second from the cache the first filled
probe dec_rebuild /tmp/c5 FA_VULKAN_PIPELINE_CACHE=rebuild -- "${decode[@]}" "${r[@]}"
# the driver's statistics (registers, shared memory, spills) of the pipeline compiled and loaded
probe dec_stats_cold /tmp/c9 FA_VULKAN_PIPELINE_STATS=1 -- "${decode[@]}" "${r[@]}"
probe dec_stats_warm /tmp/c9 FA_VULKAN_PIPELINE_STATS=1 -- "${decode[@]}" "${r[@]}"
# time: a long cold process (1000 + 1000 calls)
probe dec_cold_long /tmp/c6 -- "${decode[@]}" --warmup 1000 --repeat 1000
# the sleeping fence wait alone, warm (the default polls 200 us first: the wake-up's cost)
probe dec_warm_sleep /tmp/c1 FA_VULKAN_WAIT_SPIN_US=0 -- "${decode[@]}" "${r[@]}"
# the forward's plain row
probe fwd_cold /tmp/c7 -- "${forward[@]}" --warmup 3 --repeat 20
probe fwd_warm /tmp/c7 -- "${forward[@]}" --warmup 3 --repeat 20
probe fwd_rebuild /tmp/c8 FA_VULKAN_PIPELINE_CACHE=rebuild -- "${forward[@]}" --warmup 3 \
    --repeat 20
cat "$S"
