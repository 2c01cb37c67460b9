#!/bin/bash
# The Vulkan backend's cooperative-matrix path on a GPU machine, in one device call: devices,
# conformance (--quick under the validation layer, then the f16 cases of --full with the matrix
# path), the driver's pipeline statistics (registers, spills), the bench grid on Vulkan (matrix
# and scalar) and CUDA, and a sweep of tilings (FA_VULKAN_MATRIX_*_TILES). Logs go to $OUT.
#
#   bench/vk_matrix_session.sh BUILD_DIR [conformance|bench|all] [TILES...]
#
# BUILD_DIR holds `flashattn` and libflashattn.so; the loaders' Debian packages in ./.gl are
# unpacked first (see bench/gpu_session.sh).
set -u
build=${1:?usage: bench/vk_matrix_session.sh BUILD_DIR [conformance|bench|all] [TILES...]}
what=${2:-all}
shift $(($# > 2 ? 2 : $#))
out=/tmp/vk-session
mkdir -p "$out"
tool="$build/flashattn"
export LD_LIBRARY_PATH="$build:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
if compgen -G ".gl/*.deb" >/dev/null; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/fa-session-cache}
mkdir -p "$XDG_CACHE_HOME"
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$nvidia_icd" ] && export VK_DRIVER_FILES=$nvidia_icd

step() { # name, seconds, command...
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.txt" 2>&1
    echo "$name: exit $? in $((SECONDS - start)) s: $(tail -1 "$out/$name.txt")"
}

step devices 60 "$tool" devices
step conf_quick_validation 240 env FA_VULKAN_VALIDATION=1 "$tool" conformance \
    --backend vulkan --quick --report "$out/conf_quick.md"
if [ "$what" != bench ]; then
    SHARD_TIMEOUT=300 step conf_full_f16 320 bench/conformance_shards.sh "$tool" "$(nproc)" \
        "$out/full_f16" --full --backend vulkan --filter 'f16'
fi
if [ "$what" != conformance ]; then
    step stats 120 env FA_VULKAN_PIPELINE_STATS=1 "$tool" bench --backend vulkan --seqlen 2048 \
        --head-dim 128 --log debug
    step bench_vulkan 300 "$tool" bench --backend vulkan --csv "$out/bench_vulkan.csv"
    step bench_vulkan_scalar 200 env FA_VULKAN_MATRIX=0 "$tool" bench --backend vulkan --quick \
        --csv "$out/bench_vulkan_scalar.csv"
    step bench_cuda 200 "$tool" bench --backend cuda --csv "$out/bench_cuda.csv"
    for tiles in "$@"; do
        step "sweep_$tiles" 120 env FA_VULKAN_MATRIX_FWD_TILES="$tiles" \
            FA_VULKAN_MATRIX_BWD_TILES="$tiles" "$tool" bench --backend vulkan --seqlen 16384 \
            --head-dim 128 --causal no
    done
fi
tar -czf "${OUT:-.}/vk-session.tgz" -C "$out" .
