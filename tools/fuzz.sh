#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the libFuzzer harnesses of tests/fuzz (clang with -fsanitize=fuzzer, AddressSanitizer
# and UBSan; the runtime and the CPU backend only, compiled in) into BUILD_DIR and runs each for
# SECONDS from its corpus (tests/fuzz/corpus/<name>; new finds go to BUILD_DIR, the corpus in the
# tree stays as it is). Exits 1 on a crash, a sanitizer report or a harness abort, with the
# reproducer left in BUILD_DIR.
#
#   tools/fuzz.sh [SECONDS] [BUILD_DIR]        defaults: 60, build-fuzz
set -eu
seconds=${1:-60}
out=${2:-build-fuzz}
root=$(cd "$(dirname "$0")/.." && pwd)
cc=${FA_FUZZ_CC:-clang}
command -v "$cc" >/dev/null || { echo "fuzz: no $cc (apt-get install clang)" >&2; exit 1; }
mkdir -p "$out/obj"
flags="-g -std=c11 -D_GNU_SOURCE -fopenmp -fsanitize=address,undefined
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer -I$root/include -I$root/runtime
  -I$root/backends -I$root/tools/cli"
objects=""
for src in "$root"/runtime/*.c "$root"/backends/cpu/*.c "$root"/tools/cli/cli_args.c; do
    obj="$out/obj/$(basename "$(dirname "$src")")_$(basename "$src" .c).o"
    # The CPU kernels at -O0: sanitized and optimized, their every instruction set took a minute
    # to compile on CI's two cores, against seconds so; the harnesses' calls are small.
    opt=-O1
    [ "$(basename "$src")" != cpu_kernels.c ] || opt=-O0
    # shellcheck disable=SC2086
    "$cc" $flags $opt -fsanitize=fuzzer-no-link -DFA_BUILDING_LIBRARY -c "$src" -o "$obj" &
    objects="$objects $obj"
    [ "$(jobs -p | wc -l)" -lt "$(nproc)" ] || wait
done
wait
status=0
for harness in attention cli_args; do
    # shellcheck disable=SC2086
    "$cc" $flags -fsanitize=fuzzer "$root/tests/fuzz/fuzz_$harness.c" $objects -lm -ldl \
        -lpthread -o "$out/fuzz_$harness"
    mkdir -p "$out/corpus_$harness"
    echo "fuzz_$harness: $seconds s"
    if ! (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$harness" -max_total_time="$seconds" \
        -print_final_stats=1 "corpus_$harness" "$root/tests/fuzz/corpus/$harness" \
        >"fuzz_$harness.log" 2>&1); then
        tail -n 40 "$out/fuzz_$harness.log"
        echo "fuzz_$harness: FAILED (log and reproducer in $out)"
        status=1
    else
        grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/fuzz_$harness.log" |
            tr '\n' ' '
        echo "fuzz_$harness: passed"
    fi
done
exit $status
