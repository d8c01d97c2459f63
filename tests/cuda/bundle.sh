#!/usr/bin/env bash
# Collects what the GPU check (run_on_gpu.sh) runs into one folder that travels to a bare
# GPU machine: the driver-only device check (cuda_device_check) and CudaPool's device tests
# (daemon_cuda_pool_device_tests), hurrayd, hurrayctl, the GPU tests and their agent, the
# demo programs (and hurray_bench when built), stripped of debug information, plus the shared libraries they
# load that a bare machine (a CUDA 13 driver and toolkit, Python 3.12) may lack — gRPC,
# protobuf, abseil, c-ares, re2, OpenSSL, zlib, systemd, fmt, spdlog, hiredis, the C++
# runtime — taken from ldd. The C library family (libc, libm, ld-linux, ...) comes from the
# machine, and so does the NVIDIA driver: libcuda is never bundled (the programs load it at
# run time, and the CUDA runtime is linked in statically). MANIFEST names the oldest glibc
# the bundle runs on: the highest GLIBC_x.y any of its programs and libraries references
# (objdump -T); built on Debian 12, it is at most 2.36.
#
#   tests/cuda/bundle.sh [BUILD_DIR]        (default: build) -> BUILD_DIR/gpu-bundle/
#
# Run from anywhere; builds nothing (build the targets first: ninja -C build hurrayd
# hurrayctl cuda_exchange_test hurray_cuda_agent gpu_demo_producer gpu_demo_consumer
# daemon_cuda_pool_device_tests cuda_device_check).
# Fails, saying why, when a program is missing, a library is not found, or the folder is
# above 64 MiB (what the device tool carries).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
bundle="$build/gpu-bundle"
limit_bytes=$((64 * 1024 * 1024))

required=(tests/softcuda/cuda_device_check tests/daemon/daemon_cuda_pool_device_tests
          daemon/hurrayd client/hurrayctl tests/cuda/cuda_exchange_test
          tests/cuda/hurray_cuda_agent tests/cuda/gpu_demo_producer tests/cuda/gpu_demo_consumer)
optional=(bench/hurray_bench)

fail() {
  echo "bundle.sh: $*" >&2
  exit 1
}

# The machine's own: glibc's libraries and the loader, the kernel's vDSO, the driver.
is_base_library() {
  case "$(basename "$1")" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libnsl.so.* | \
      libcuda.so* | libnvidia-*.so*)
      return 0 ;;
  esac
  return 1
}

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
programs=()
for program in "${required[@]}"; do
  [[ -x "$build/$program" ]] || fail "$build/$program is missing: build it first"
  programs+=("$build/$program")
done
for program in "${optional[@]}"; do
  [[ -x "$build/$program" ]] && programs+=("$build/$program")
done

for program in "${programs[@]}"; do
  objcopy --strip-all "$program" "$bundle/bin/$(basename "$program")"
  while read -r line; do
    [[ "$line" == *"not found"* ]] && fail "$program: ldd: $line"
    library="$(awk '/=>/ { print $3 }' <<< "$line")"
    [[ -z "$library" ]] && continue
    is_base_library "$library" && continue
    [[ -e "$bundle/lib/$(basename "$library")" ]] && continue
    cp -L "$library" "$bundle/lib/$(basename "$library")"
  done < <(ldd "$program")
done

for program in "$bundle"/bin/*; do
  if ldd "$program" | grep -q 'libcuda\.so'; then
    fail "$(basename "$program") links libcuda: it would not start without the driver"
  fi
done

# The newest glibc symbol version anything in the bundle needs: the target's glibc must be
# at least this (Ubuntu 22.04 has 2.35, 24.04 2.39; RHEL 8 has 2.28).
glibc_needed="$(for file in "$bundle"/bin/* "$bundle"/lib/*; do objdump -T "$file"; done \
  | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n 1)"
[[ -n "$glibc_needed" ]] || fail "objdump -T found no GLIBC_ version in the bundle"
needed_by=""
for file in "$bundle"/bin/* "$bundle"/lib/*; do
  if grep -qw "$glibc_needed" <<< "$(objdump -T "$file")"; then
    needed_by+="$(basename "$file") "
  fi
done

{
  echo "# The GPU bundle (tests/cuda/bundle.sh): run tests/cuda/run_on_gpu.sh $bundle"
  echo "glibc-required ${glibc_needed#GLIBC_} (the highest GLIBC_x.y referenced, objdump -T;" \
       "by: ${needed_by% })"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
  (cd "$bundle" && find bin lib -type f -printf '%s %p\n' | sort -k2)
} > "$bundle/MANIFEST"

size="$(du -sb "$bundle" | cut -f1)"
if (( size > limit_bytes )); then
  du -ab "$bundle" | sort -n | tail -n 10 >&2
  fail "$bundle is $((size / 1024 / 1024)) MiB, above the 64 MiB the device tool carries" \
       "(largest files above)"
fi
echo "bundle.sh: $bundle: $(find "$bundle/bin" -type f | wc -l) programs," \
     "$(find "$bundle/lib" -type f | wc -l)" \
     "libraries, $((size / 1024 / 1024)) MiB of 64 MiB; needs glibc ${glibc_needed#GLIBC_}"
