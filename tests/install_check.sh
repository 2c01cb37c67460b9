#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the build into a scratch prefix (or takes PREFIX, an install made otherwise: an
# unpacked package, tests/package_check.sh), then builds and runs a consumer through the CMake
# package (shared and static) and through pkg-config.
#   install_check.sh BUILD SOURCE SCRATCH [PREFIX]
set -eu
build=$1 source=$2 scratch=$3 prefix=${4:-}
rm -rf "$scratch"
if [ -z "$prefix" ]; then
    prefix=$scratch/prefix
    cmake --install "$build" --prefix "$prefix" >/dev/null
fi
cmake -S "$source/tests/install_consumer" -B "$scratch/consumer" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64:${LD_LIBRARY_PATH:-}" \
    "$scratch/consumer/consumer_shared"
"$scratch/consumer/consumer_static"
"$scratch/consumer/consumer_static_volk"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib64/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -o "$scratch/consumer_pc" "$source/tests/install_consumer/consumer.c" \
    $(pkg-config --cflags --libs flashattn)
LD_LIBRARY_PATH="$(pkg-config --variable=libdir flashattn)" "$scratch/consumer_pc"
"$prefix/bin/flashattn" --version
