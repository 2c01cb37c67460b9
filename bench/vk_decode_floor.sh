#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan decoding kernel (attn_decode.comp) against its floor and its variants at one
# decoding step (B=1 Sk=32k D=128, 32 query heads on 8 KV heads, f16): the shipped (staged) and
# plain (unstaged, FA_VULKAN_DECODE=plain) modules, and variants of either built here:
# "floor", the staged kernel without its products (FA_DEC_FLOOR: loads, staging, barriers and
# softmax; timing only, its results are not attention); "readN", the chunk's K and V rows only
# read, N 16-byte loads in flight a lane, without barriers or shared memory (FA_DEC_READ_ONLY,
# timing only: the grid's read ceiling through the driver); "pu8", 128-byte K pieces and 16 V
# rows in flight (FA_DEC_PU, FA_DEC_VR: fewer registers); "p..." variants of the plain module
# with more invocations a workgroup (FA_DEC_THREADS) or fewer V rows in flight. (In the
# forty-eighth session 256 invocations on the staged module lost 2-4x and the next step's first
# K and V requested while this step computes, FA_DEC_PIPELINE, 4-12 %: both dropped, the switch
# removed.) At several chunk counts (CHUNKS, default "32 128 256"), with the merge in a dispatch
# of its own so that FA_VULKAN_PROFILE gives the split kernel's GPU time alone, and the driver's
# statistics (registers) of each pipeline (docs/PERF.md, forty-fifth and forty-eighth sessions).
# Each variant but the timing-only ones first runs two `--check` rows. ONLY="NAME ..." runs
# those variants alone (with the two shipped modules).
#
# Here (a glslang that compiles the decoding shader; the device has none):
#   bench/vk_decode_floor.sh prepare      -> .gpu/decfloor/NAME/attn_decode_*.spv
# On the device (carry .gpu; gpu_env.sh's set-up done, TOOL a build's flashattn):
#   bench/vk_decode_floor.sh run TOOL [ROUNDS]  one line per (round, chunks, module)
# A row whose spv= count is 0 ran no override: its number is the shipped module's.
set -eu
dir=${FA_DECFLOOR_DIR:-.gpu/decfloor}
mode=${1:?usage: $0 prepare | run TOOL [ROUNDS]}
shaders=$(dirname "$0")/../shaders/vulkan
# NAME BASE DEFINES...: the modules built here, over the staged or the plain module
variants=("floor staged -DFA_DEC_FLOOR" "read4 staged -DFA_DEC_READ_ONLY=4"
    "read8 staged -DFA_DEC_READ_ONLY=8" "read16 staged -DFA_DEC_READ_ONLY=16"
    "pu8 staged -DFA_DEC_PU=8 -DFA_DEC_VR=16" "pv8 plain -DFA_DEC_VR=8"
    "p256 plain -DFA_DEC_THREADS=256" "p256v8 plain -DFA_DEC_THREADS=256 -DFA_DEC_VR=8"
    "p256v4 plain -DFA_DEC_THREADS=256 -DFA_DEC_VR=4")
base_of() { # name -> staged or plain
    local v
    for v in "${variants[@]}"; do
        read -r n b _ <<<"$v"
        [ "$n" = "$1" ] && echo "$b"
    done
}
names=()
for v in "${variants[@]}"; do
    n=${v%% *}
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $n "* ]] && names+=("$n")
done
if [ "$mode" = prepare ]; then
    for v in "${variants[@]}"; do
        read -r name base defines <<<"$v"
        mkdir -p "$dir/$name"
        stage=(-DFA_DEC_STAGE_K) spv=$dir/$name/attn_decode_staged_f16_s16.spv
        [ "$base" = plain ] && stage=() spv=$dir/$name/attn_decode_f16_s16.spv
        # shellcheck disable=SC2086 # the defines are words
        glslangValidator -V --target-env vulkan1.1 -DDTYPE_F16 -DSTORAGE16 "${stage[@]}" \
            $defines "-I$shaders" -o "$spv" "$shaders/attn_decode.comp" >/dev/null
        spirv-val --target-env vulkan1.1 "$spv"
        echo "$spv"
    done
    exit 0
fi
[ "$mode" = run ] || exit 2
tool=${2:?flashattn}
rounds=${3:-1}
vk=(--backend vulkan --seq-q 1 --seq-k 32768 --heads 32 --kv-heads 8 --head-dim 128 --dtype f16)
log=$(mktemp)
timeout 30 "$tool" run "${vk[@]}" --warmup 200 --repeat 50 </dev/null >/dev/null 2>&1 || true
for name in "${names[@]}"; do
    case $name in floor | read*) continue ;; esac # (timing only: not attention)
    e=("FA_VULKAN_SPV_DIR=$dir/$name")
    [ "$(base_of "$name")" = plain ] && e+=(FA_VULKAN_DECODE=plain)
    for shape in "--splits 32" "--batch 3 --seq-q 4 --seq-k 5000 --causal --splits 77"; do
        # shellcheck disable=SC2086 # the shape is words
        env "${e[@]}" timeout 60 "$tool" run "${vk[@]}" $shape --check \
            --log warn </dev/null >"$log" 2>&1 || true
        echo "check $name $shape: $(grep -o 'PASS\|FAIL' "$log" | head -1)" \
            "spv=$(grep -c SPV_DIR "$log" || true)"
    done
done
for round in $(seq "$rounds"); do
    for splits in ${CHUNKS:-32 128 256}; do
        for module in staged plain "${names[@]}"; do
            e=(FA_VULKAN_PROFILE=1 FA_VULKAN_DECODE_MERGE=kernel FA_VULKAN_PIPELINE_STATS=1)
            case $module in
            staged) ;;
            plain) e+=(FA_VULKAN_DECODE=plain) ;;
            *) e+=("FA_VULKAN_SPV_DIR=$dir/$module") ;;
            esac
            [ "$(base_of "$module")" = plain ] && e+=(FA_VULKAN_DECODE=plain)
            env "${e[@]}" timeout 30 "$tool" run "${vk[@]}" --splits "$splits" --warmup 100 \
                --repeat 30 --log info </dev/null >"$log" 2>&1 || true
            echo "round $round chunks $splits $module:" \
                "$(grep 'vulkan profile' "$log" | tail -1 |
                    grep -o 'attn_decode[a-z_]* [0-9.]* us\|attn_merge [0-9.]* us' | tr '\n' ' ')" \
                "spv=$(grep -c SPV_DIR "$log" || true)"
            [ "$round" = 1 ] && grep 'attn_decode[a-z_]* statistics' "$log" | head -1 | cut -c1-300
        done
    done
done
rm -f "$log"
