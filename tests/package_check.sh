#!/bin/sh
# SPDX-License-Identifier: MIT
# Makes the packages (cpack: .deb and .tar.gz), checks the .deb's control fields, unpacks each
# into a scratch folder and builds and runs the consumers against it (install_check.sh). The .deb
# is unpacked with dpkg-deb rather than installed, so the test needs no root and leaves the
# machine as it was.
#   package_check.sh BUILD SOURCE SCRATCH
set -eu
build=$1 source=$2 scratch=$3
rm -rf "$scratch"
mkdir -p "$scratch"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
(cd "$build" && cpack -B "$scratch/out" >/dev/null)
deb=$scratch/out/flashattn_${version}_amd64.deb
tgz=$scratch/out/flashattn-$version-Linux.tar.gz
for field in "Package: flashattn" "Version: $version" "Depends: libc6"; do
    dpkg-deb --field "$deb" | grep -q "^$field" || {
        echo "package_check: $deb has no '$field'"
        dpkg-deb --field "$deb"
        exit 1
    }
done
dpkg-deb -x "$deb" "$scratch/deb"
sh "$source/tests/install_check.sh" "$build" "$source" "$scratch/deb-consumer" "$scratch/deb/usr"
mkdir -p "$scratch/tgz"
tar -xzf "$tgz" -C "$scratch/tgz"
sh "$source/tests/install_check.sh" "$build" "$source" "$scratch/tgz-consumer" \
    "$scratch/tgz/flashattn-$version-Linux"
echo "package_check: $(basename "$deb") and $(basename "$tgz") install and link"
