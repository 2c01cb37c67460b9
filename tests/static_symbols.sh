#!/bin/sh
# SPDX-License-Identifier: MIT
# The static library's global symbols are exactly the functions the public headers (flashattn.h
# and the per-backend headers beside it in flashattn/) declare with FA_API: none of the library's internals (or its volk's vk* globals) can clash with an
# application's. Prints any extra or missing symbol.
set -eu
lib=$1 header=$2 scratch=$3
mkdir -p "$scratch"
nm -g --defined-only "$lib" | awk 'NF == 3 && $2 ~ /^[TDBRCV]$/ { print $3 }' | sort -u \
    >"$scratch/global"
grep -ho 'FA_API [^(]*(' "$header" "$(dirname "$header")"/flashattn/*.h | sed -n 's/.*[ *]\(fa_[a-z_0-9]*\)($/\1/p' | sort -u \
    >"$scratch/declared"
extra=$(comm -23 "$scratch/global" "$scratch/declared")
missing=$(comm -13 "$scratch/global" "$scratch/declared")
[ -z "$extra" ] || { echo "global but not in the public header:"; echo "$extra"; }
[ -z "$missing" ] || { echo "declared but not global:"; echo "$missing"; }
[ -z "$extra$missing" ] || exit 1
echo "static library: $(wc -l <"$scratch/global") global symbols, all declared with FA_API"
