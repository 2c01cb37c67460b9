#!/bin/sh
# SPDX-License-Identifier: MIT
# The decoding kernels' forms that lavapipe and PoCL would not choose, kept correct here on
# `run --check` shapes that cover split chunks, a partial last step, causal rows, paged caches and
# head dims 64, 128 and 256: the build's staged Vulkan module (attn_decode_staged, chosen where
# 32 KiB more shared memory than lavapipe's fits; bench/decode_variants.sh times it on a GPU)
# standing in for the generic f16 one through FA_VULKAN_SPV_DIR; OpenCL's experimental kernel of
# 32 work-items (FA_OPENCL_DECODE=w32, docs/PERF.md), also under conformance's large-logit cases.
# Without a Vulkan or OpenCL device (or a build without the staged module) that part is skipped;
# with neither, the test (77).
#
#   tests/decode_variants_check.sh CLI   (the staged module beside it, in shaders/vulkan)
set -u
cli=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
ran=0
# B Sq Sk Hq Hkv D page splits causal
shapes="2 1 1500 8 2 128 0 3 0
1 4 1008 8 2 128 16 2 1
1 1 700 4 4 64 0 0 0
1 2 520 4 2 256 0 2 1"
check() { # label, a log line that proves the form ran, environment..., --, run arguments
    label=$1 proof=$2
    shift 2
    envs=""
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    echo "$shapes" | while read -r b q k hq hk d pg sp causal; do
        args="--dtype f16 --batch $b --seq-q $q --seq-k $k --heads $hq --kv-heads $hk"
        args="$args --head-dim $d --splits $sp --check --log debug $*"
        [ "$pg" != 0 ] && args="$args --page-size $pg"
        [ "$causal" = 1 ] && args="$args --causal"
        # shellcheck disable=SC2086
        if env $envs "$cli" run $args >"$work/log" 2>&1 && grep -q PASS "$work/log" &&
            grep -q -- "$proof" "$work/log"; then
            echo "decode-variants: $label ($b $q $k $hq $hk $d $pg $sp $causal): PASS"
        else
            tail -n 5 "$work/log"
            echo "decode-variants: FAIL: $label ($b $q $k $hq $hk $d $pg $sp $causal)"
            echo fail >"$work/failed"
        fi
    done
}
staged=$(dirname "$cli")/shaders/vulkan/attn_decode_staged_f16_s16.spv
if [ -f "$staged" ] && "$cli" devices 2>/dev/null | grep -q '^  vulkan .* available'; then
    mkdir "$work/staged"
    cp "$staged" "$work/staged/attn_decode_f16_s16.spv"
    check "vulkan staged" "attn_decode_f16_s16 from .*(FA_VULKAN_SPV_DIR)" \
        "FA_VULKAN_SPV_DIR=$work/staged" -- --backend vulkan
    ran=1
fi
if "$cli" devices 2>/dev/null | grep -q '^  opencl .* available'; then
    check "opencl w32" "-DFA_DEC_W32=1" FA_OPENCL_DECODE=w32 -- --backend opencl
    # The decoding kernels also compute the forwards of backward cases with few rows a KV head:
    # at large logits their scores must match the backward's recomputed ones to the ulp.
    if FA_OPENCL_DECODE=w32 "$cli" conformance --backend opencl --filter "logits=1e2" \
        >"$work/log" 2>&1 && grep -q ' 0 failed' "$work/log"; then
        echo "decode-variants: opencl w32 (conformance logits=1e2): PASS"
    else
        tail -n 5 "$work/log"
        echo "decode-variants: FAIL: opencl w32 (conformance logits=1e2)"
        echo fail >"$work/failed"
    fi
    ran=1
fi
[ -f "$work/failed" ] && status=1
[ "$ran" = 1 ] || { echo "decode-variants: no Vulkan or OpenCL device: skipped"; exit 77; }
exit $status
