#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan matrix forward's producer form (attn_fwd_cm.comp, FA_CM_PRODUCERS: subgroups of their
# own copy K and V, no barrier in the key loop) against the shipped modules on NVIDIA's driver
# (issue 12; docs/PERF.md, fifty-second session), through bench/vk_forward_floors.sh: each variant
# a whole forward (kind full-VARIANT) over the catalogue module of its tiling, head dim by head dim.
#
# Here (the cooperative-matrix glslang of tools/install-deps.sh; BUILD is a build whose catalogue
# names the modules):   bench/vk_forward_producer.sh prepare BUILD       -> .gpu/prod/dHD/
# On the device (carry .gpu; gpu_env.sh's set-up done):  bench/vk_forward_producer.sh run TOOL
# Variants: p1_64 (one producer, 64-key steps, head dim 128: the shipped tiling), p2_64 (two
# producers), p1_32 (32-key steps), p1_64 at head dim 64 and p1_32 at 256 (their shipped tilings).
# Each must pass vk_forward_floors.sh's checks (a timeout there would be a deadlock) before its
# rows; p1_64 at 128 also conformance's f16 head-dim-128 forward cases.
set -u
root=.gpu/prod
mode=${1:?usage: $0 prepare BUILD | run TOOL}
floors=$(dirname "$0")/vk_forward_floors.sh
# name:producers:tiling:head dim:more defines (bias-early where the shipped module has it)
variants="p1_64:1:1,8,64:128:-DFA_CM_BIAS_EARLY p2_64:2:1,8,64:128:-DFA_CM_BIAS_EARLY
p1_32:1:1,8,32:128: p1_64:1:1,8,64:64: p1_32:1:1,8,32:256:-DFA_CM_BIAS_EARLY"
if [ "$mode" = prepare ]; then
    build=${2:?build folder}
    set -e
    rm -rf "$root"
    for v in $variants; do
        IFS=: read -r name producers tiling hd defs <<<"$v"
        FA_FLOORS_D=$hd FA_FLOORS_DIR=$root/d$hd FA_FLOORS_KINDS=full-$name \
            FA_FLOORS_DEFINES="-DFA_CM_PRODUCERS=$producers $defs" \
            bash "$floors" prepare "$build" "$tiling" | sed "s/^/d$hd $name /"
    done
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare BUILD | run TOOL" >&2; exit 2; }
tool=${2:?tool}
d=$(ls -d "$PWD/$root/d128/full-p1_64/"*/)
# One check first, briefly: a producer form that hangs would hang in every variant and row.
first=$(FA_VULKAN_MATRIX_FWD_TILES=$(basename "$d") FA_VULKAN_SPV_DIR=$d timeout 45 "$tool" run \
    --backend vulkan --dtype f16 --head-dim 128 --check --heads 4 --seq 1000 2>&1 |
    grep -m1 -o 'PASS\|FAIL' || echo none-or-timeout)
echo "first check p1_64: $first"
[ "$first" = PASS ] || exit 1
export FA_FLOORS_CHECK_S=30
echo "conformance p1_64 fwd f16 d=128: $(FA_VULKAN_MATRIX_FWD_TILES=$(basename "$d") \
    FA_VULKAN_SPV_DIR=$d timeout 100 "$tool" conformance --backend vulkan \
    --filter 'fwd f16 d=128' </dev/null 2>&1 | tail -1)"
FA_FLOORS_DIR=$root/d128 FA_FLOORS_D=128 FA_FLOORS_SHAPES="--heads 16 --seq 16384;--heads 16 \
--seq 16384 --causal;--batch 4 --heads 16 --seq 4096 --bias;--batch 4 --heads 16 --seq 4096 \
--bias --bias-dtype f16;--batch 4 --heads 16 --seq 4096;\
--batch 32 --heads 16 --seq 512" \
    timeout 300 bash "$floors" run "$tool" 2
FA_FLOORS_DIR=$root/d64 FA_FLOORS_D=64 FA_FLOORS_SHAPES="--heads 32 --seq 16384" \
    timeout 60 bash "$floors" run "$tool" 2
FA_FLOORS_DIR=$root/d256 FA_FLOORS_D=256 FA_FLOORS_SHAPES="--batch 2 --heads 8 --seq 8192" \
    timeout 60 bash "$floors" run "$tool" 2
