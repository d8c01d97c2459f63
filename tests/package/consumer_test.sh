#!/usr/bin/env bash
# The out-of-tree consumer: installs BUILD_DIR into a staging root (DESTDIR), checks the
# libraries' SONAMEs and links, compiles each installed C++ header alone, configures and builds
# tests/package/consumer/ against the staged files only (find_package(hurray) and pkg-config),
# starts the staged hurrayd and runs the four builds of the consumer against it (a put and a get
# through the C client, and through the C++ client).
#   consumer_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail

build=$1
source=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then kill "$daemon_pid"; fi
}
trap cleanup EXIT
fail() { echo "consumer_test: FAIL: $*" >&2; exit 1; }

# shellcheck source=stage.sh
source "$(dirname "$0")/stage.sh"
stage_install "$build" "$work"

# Each library: the development link, the SONAME link and the versioned file.
for lib in libhurray libhurray-client libhurray-client++; do
  [[ -L $libdir/$lib.so && -L $libdir/$lib.so.0 && -f $libdir/$lib.so.0.1.0 ]] ||
    fail "$lib: expected $lib.so -> $lib.so.0 -> $lib.so.0.1.0 in $libdir"
  soname=$(readelf -d "$libdir/$lib.so.0.1.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [[ $soname == "$lib.so.0" ]] || fail "$lib: SONAME is '$soname', not $lib.so.0"
done
readelf -d "$libdir/libhurray-client.so.0" | grep -q 'NEEDED.*\[libhurray.so.0\]' ||
  fail "libhurray-client.so.0 does not name libhurray.so.0 as NEEDED"
for file in include/hurray.h include/hurray_client.h include/hurray/client.h \
            include/hurray/file_transfer.h include/hurray/health.h include/hurray/inspection.h \
            include/hurray/inspection_json.h bin/hurrayd bin/hurrayctl; do
  [[ -e $root/$file ]] || fail "missing $root/$file"
done
echo "consumer_test: staged install in $root (libraries in $libdir)"

# The C++ client's headers: each compiles on its own with nothing but the staged include
# directory (so every header of ours it includes is installed), and none includes anything but
# the standard library and another of them (no gRPC, protobuf or fmt header).
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
headers=("$root"/include/hurray/*.h)
for header in "${headers[@]}"; do
  printf '#include "hurray/%s"\n' "${header##*/}" |
    "${cxx:-c++}" -std=c++23 -fsyntax-only -Wall -Werror -I"$root/include" -x c++ - ||
    fail "include/hurray/${header##*/} does not compile alone against the staged headers"
done
foreign=$(grep -h '^#include' "${headers[@]}" | grep -v -E '^#include (<[a-z_]+>|"hurray/[a-z_]+\.h")$' ||
  true)
[[ -z $foreign ]] || fail "the installed C++ headers include more than the standard library: $foreign"
echo "consumer_test: ${#headers[@]} C++ headers in $root/include/hurray, each compiles alone"

# The consumer sees the staged prefix only: CMake through CMAKE_PREFIX_PATH, pkg-config through
# PKG_CONFIG_LIBDIR (which replaces the system's .pc directories) and PKG_CONFIG_SYSROOT_DIR
# (which puts the staging root before the .pc files' paths).
export PKG_CONFIG_LIBDIR="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$work/stage"
flags=$(pkg-config --cflags --libs hurray-client)
[[ $flags == *"-I$root/include"* && $flags == *"-L$libdir "* ]] ||
  fail "pkg-config hurray-client gives '$flags', not the staged include and library directories"
echo "consumer_test: pkg-config hurray-client: $flags"
flags=$(pkg-config --cflags --libs hurray-client++)
[[ $flags == *"-I$root/include"* && $flags == *"-L$libdir "* && $flags == *-lhurray-client++* ]] ||
  fail "pkg-config hurray-client++ gives '$flags', not the staged directories and -lhurray-client++"
echo "consumer_test: pkg-config hurray-client++: $flags"
cmake -S "$source/tests/package/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$root" >"$work/consumer-configure.log" ||
  { cat "$work/consumer-configure.log"; fail "the consumer did not configure"; }
found=$(sed -n 's/^hurray_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")
[[ $found == "$root"/* ]] || fail "find_package(hurray) found '$found', not the staged package"
cmake --build "$work/consumer" >"$work/consumer-build.log" ||
  { cat "$work/consumer-build.log"; fail "the consumer did not build"; }
echo "consumer_test: the consumer built against $found and through pkg-config"

socket="$work/hurrayd.sock"
printf '[cpu_pool]\nshm_prefix = "package-consumer-%s"\n' "$$" >"$work/hurrayd.toml"
LD_LIBRARY_PATH="$libdir" "$root/bin/hurrayd" --config "$work/hurrayd.toml" --socket "$socket" \
  --cpu-pool-capacity 64MiB --log-level warning >"$work/hurrayd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 200); do
  LD_LIBRARY_PATH="$libdir" "$root/bin/hurrayctl" --socket "$socket" stats >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/hurrayd.log"; fail "hurrayd exited"; }
  sleep 0.05
done

export LD_LIBRARY_PATH="$libdir"
"$work/consumer/consumer_cmake" "$socket" package/through-cmake
"$work/consumer/consumer_pkgconfig" "$socket" package/through-pkgconfig
"$work/consumer/consumer_cxx_cmake" "$socket" package/cxx-through-cmake
"$work/consumer/consumer_cxx_pkgconfig" "$socket" package/cxx-through-pkgconfig

kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "hurrayd exited with $? on SIGTERM; log: $(cat "$work/hurrayd.log")"
daemon_pid=
echo "consumer_test: PASS"
