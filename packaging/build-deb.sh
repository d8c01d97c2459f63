#!/usr/bin/env bash
# Builds the Debian package in BUILD_DIR: configures hurray for the prefix /usr (the unit, the
# .pc files and the conffile name paths under it), builds what the package holds, runs
# `cpack -G DEB` and prints the .deb's path last. Extra arguments go to cmake's configure
# (`make package` passes a Release build; the package test passes its own build's compilers).
#   packaging/build-deb.sh BUILD_DIR [CMAKE_ARG...]
set -euo pipefail

[[ $# -ge 1 ]] || { echo "usage: $0 BUILD_DIR [CMAKE_ARG...]" >&2; exit 2; }
build_dir=$1
shift
source_dir=$(cd "$(dirname "$0")/.." && pwd)

mkdir -p "$build_dir"
cmake -S "$source_dir" -B "$build_dir" -G Ninja -DCMAKE_INSTALL_PREFIX=/usr \
  -DHURRAY_BUILD_TESTS=OFF -DHURRAY_BUILD_BENCH=OFF "$@" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log" >&2; exit 1; }
# The build's output goes to stderr: stdout carries the .deb's path alone.
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" >&2
rm -f "$build_dir"/hurray_*.deb
(cd "$build_dir" && cpack -G DEB >cpack.log 2>&1) || { cat "$build_dir/cpack.log" >&2; exit 1; }
deb=$(ls "$build_dir"/hurray_*.deb)
echo "$deb"
