#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan matrix forward (attn_fwd_cm.comp) at several tilings, in kinds of module that
# floor one another, against the shipped module, on NVIDIA's driver (its 16x16x16 shape on
# subgroups of 32 and the accumulator layout its probe finds): how fast the products, their
# shared-memory loads, the K/V copies and the barriers can go before any softmax, and what the
# whole forward makes of it (docs/PERF.md, thirty-second and thirty-third sessions).
#
# Here (the cooperative-matrix glslang of tools/install-deps.sh; BUILD holds the build whose
# catalogue names the modules; a tiling outside the default catalogue needs a build configured
# with -DFA_VK_CM_TILINGS="$(bench/vk_forward_floors.sh tilings TM,NSG,BN[,copy] ...)"):
#   bench/vk_forward_floors.sh prepare BUILD [TM,NSG,BN ...]   -> .gpu/floors/KIND/TILING/
# FA_FLOORS_KINDS (default "products full") names the kinds to write, FA_FLOORS_DEFINES adds -D
# options to every module; FA_FLOORS_DIR (default .gpu/floors) is the folder and FA_FLOORS_D
# (default 128) the head dim, both for both modes.
# On the device (carry .gpu), with a build's flashattn:
#   bench/vk_forward_floors.sh run TOOL [ROUNDS]
# Kinds, each a floor under the next: "mma" (the products with every B operand read from one
# place, no K/V traffic, no barriers: FA_CM_FLOOR_B_ONCE), "nokv" (the products with their
# shared-memory reads, no K/V traffic, no barriers: FA_CM_FLOOR_NO_KV; in both, the operands move
# by 16 bytes every other step lest the driver hoist the products out of the loop, which the
# thirty-third session's first call, without that, suggests it did), "products" (the products
# with their loads, copies and barriers, no row work: FA_CM_PRODUCTS_ONLY) and "full" (the whole
# forward; "full-NAME" too, for a whole forward of another form that FA_FLOORS_DEFINES makes).
# All but those are timing only: their results are not attention; each whole forward must pass
# five `run --check` rows at the head dim (N=1000, a causal GQA case, a window with a softcap and
# ALiBi, an f32 bias, an f16 one). FA_FLOORS_SHAPES gives the timed rows' shapes (run
# arguments, `;` between; default "--heads 16 --seq 16384"). Each module replaces, through
# FA_VULKAN_SPV_DIR, the catalogue module of its tiling where the catalogue has one, else the
# generic module; FA_VULKAN_MATRIX_FWD_TILES picks the tiling. A row whose ovr= count is 0 ran no
# override (the planner refused the tiling, or the module has another name): its number is the
# shipped module's. FA_FLOORS_CHECK_S (default 90) bounds each check's seconds.
set -eu
root=${FA_FLOORS_DIR:-.gpu/floors}
hd=${FA_FLOORS_D:-128} # the head dim, for both modes
mode=${1:?usage: $0 prepare BUILD [TM,NSG,BN ...] | run TOOL [ROUNDS] | tilings TM,NSG,BN[,copy]...}
if [ "$mode" = tilings ]; then # FA_VK_CM_TILINGS: the default plus these forward tilings
    shift
    cm=$(dirname "$0")/../backends/vulkan/matrix_shaders.cmake
    list=$(sed -n '/^set(FA_VK_CM_TILINGS/{n;p}' "$cm" | sed 's/^ *"//; s/"$//')
    for t in "$@"; do
        IFS=, read -r tm nsg bn copy <<<"$t" # TM,NSG,BN[,copy]
        list="$list;fwd: 16 16 16 32 $nsg $tm $bn 8 2 1 3 0x76543210 $hd-$hd${copy:+ copy}"
    done
    echo "$list"
    exit 0
fi
if [ "$mode" = prepare ]; then
    build=${2:?build folder}
    shift 2
    tilings=${*:-1,8,64 1,8,32 1,4,64 2,4,32 2,4,16 2,8,16 2,8,32}
    FA_FLOORS_DEFINES=${FA_FLOORS_DEFINES:-} # more -D options for every module
    bin=${FA_GLSLANG_BIN:-/opt/flashattn-tools/glslang-venv/bin}
    src=$(dirname "$0")/../shaders/vulkan
    layout="-DFA_CM_LAYOUT_E=8 -DFA_CM_LAYOUT_SHIFT=2 -DFA_CM_LAYOUT_BITS=1 -DFA_CM_LAYOUT_XOR=3"
    layout="$layout -DFA_CM_A_FROM_C=0x76543210 -DFA_CM_A_ELEMENTS=8"
    # the kinds of module: products, full, nokv (the products without K/V traffic or barriers:
    # FA_CM_FLOOR_NO_KV), mma (nokv with every B operand read from one place: FA_CM_FLOOR_B_ONCE)
    kinds=${FA_FLOORS_KINDS:-products full}
    for kind in $kinds; do rm -rf "${root:?}/$kind"; done
    for t in $tilings; do
        IFS=, read -r tm nsg bn <<<"$t"
        cat=cat_attn_fwd_cm_16x16x16_sg32x${nsg}_tm${tm}_bn${bn}_l8_2_1_3_a0x76543210
        name=attn_fwd_cm_f16_s16
        for c in "$build/shaders/vulkan/${cat}"{,_copy,_copy_biasearly}_d$hd.spv; do
            [ -f "$c" ] && name=$(basename "$c" .spv)
        done
        for kind in $kinds; do
            dir=$root/$kind/$t
            mkdir -p "$dir"
            case $kind in
            full | full-*) defs= ;; # full-NAME: a whole forward of another form (FA_FLOORS_DEFINES)
            products) defs=-DFA_CM_PRODUCTS_ONLY ;;
            nokv) defs="-DFA_CM_PRODUCTS_ONLY -DFA_CM_FLOOR_NO_KV" ;;
            mma) defs="-DFA_CM_PRODUCTS_ONLY -DFA_CM_FLOOR_NO_KV -DFA_CM_FLOOR_B_ONCE" ;;
            *) echo "unknown kind $kind" >&2; exit 2 ;;
            esac
            # shellcheck disable=SC2086
            "$bin/glslangValidator" -V --target-env vulkan1.3 -DDTYPE_F16 -DSTORAGE16 -I"$src" \
                -DFA_FIXED_D="$hd" -DFA_CM_FIXED -DFA_CM_FIXED_M=16 -DFA_CM_FIXED_N=16 \
                -DFA_CM_FIXED_K=16 -DFA_CM_FIXED_SG=32 -DFA_CM_FIXED_NSG="$nsg" \
                -DFA_CM_FIXED_TM="$tm" -DFA_CM_FIXED_BN="$bn" $layout $defs $FA_FLOORS_DEFINES \
                -o "$dir/raw" "$src/attn_fwd_cm.comp" >/dev/null
            "$bin/spirv-opt" --target-env=vulkan1.3 --loop-unroll -O "$dir/raw" -o "$dir/$name.spv"
            "$bin/spirv-val" --target-env vulkan1.3 "$dir/$name.spv"
            rm "$dir/raw"
        done
        echo "$t: $name"
    done
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare BUILD [TILINGS] | run TOOL [ROUNDS]" >&2; exit 2; }
tool=${2:?tool}
rounds=${3:-2}
# FA_FLOORS_SHAPES: the timed rows' shapes, `;` between (default: B=1 H=16 N=16k)
IFS=';' read -r -a shapes <<<"${FA_FLOORS_SHAPES:---heads 16 --seq 16384}"
row() { # label, tiles ('' for the default), override folder ('' for none), run arguments
    local n=$1 t=$2 d=$3 log
    shift 3
    log=$(env ${t:+FA_VULKAN_MATRIX_FWD_TILES=$t} ${d:+FA_VULKAN_SPV_DIR=$d} \
        FA_VULKAN_PIPELINE_STATS=1 timeout 90 "$tool" run --backend vulkan --head-dim "$hd" \
        --dtype f16 "$@" --log info 2>&1) || true
    printf '%-22s %-22s ovr=%s %s\n' "$n" "$(grep -m1 '^rate' <<<"$log" | awk '{print $2, $3}')" \
        "$(grep -c FA_VULKAN_SPV_DIR <<<"$log")" \
        "$(grep 'attn_fwd_cm statistics' <<<"$log" | grep -m1 -o 'Register Count=[0-9]*')"
}
check() { # label, tiles, override folder, run arguments: the full module must PASS
    local n=$1 t=$2 d=$3
    shift 3
    printf '%-22s %s\n' "$n" "$(FA_VULKAN_MATRIX_FWD_TILES=$t FA_VULKAN_SPV_DIR=$d \
        timeout "${FA_FLOORS_CHECK_S:-90}" \
        "$tool" run --backend vulkan --dtype f16 --head-dim "$hd" --check "$@" 2>&1 |
        grep -m1 -o 'PASS\|FAIL' || echo none-or-timeout)"
}
# shellcheck disable=SC2086 # a shape is words
for d in "$root"/*/*/; do # compile each once (the pipeline cache), then time
    t=$(basename "$d")
    row "compile $t" "$t" "$PWD/$d" --repeat 1 --warmup 0 ${shapes[0]} >/dev/null
done
# shellcheck disable=SC2086
row "compile shipped" "" "" --repeat 1 --warmup 0 ${shapes[0]} >/dev/null
tag=$(basename "$root")
for d in "$root"/full*/*/; do # every whole forward must pass (a timeout: a hang)
    [ -d "$d" ] || continue
    t=$(basename "$d") k=$(basename "$(dirname "$d")")
    check "check $k $t" "$t" "$PWD/$d" --heads 4 --seq 1000
    check "check $k $t causal" "$t" "$PWD/$d" --heads 8 --kv-heads 2 --seq-q 700 --seq-k 1100 \
        --causal
    check "check $k $t variants" "$t" "$PWD/$d" --batch 3 --heads 4 --seq 513 --window 100,20 \
        --softcap 30 --alibi
    check "check $k $t bias" "$t" "$PWD/$d" --batch 2 --heads 4 --seq 300 --bias
    check "check $k $t f16 bias" "$t" "$PWD/$d" --batch 2 --heads 4 --seq 256 --bias \
        --bias-dtype f16
done
for i in $(seq "$rounds"); do
    for shape in "${shapes[@]}"; do
        # shellcheck disable=SC2086 # the shape is words
        row "shipped, round $i: $shape" "" "" --warmup 150 --repeat 30 $shape
        for d in "$root"/*/*/; do
            t=$(basename "$d") k=$(basename "$(dirname "$d")")
            # shellcheck disable=SC2086
            row "$tag $k $t, round $i: $shape" "$t" "$PWD/$d" --warmup 150 --repeat 30 $shape
        done
    done
done
