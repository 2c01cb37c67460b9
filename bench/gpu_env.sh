# SPDX-License-Identifier: MIT
# Sourced by the GPU session scripts (gpu_session.sh, vk_matrix_session.sh) with $build (the
# folder of `flashattn` and libflashattn.so) and $out (the log folder) set: unpacks the loaders'
# Debian packages in ./.gl (Vulkan, OpenCL, libglvnd, which NVIDIA's Vulkan driver needs),
# points the Vulkan loader at NVIDIA's driver, registers NVIDIA's OpenCL ICD, sets up a cache
# folder, and defines `step NAME SECONDS COMMAND...` (output to $out/NAME.txt, one summary line).
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
if [ -w /etc ]; then
    mkdir -p /etc/OpenCL/vendors
    echo libnvidia-opencl.so.1 >/etc/OpenCL/vendors/nvidia.icd
fi

step() { # name, seconds, command...
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.txt" 2>&1
    echo "$name: exit $? in $((SECONDS - start)) s: $(tail -1 "$out/$name.txt")"
}
