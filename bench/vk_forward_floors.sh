#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan matrix forward's products alone (attn_fwd_cm.comp with FA_CM_PRODUCTS_ONLY: no row
# work, P = S) at several tilings, against the shipped module, on NVIDIA's driver (its 16x16x16
# shape on subgroups of 32 and the accumulator layout its probe finds): how fast the products,
# their shared-memory loads and the barriers can go before any softmax (docs/PERF.md, thirty-
# second session: 246 TF/s at the shipped tiling, 212 with the row work, on the H100).
#
# Here (the cooperative-matrix glslang of tools/install-deps.sh; BUILD holds the build whose
# catalogue names the modules):
#   bench/vk_forward_floors.sh prepare BUILD [TM,NSG,BN ...]   -> .gpu/floors/
# On the device (carry .gpu), with a build's flashattn:
#   bench/vk_forward_floors.sh run TOOL [ROUNDS]
# Each tiling's module replaces, through FA_VULKAN_SPV_DIR, the catalogue module of that tiling
# where the catalogue has one, else the generic module; FA_VULKAN_MATRIX_FWD_TILES picks the
# tiling. A row whose ovr= count is 0 ran no override (the planner refused the tiling): its
# number is the shipped module's. Timing only: the results are not attention.
set -eu
mode=${1:?usage: $0 prepare BUILD [TM,NSG,BN ...] | run TOOL [ROUNDS]}
if [ "$mode" = prepare ]; then
    build=${2:?build folder}
    shift 2
    tilings=${*:-1,8,64 1,8,32 2,4,32 2,4,64 2,8,16}
    bin=${FA_GLSLANG_BIN:-/opt/flashattn-tools/glslang-venv/bin}
    src=$(dirname "$0")/../shaders/vulkan
    layout="-DFA_CM_LAYOUT_E=8 -DFA_CM_LAYOUT_SHIFT=2 -DFA_CM_LAYOUT_BITS=1 -DFA_CM_LAYOUT_XOR=3"
    layout="$layout -DFA_CM_A_FROM_C=0x76543210 -DFA_CM_A_ELEMENTS=8"
    rm -rf .gpu/floors && mkdir -p .gpu/floors
    for t in $tilings; do
        IFS=, read -r tm nsg bn <<<"$t"
        cat=cat_attn_fwd_cm_16x16x16_sg32x${nsg}_tm${tm}_bn${bn}_l8_2_1_3_a0x76543210_d128
        name=attn_fwd_cm_f16_s16
        [ -f "$build/shaders/vulkan/$cat.spv" ] && name=$cat
        dir=.gpu/floors/$tm,$nsg,$bn
        mkdir -p "$dir"
        # shellcheck disable=SC2086
        "$bin/glslangValidator" -V --target-env vulkan1.3 -DDTYPE_F16 -DSTORAGE16 -I"$src" \
            -DFA_FIXED_D=128 -DFA_CM_FIXED -DFA_CM_FIXED_M=16 -DFA_CM_FIXED_N=16 \
            -DFA_CM_FIXED_K=16 -DFA_CM_FIXED_SG=32 -DFA_CM_FIXED_NSG="$nsg" \
            -DFA_CM_FIXED_TM="$tm" -DFA_CM_FIXED_BN="$bn" $layout -DFA_CM_PRODUCTS_ONLY \
            -o "$dir/raw" "$src/attn_fwd_cm.comp" >/dev/null
        "$bin/spirv-opt" --target-env=vulkan1.3 --loop-unroll -O "$dir/raw" -o "$dir/$name.spv"
        "$bin/spirv-val" --target-env vulkan1.3 "$dir/$name.spv"
        rm "$dir/raw"
        echo "$t: $name"
    done
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare BUILD [TILINGS] | run TOOL [ROUNDS]" >&2; exit 2; }
tool=${2:?tool}
rounds=${3:-2}
row() { # label, tiles ('' for the default), override folder ('' for none), run arguments
    local n=$1 t=$2 d=$3 log
    shift 3
    log=$(env ${t:+FA_VULKAN_MATRIX_FWD_TILES=$t} ${d:+FA_VULKAN_SPV_DIR=$d} \
        FA_VULKAN_PIPELINE_STATS=1 timeout 90 "$tool" run --backend vulkan --heads 16 \
        --seq 16384 --head-dim 128 --dtype f16 "$@" --log info 2>&1) || true
    printf '%-22s %-22s ovr=%s %s\n' "$n" "$(grep -m1 '^rate' <<<"$log" | awk '{print $2, $3}')" \
        "$(grep -c FA_VULKAN_SPV_DIR <<<"$log")" \
        "$(grep -m1 -o 'Register Count=[0-9]*' <<<"$log")"
}
for d in .gpu/floors/*/; do # compile each once (the pipeline cache), then time
    t=$(basename "$d")
    row "compile $t" "$t" "$PWD/$d" --repeat 1 --warmup 0 >/dev/null
done
row "compile shipped" "" "" --repeat 1 --warmup 0 >/dev/null
for i in $(seq "$rounds"); do
    row "shipped, round $i" "" "" --warmup 150 --repeat 30
    for d in .gpu/floors/*/; do
        t=$(basename "$d")
        row "products $t, round $i" "$t" "$PWD/$d" --warmup 150 --repeat 30
    done
done
