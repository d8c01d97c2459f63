#!/usr/bin/env bash
# run_model.sh [--full | -- SPIN_DEFINES...]: checks tests/model/fast_path.pml exhaustively with
# spin, in a temporary directory. By default it checks the two configurations that ctest's
# fast_path_model runs: 2 consumers x 2 slots (no daemon restart), and 2 consumers x 1 slot
# with a daemon crash at any step. --full checks 2 consumers x 2 slots with the crash
# (~36 million states, ~2 GiB, minutes). `-- -DBROKEN -DNO_RESTART` (any defines) checks
# one configuration of your choice breadth-first and prints its shortest trail when it fails.
# Fails on any error, on an incomplete search or on "search depth too small"; exits 77 (skip)
# only when spin is not installed (Debian: spin).
set -euo pipefail
command -v spin >/dev/null || { echo "SKIP: spin is not installed (Debian: spin)"; exit 77; }
model=$(cd "$(dirname "$0")" && pwd)/fast_path.pml
readonly depth=2000000
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "FAIL: no C compiler ($cc)" >&2; exit 1; }

configurations=("-DNO_RESTART" "-DNS=1")
search=(-DCOLLAPSE)
show_trail=false
case "${1:-}" in
  "") ;;
  --full) configurations=("") ;;
  --) shift; configurations=("$*"); search=(-DBFS); show_trail=true ;;  # the shortest trail
  *) echo "usage: $0 [--full | -- SPIN_DEFINES...]" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/"
cd "$work"

status=0
for defines in "${configurations[@]}"; do
  echo "== spin -a ${defines:-(all of it)} fast_path.pml"
  # shellcheck disable=SC2086  # the defines are words
  spin -a $defines fast_path.pml
  # pan.c is generated: its own warnings are not ours.
  "$cc" -O2 -w -DSAFETY "${search[@]}" -o pan pan.c
  output=$(./pan -m"$depth" 2>&1) || true
  echo "$output" | grep -vE '^\s*$|^Depth=|^pan: rate'
  errors=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' <<<"$output")
  if [[ -z "$errors" ]]; then
    echo "FAIL: pan printed no error count" >&2
    status=1
  elif [[ "$errors" != 0 ]]; then
    echo "FAIL: $errors error(s) with ${defines:-no defines}" >&2
    if $show_trail; then
      # shellcheck disable=SC2086
      spin -t -p $defines fast_path.pml | grep -E '^ +[0-9]+:|Error|assert' |
        grep -vE ':init:|\[(\.\(goto\)|DO|IF|else|break|goto :b[0-9]+)\]'
    fi
    status=1
  elif grep -qE 'search depth too small|Search not completed' <<<"$output"; then
    echo "FAIL: the search was not exhaustive with -m$depth" >&2
    status=1
  fi
done
exit "$status"
