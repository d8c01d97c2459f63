#!/usr/bin/env bash
# libhurray.so's ABI against its reviewed baseline, tests/c_abi/abi/libhurray.abi (an abidw
# dump, Debian's abigail-tools): the format's C ABI, version 4, never changes (docs/c-abi.md).
#   scripts/abi.sh check BUILD_DIR    fails on any change to a function, variable or type the
#                                     baseline has; functions added to the library pass
#   scripts/abi.sh update BUILD_DIR   writes BUILD_DIR's ABI as the baseline: a deliberate
#                                     commit of its own, reviewed as a change of the ABI
# Only hurray.h is the library's public header, so the handles stay opaque: the structures
# behind them are the library's to change.
set -euo pipefail
cd "$(dirname "$0")/.."

baseline=tests/c_abi/abi/libhurray.abi
usage="usage: scripts/abi.sh check|update BUILD_DIR"
build_dir="${2:?$usage}"
library="$build_dir/core/libhurray.so"
[[ -f "$library" ]] || { echo "abi: $library is missing: build the target hurray first" >&2; exit 1; }

# Machine-independent (no paths, no build directory, no dependencies' file names), and only
# what hurray.h declares: the one header in the headers directory abidw is given.
dump() {
  local headers
  headers=$(mktemp -d)
  cp core/include/hurray.h "$headers/"
  abidw --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
    --headers-dir "$headers" --drop-private-types --exported-interfaces-only \
    --out-file "$1" "$library"
  rm -r "$headers"
}

case "${1:-}" in
  check)
    current=$(mktemp --suffix=.abi)
    trap 'rm -f "$current"' EXIT
    dump "$current"
    # abidiff's exit status is a bit set: 1 error, 2 usage, 4 a change, 8 an incompatible one.
    # --harmless counts the changes it would filter (a typedef renamed: size_t for uint64_t),
    # --no-added-syms leaves added functions out: what remains is a change of the baseline.
    status=0
    report=$(abidiff --harmless --no-added-syms --no-show-locs "$baseline" "$current") || status=$?
    if (( status & 3 )); then
      echo "abi: abidiff failed ($status): $report" >&2
      exit 1
    fi
    if (( status != 0 )); then
      echo "$report" >&2
      echo "abi: libhurray.so changes the ABI of $baseline (above). The C ABI's existing" \
           "symbols never change; adding is allowed (scripts/abi.sh update, reviewed)." >&2
      exit 1
    fi
    added=$(abidiff --no-show-locs "$baseline" "$current" | grep -oE '[0-9]+ Added function' || true)
    echo "abi: libhurray.so keeps the ABI of $baseline (${added:-0 Added function}s since it)"
    ;;
  update)
    dump "$baseline"
    echo "abi: wrote $baseline from $library; commit it on its own, as an ABI change"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
