#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan matrix forward's producer form (attn_fwd_cm.comp, FA_CM_PRODUCERS: subgroups of their
# own copy K and V, no barrier in the key loop) against the shipped modules on NVIDIA's driver
# (issue 12; docs/PERF.md, fifty-second session). Each variant is a module loaded through
# FA_VULKAN_SPV_DIR over the catalogue module of its tiling and head dim
# (bench/vk_forward_floors.sh writes them), forced with FA_VULKAN_MATRIX_FWD_TILES.
#
# Here (the cooperative-matrix glslang of tools/install-deps.sh; BUILD is a build whose catalogue
# names the modules):   bench/vk_forward_producer.sh prepare BUILD       -> .gpu/prod/VARIANT/
# On the device (carry .gpu; gpu_env.sh's set-up done):  bench/vk_forward_producer.sh run TOOL
# Variants: p1_64 (one producer, 64-key steps, head dim 128: the shipped tiling), p2_64 (two
# producers), p1_32 (32-key steps), p1_64_d64 (head dim 64) and p1_32_d256 (head dim 256, its
# shipped tiling). Each must pass `run --check` (a deadlock shows as a timeout) before its rows.
set -u
root=.gpu/prod
mode=${1:?usage: $0 prepare BUILD | run TOOL}
variants="p1_64:1:1,8,64:128:-DFA_CM_BIAS_EARLY p2_64:2:1,8,64:128:-DFA_CM_BIAS_EARLY
p1_32:1:1,8,32:128: p1_64_d64:1:1,8,64:64: p1_32_d256:1:1,8,32:256:-DFA_CM_BIAS_EARLY"
if [ "$mode" = prepare ]; then
    build=${2:?build folder}
    set -e
    rm -rf "$root"
    for v in $variants; do
        IFS=: read -r name producers tiling hd defs <<<"$v"
        FA_FLOORS_D=$hd FA_FLOORS_DIR=$root/$name FA_FLOORS_KINDS=full \
            FA_FLOORS_DEFINES="-DFA_CM_PRODUCERS=$producers $defs" \
            bash "$(dirname "$0")/vk_forward_floors.sh" prepare "$build" "$tiling" |
            sed "s/^/$name /"
    done
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare BUILD | run TOOL" >&2; exit 2; }
tool=${2:?tool}
t0=$SECONDS
dir_of() { ls -d "$PWD/$root/$1/full/"*/; }
chk() { # variant head-dim args...
    local v=$1 hd=$2 d t r
    shift 2
    d=$(dir_of "$v") t=$(basename "$(dir_of "$v")")
    r=$(FA_VULKAN_MATRIX_FWD_TILES=$t FA_VULKAN_SPV_DIR=$d timeout 40 "$tool" run \
        --backend vulkan --dtype f16 --head-dim "$hd" --check "$@" 2>&1 |
        grep -m1 -o 'PASS\|FAIL' || echo none-or-timeout)
    echo "check $v d=$hd $*: $r"
}
row() { # label variant ('' for the shipped module) head-dim args...
    local n=$1 v=$2 hd=$3 t='' d='' log
    shift 3
    [ -n "$v" ] && d=$(dir_of "$v") t=$(basename "$(dir_of "$v")")
    log=$(env ${t:+FA_VULKAN_MATRIX_FWD_TILES=$t} ${d:+FA_VULKAN_SPV_DIR=$d} \
        FA_VULKAN_PIPELINE_STATS=1 timeout 60 "$tool" run --backend vulkan --dtype f16 \
        --head-dim "$hd" "$@" --warmup 150 --repeat 30 --log info 2>&1) || true
    printf '%-44s %-22s ovr=%s %s\n' "$n" "$(grep -m1 '^rate' <<<"$log" | awk '{print $2, $3}')" \
        "$(grep -c FA_VULKAN_SPV_DIR <<<"$log")" \
        "$(grep 'attn_fwd_cm statistics' <<<"$log" | grep -m1 -o 'Register Count=[0-9]*')"
}
for v in p1_64 p2_64 p1_32; do
    chk "$v" 128 --heads 4 --seq 1000
    chk "$v" 128 --heads 8 --kv-heads 2 --seq-q 700 --seq-k 1100 --causal
    chk "$v" 128 --batch 3 --heads 4 --seq 513 --window 100,20 --softcap 30 --alibi
    chk "$v" 128 --batch 2 --heads 4 --seq 300 --bias
    chk "$v" 128 --batch 2 --heads 16 --seq 4096
done
chk p1_64_d64 64 --heads 8 --kv-heads 2 --seq-q 700 --seq-k 1100 --causal
chk p1_64_d64 64 --batch 2 --heads 16 --seq 4096
chk p1_32_d256 256 --heads 8 --kv-heads 2 --seq-q 700 --seq-k 1100 --causal
chk p1_32_d256 256 --batch 2 --heads 8 --seq 2048
echo "conformance p1_64 fwd f16 d=128: $(FA_VULKAN_MATRIX_FWD_TILES=1,8,64 \
    FA_VULKAN_SPV_DIR=$(dir_of p1_64) timeout 100 "$tool" conformance --backend vulkan \
    --filter 'fwd f16 d=128' </dev/null 2>&1 | tail -1)"
echo "checks done at $((SECONDS - t0)) s"
for round in 1 2; do
    for sh in "--heads 16 --seq 16384" "--heads 16 --seq 16384 --causal" \
        "--batch 8 --heads 16 --seq 2048" "--batch 32 --heads 16 --seq 512"; do
        for v in "" p1_64 p2_64 p1_32; do
            # shellcheck disable=SC2086 # the shape is words
            row "${v:-shipped} d=128 r$round $sh" "$v" 128 $sh
        done
    done
    for v in "" p1_64_d64; do
        row "${v:-shipped} d=64 r$round H=32 N=16k" "$v" 64 --heads 32 --seq 16384
    done
    for v in "" p1_32_d256; do
        row "${v:-shipped} d=256 r$round B=2 H=8 N=8k" "$v" 256 --batch 2 --heads 8 --seq 8192
    done
    echo "round $round done at $((SECONDS - t0)) s"
    [ $((SECONDS - t0)) -gt 330 ] && break
done
