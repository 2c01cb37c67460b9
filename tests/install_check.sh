#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the build into a scratch prefix, then builds and runs a consumer through the CMake
# package (shared and static) and through pkg-config.
set -eu
build=$1 source=$2 scratch=$3
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source/tests/install_consumer" -B "$scratch/consumer" -G Ninja \
    -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib:$scratch/prefix/lib64:${LD_LIBRARY_PATH:-}" \
    "$scratch/consumer/consumer_shared"
"$scratch/consumer/consumer_static"
"$scratch/consumer/consumer_static_volk"
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig:$scratch/prefix/lib64/pkgconfig:$scratch/prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -o "$scratch/consumer_pc" "$source/tests/install_consumer/consumer.c" \
    $(pkg-config --cflags --libs flashattn)
LD_LIBRARY_PATH="$(pkg-config --variable=libdir flashattn)" "$scratch/consumer_pc"
"$scratch/prefix/bin/flashattn" --version
