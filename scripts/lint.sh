#!/usr/bin/env bash
# The project's own code against .clang-format and .clang-tidy (STYLE.md, "Tooling").
#   scripts/lint.sh format          fails on any file clang-format-19 would change
#   scripts/lint.sh format --fix    rewrites those files in place
#   scripts/lint.sh tidy BUILD_DIR  fails on any clang-tidy-19 finding, using BUILD_DIR's
#                                   compile_commands.json (its generated headers must exist);
#                                   units whose inputs are unchanged since a clean run are
#                                   skipped (scripts/tidy_cached.py)
# "Own code" is every tracked C/C++ file outside generated code and the fuzz corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

own_files() {
  git ls-files -- '*.c' '*.cc' '*.h' ':!:tests/fuzz/corpus/*'
}

case "${1:-}" in
  format)
    mapfile -t files < <(own_files)
    if [[ "${2:-}" == "--fix" ]]; then
      clang-format-19 -i "${files[@]}"
      exit 0
    fi
    clang-format-19 --dry-run --Werror "${files[@]}"
    echo "lint: clang-format-19: ${#files[@]} files formatted"
    ;;
  tidy)
    build_dir="${2:?usage: scripts/lint.sh tidy BUILD_DIR}"
    [[ -f "$build_dir/compile_commands.json" ]] || {
      echo "lint: $build_dir/compile_commands.json is missing: configure the build first" >&2
      exit 1
    }
    # Translation units only; headers are checked through them (.clang-tidy HeaderFilterRegex).
    mapfile -t units < <(own_files | grep -E '\.(c|cc)$')
    JOBS="${JOBS:-$(nproc)}" /usr/bin/python3 scripts/tidy_cached.py "$build_dir" "${units[@]}" \
      > "$build_dir/clang-tidy.log" 2>&1 || {
      grep -E 'warning:|error:' "$build_dir/clang-tidy.log" | sort -u >&2 || true
      echo "lint: clang-tidy-19 found the problems above (full log: $build_dir/clang-tidy.log)" >&2
      exit 1
    }
    head -n 1 "$build_dir/clang-tidy.log"
    echo "lint: clang-tidy-19: ${#units[@]} translation units clean"
    ;;
  *)
    echo "usage: scripts/lint.sh format [--fix] | tidy BUILD_DIR" >&2
    exit 2
    ;;
esac
