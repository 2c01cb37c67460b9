#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds of one tree that differ in compile-time switches (FA_CUDA_DEFINES), timed in turns in
# one device call, so that a kernel change is judged against its own baseline on the same GPU.
#
# Here (each CUDA build about 8 minutes on 2 cores; packed into .gpu/ab.txz):
#   bench/ab_builds.sh prepare NAME=DEFINES...    e.g. base=  st2=FA_FWD_WGMMA_STAGES=2
# Then on the device (carry .gl and .gpu):
#   bash bench/ab_builds.sh run ROUNDS ROWS_FILE
# Or, for the sm_90a kernels alone (about 2.5 minutes an image; build/ must hold the library):
#   bench/ab_builds.sh prepare-images NAME=DEFINES...   e.g. base=  ring=-DFA_FWD_WGMMA_RING_ITEMS=1
# packs build/'s library once and an image of fa_kernels_sm90.cu a name, which `run` loads
# through FA_CUDA_SM90_IMAGE.
# ROWS_FILE: one row a line, `NAME ARGS...` (flashattn run's arguments; `#` starts a comment).
# A row whose name starts with `check` runs once per build and must PASS; every other row runs
# ROUNDS times, the builds in turn within a round. Summary in $OUT/summary.txt, logs in $OUT/l.
set -u
if [ "${1:-}" = prepare ]; then
    set -e
    shift
    rm -rf /tmp/ab-pack && mkdir -p /tmp/ab-pack .gpu
    names=
    for v in "$@"; do
        name=${v%%=*} defs=${v#*=}
        cmake -S . -B "/tmp/ab-build-$name" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DFA_CUDA_ARCHS=90 "-DFA_CUDA_DEFINES=$defs" >/dev/null
        ninja -C "/tmp/ab-build-$name" flashattn libflashattn.so | tail -1
        mkdir -p "/tmp/ab-pack/$name"
        cp -a "/tmp/ab-build-$name"/flashattn "/tmp/ab-build-$name"/libflashattn.so* \
            "/tmp/ab-pack/$name/"
        names="$names $name"
    done
    echo "$names" >/tmp/ab-pack/builds
    tar cf - -C /tmp/ab-pack . | xz -6 -T0 >.gpu/ab.txz
    exit 0
fi
if [ "${1:-}" = prepare-images ]; then
    set -e
    shift
    rm -rf /tmp/ab-pack && mkdir -p /tmp/ab-pack/lib .gpu
    cp -a build/flashattn build/libflashattn.so* /tmp/ab-pack/lib/
    names=
    for v in "$@"; do
        name=${v%%=*} defs=${v#*=}
        # shellcheck disable=SC2086 # the defines are words
        nvcc -fatbin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a $defs -I shaders/cuda \
            -o "/tmp/ab-pack/$name.fatbin" shaders/cuda/fa_kernels_sm90.cu
        names="$names $name"
    done
    echo "$names" >/tmp/ab-pack/builds
    touch /tmp/ab-pack/images
    tar cf - -C /tmp/ab-pack . | xz -6 -T0 >.gpu/ab.txz
    exit 0
fi
[ "${1:-}" = run ] || {
    echo "usage: $0 prepare NAME=DEFINES... | prepare-images NAME=DEFINES... | run ROUNDS ROWS" >&2
    exit 2
}
rounds=${2:?rounds} rows=${3:?rows file}
mkdir -p /tmp/ab-pack && xz -dc .gpu/ab.txz | tar xf - -C /tmp/ab-pack
read -r -a builds </tmp/ab-pack/builds
images=no build=/tmp/ab-pack/${builds[0]}
[ -e /tmp/ab-pack/images ] && images=yes build=/tmp/ab-pack/lib
# shellcheck disable=SC2034 # build: read by gpu_env.sh
out=$OUT/l
# shellcheck source=bench/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >>"$S"
one() { # log name, build, flashattn run arguments...
    local n=$1 b=$2
    shift 2
    if [ $images = yes ]; then
        step "$n" 120 env FA_CUDA_SM90_IMAGE="/tmp/ab-pack/$b.fatbin" "$tool" run "$@" </dev/null
    else
        step "$n" 120 env LD_LIBRARY_PATH="/tmp/ab-pack/$b:$LD_LIBRARY_PATH" \
            "/tmp/ab-pack/$b/flashattn" run "$@" </dev/null
    fi >/dev/null
    printf '%-28s %s %s\n' "$n" "$(grep -m1 '^rate' "$out/$n.txt" | awk '{print $2, $3}')" \
        "$(grep -m1 '^check' "$out/$n.txt" | grep -o 'PASS\|FAIL')" >>"$S"
}
grep -v '^\s*\(#\|$\)' "$rows" | while read -r name args; do
    # shellcheck disable=SC2086
    case $name in
    check*) for b in "${builds[@]}"; do one "${name}_$b" "$b" $args --check; done ;;
    *) for i in $(seq "$rounds"); do
        for b in "${builds[@]}"; do one "${name}_${b}_$i" "$b" $args; done
    done ;;
    esac
done
cat "$S"
