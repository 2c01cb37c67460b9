#!/bin/bash
# SPDX-License-Identifier: MIT
# The decoding kernels' forms on a GPU (issue 13), each against the others in the same call
# (f16, D=128, GQA 32:8 rows of `bench --decode`, every row a process of its own):
# - Vulkan: `staged`, the default where 32 KiB more shared memory fits (attn_decode_staged:
#   attn_decode.comp with FA_DEC_STAGE_K, a subgroup's K rows read with neighbouring lanes on
#   neighbouring 16-byte units and staged through shared memory); `none`, the generic module
#   (FA_VULKAN_DECODE=plain); `none32` and `stage32`, the sg32 module as built and with
#   FA_DEC_STAGE_K (through FA_VULKAN_SPV_DIR); the GPU's kernel times (FA_VULKAN_PROFILE=1)
#   beside each row.
#
#   bench/decode_variants.sh prepare [DIR]   here: compiles the staged sg32 module into DIR
#                                            (default .gpu/dec) with FA_GLSLANG (default
#                                            tools/install-deps.sh's glslangValidator),
#                                            spirv-opt and spirv-val
#   bench/decode_variants.sh run TOOL [DIR]  on the device (carry DIR and .gl): conformance's
#                                            decoding cases on the default and six `run --check`
#                                            shapes with each form, then two rounds of rows;
#                                            the summary goes to $OUT/summary.txt (or
#                                            ./decode-variants)
set -u
mode=${1:?usage: $0 prepare [DIR] | run TOOL [DIR]}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "$mode" = prepare ]; then
    set -e
    dir=${2:-.gpu/dec}
    glslang=${FA_GLSLANG:-/opt/flashattn-tools/glslang-venv/bin/glslangValidator}
    d=$dir/stage32 m=attn_decode_sg32_f16_s16
    mkdir -p "$d"
    # as backends/vulkan/backend.cmake builds the sg32 module, with FA_DEC_STAGE_K
    "$glslang" -V --target-env vulkan1.1 -DDTYPE_F16 -DSTORAGE16 -DFA_DEC_FIXED_SG=32 \
        -DFA_DEC_STAGE_K -I"$here/shaders/vulkan" -o "$d/$m.raw" \
        "$here/shaders/vulkan/attn_decode.comp" >/dev/null
    spirv-opt --loop-unroll -O --loop-unroll -O "$d/$m.raw" -o "$d/$m.spv"
    rm "$d/$m.raw"
    spirv-val --target-env vulkan1.1 "$d/$m.spv"
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare [DIR] | run TOOL [DIR]" >&2; exit 2; }
tool=${2:?tool}
dir=${3:-.gpu/dec}
out=${OUT:-decode-variants}
mkdir -p "$out/l"
S=$out/summary.txt
cases='decode|splitkv|seqlens|paged|append'
left() { [ "$SECONDS" -lt "$1" ]; } # seconds into the run, so that the call ends in time
envof() { # variant -> environment
    case $1 in
    none) echo FA_VULKAN_PROFILE=1 FA_VULKAN_DECODE=plain ;;
    staged) echo FA_VULKAN_PROFILE=1 ;; # the default where it fits: attn_decode_staged
    none32) echo FA_VULKAN_PROFILE=1 FA_VULKAN_DECODE=sg32 ;;
    stage32) echo FA_VULKAN_PROFILE=1 FA_VULKAN_DECODE=sg32 "FA_VULKAN_SPV_DIR=$dir/stage32" ;;
    esac
}
# shellcheck disable=SC2046
env $(envof staged) timeout 150 "$tool" conformance --backend vulkan --full --filter "$cases" \
    >"$out/l/conf_staged.txt" 2>&1
echo "vulkan conformance, staged: $(tail -1 "$out/l/conf_staged.txt")" >>"$S"
for v in none staged stage32; do
    for sh in "1 1 32768 32 8 128 0" "3 4 5000 32 8 128 0" "2 1 70000 8 8 64 0" \
        "2 2 9000 16 4 256 0" "2 1 33024 32 8 128 256" "1 4 20000 32 8 128 16"; do
        read -r b q k hq hk d pg <<<"$sh"
        pga=()
        [ "$pg" != 0 ] && pga=(--page-size "$pg")
        # shellcheck disable=SC2046
        env $(envof "$v") FA_VULKAN_PIPELINE_STATS=1 timeout 60 "$tool" run --backend vulkan \
            --dtype f16 --batch "$b" --seq-q "$q" --seq-k "$k" --heads "$hq" --kv-heads "$hk" \
            --head-dim "$d" \
            "${pga[@]}" --check --log info >"$out/l/chk_$v.txt" 2>&1
        # the module that ran (stage32's counts only where the run said it loaded the
        # override), then the driver's register and local-memory figures for it
        local_stats=$(grep -m1 'attn_decode.* statistics' "$out/l/chk_$v.txt")
        echo "check $v (B Sq Sk Hq Hkv D page: $sh): $(grep -o 'PASS\|FAIL' \
            "$out/l/chk_$v.txt" | head -1), $(echo "$local_stats" | awk '{print $2}'), " \
            "$(grep -c SPV_DIR "$out/l/chk_$v.txt") override," \
            "$(echo "$local_stats" |
                grep -o 'Register Count=[0-9]*\|Local Memory Size=[0-9]*' | tr '\n' ' ')" >>"$S"
    done
done
row() { # variant batch seqlen [bench arguments...]
    local v=$1 b=$2 n=$3
    shift 3
    local f=$out/l/b_${v}_${b}_${n}_${1:-}${2:-}
    # shellcheck disable=SC2046
    env $(envof "$v") timeout 60 "$tool" bench --backend vulkan --decode --head-dim 128 \
        --batch "$b" --seqlen "$n" --log info "$@" >"$f.out" 2>"$f.err"
    local k
    k=$(grep -o 'attn_decode[_a-z0-9]* [0-9.]* us x 1;' "$f.err" | sed -n 2,9p |
        awk '{printf "%.1f ", $2}')
    printf '%-8s B=%-3s N=%-6s %-14s %s | kernel us: %s\n' "$v" "$b" "$n" "$*" \
        "$(grep ' 32:8 ' "$f.out" | head -1 | tr -s ' ')" "$k" >>"$S"
}
vk_round() {
    echo "vulkan round $1 (batch, cache length, D, heads, ms, GB/s, TF/s)" >>"$S"
    for r in "1 32768" "1 131072" "16 32768" "64 4096" "1 4096" "1 32768 --page-size 256"; do
        for v in none staged; do
            # shellcheck disable=SC2086
            left 520 && row $v $r
        done
    done
    for r in "1 32768" "1 131072" "16 32768"; do
        for v in none32 stage32; do
            # shellcheck disable=SC2086
            left 520 && row $v $r
        done
    done
    left 520 && row staged 1 32768 --splits 64
    left 520 && row staged 1 131072 --splits 128
}
vk_round 1
vk_round 2
