#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CI for the Python package: builds the wheel into a fresh venv (CUDA and Vulkan left out of its
# library, which keeps the build under a minute on two cores) and runs the pytest suite; then the
# backend tests once more on the repository's own build (build/libflashattn.so, when the README's
# build made one), whose Vulkan backend runs on lavapipe. PyTorch's tests skip unless
# FA_CI_TORCH=1, which installs torch from PyPI first (about 4 GB with its CUDA libraries).
set -euo pipefail
cd "$(dirname "$0")"
venv=build/venv
python3 -m venv --clear "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" pytest numpy ml_dtypes
if [ "${FA_CI_TORCH:-0}" = 1 ]; then
    "${pip[@]}" torch
fi
"${pip[@]}" . --config-settings=cmake.define.FA_WITH_CUDA=OFF \
    --config-settings=cmake.define.FA_WITH_VULKAN=OFF
# from another folder, so that `import flashattn` is the installed package, not src/
cd tests
"../$venv/bin/python" -m pytest -q -rs .
if [ -f ../../build/libflashattn.so ]; then
    FLASHATTN_LIBRARY=$(cd ../../build && pwd)/libflashattn.so \
        "../$venv/bin/python" -m pytest -q -rs test_numpy.py -k "backends or other_backends"
fi
