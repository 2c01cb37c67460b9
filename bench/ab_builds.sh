#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds of one tree that differ in compile-time switches (FA_CUDA_DEFINES), timed in turns in
# one device call, so that a kernel change is judged against its own baseline on the same GPU.
#
# Here (each CUDA build about 8 minutes on 2 cores; packed into .gpu/ab.txz):
#   bench/ab_builds.sh prepare NAME=DEFINES...    e.g. base=  st2=FA_FWD_WGMMA_STAGES=2
# Then on the device (carry .gl and .gpu):
#   bash bench/ab_builds.sh run ROUNDS ROWS_FILE
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
[ "${1:-}" = run ] || { echo "usage: $0 prepare NAME=DEFINES... | run ROUNDS ROWS_FILE" >&2; exit 2; }
rounds=${2:?rounds} rows=${3:?rows file}
mkdir -p /tmp/ab-pack && xz -dc .gpu/ab.txz | tar xf - -C /tmp/ab-pack
read -r -a builds </tmp/ab-pack/builds
# shellcheck disable=SC2034 # build: read by gpu_env.sh
build=/tmp/ab-pack/${builds[0]} out=$OUT/l
# shellcheck source=bench/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >>"$S"
one() { # log name, build, flashattn run arguments...
    local n=$1 b=$2
    shift 2
    step "$n" 120 env LD_LIBRARY_PATH="/tmp/ab-pack/$b:$LD_LIBRARY_PATH" \
        "/tmp/ab-pack/$b/flashattn" run "$@" </dev/null >/dev/null
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
