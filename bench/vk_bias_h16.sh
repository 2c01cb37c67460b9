#!/bin/bash
# SPDX-License-Identifier: MIT
# The Vulkan matrix forward with an f16 bias's early blocks held as f16 matrices until the add
# (attn_fwd_cm.comp, FA_CM_BIAS_H16; issue 14, docs/PERF.md, fifty-third session: the shipped
# module converts them when loaded and holds 255 registers with an f16 bias, 233 with an f32 one),
# through bench/vk_forward_floors.sh (kind full-bh16 over the shipped head-dim-128 tiling). The
# rows also take the bias as a query-by-key matrix per head (`--bias-layout bhsd`), whose rows
# of a tile lie 16 KiB apart instead of 256 KiB (a tile's 128 rows then span one 2 MiB page,
# not 16), to see whether the bias waits on address translation.
#
# Here (the cooperative-matrix glslang on PATH; BUILD names the modules):
#     bench/vk_bias_h16.sh prepare BUILD    -> .gpu/bh16/d128/
# On the device (carry .gpu; gpu_env.sh's set-up done):  bench/vk_bias_h16.sh run TOOL
set -u
mode=${1:?usage: $0 prepare BUILD | run TOOL}
floors=$(dirname "$0")/vk_forward_floors.sh
export FA_FLOORS_DIR=.gpu/bh16/d128 FA_FLOORS_D=128
case $mode in
prepare)
    rm -rf "$FA_FLOORS_DIR"
    FA_FLOORS_KINDS=full-bh16 \
        FA_FLOORS_DEFINES="-DFA_CM_COPY_IN_STEP -DFA_CM_BIAS_EARLY -DFA_CM_BIAS_H16" \
        bash "$floors" prepare "${2:?build folder}" 1,8,64
    ;;
run)
    b="--batch 4 --heads 16 --seq 4096"
    FA_FLOORS_CHECK_S=30 FA_FLOORS_SHAPES="$b --bias --bias-dtype f16;$b --bias;$b;\
$b --bias --bias-layout bhsd;$b --bias --bias-dtype f16 --bias-layout bhsd" \
        bash "$floors" run "${2:?tool}" 2
    ;;
*) echo "usage: $0 prepare BUILD | run TOOL" >&2; exit 2 ;;
esac
