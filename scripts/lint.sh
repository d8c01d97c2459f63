#!/usr/bin/env bash
# The project's own code against .clang-format and .clang-tidy.
#   scripts/lint.sh format          fails on any file clang-format-19 would change
#   scripts/lint.sh format --fix    rewrites those files in place
#   scripts/lint.sh tidy BUILD_DIR  fails on any clang-tidy-19 finding, using BUILD_DIR's
#                                   compile_commands.json (its generated headers must exist);
#                                   units whose inputs are unchanged since a clean run are
#                                   skipped (scripts/tidy_cached.py)
#   scripts/lint.sh layers          fails on any #include that breaks the dependency rules
#                                   (docs/architecture.md, "Dependencies point one way")
#   scripts/lint.sh stubs BUILD_DIR fails on any mypy.stubtest finding: the type stubs of the
#                                   hurray package (python/hurray/*.pyi) against the package
#                                   BUILD_DIR lays out (BUILD_DIR/python/hurray/, the extension
#                                   built), but for python/stubtest-allowlist.txt
# "Own code" is every tracked C/C++ file outside generated code and the fuzz corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

own_files() {
  git ls-files -- '*.c' '*.cc' '*.h' ':!:tests/fuzz/corpus/*'
}

# The daemon's own folders under daemon/src, as its files include them.
daemon_dirs='(access|fast_path|journal|metrics|pool|preload|registry|session)/'
# The client's public headers.
client_headers='hurray/(client|inspection|inspection_json|health|file_transfer)\.h'

# Each rule: the files it covers (a git pathspec), what they must not include (an extended
# regular expression matched against the quoted name of an #include), and why.
layer_rules=(
  'core/|"hurray/(ipc|cuda)/|"'"$client_headers"'|"'"$daemon_dirs"'|the format (core) depends on nothing else of ours'
  'ipc/|"'"$client_headers"'|"'"$daemon_dirs"'|ipc is below both ends'
  'cuda/|"'"$client_headers"'|"'"$daemon_dirs"'|cuda/ depends on neither end'
  'client/|"'"$daemon_dirs"'|"(registry|daemon|exchange_service)\.h"|a client speaks only the protocol'
  'python/|"'"$daemon_dirs"'|python uses the client, never the daemon'
  'daemon/|"'"$client_headers"'|the daemon includes no client header'
  'client/src/hurrayctl/|"[a-z_]+\.h"|"hurray/v1/|"grpc/|<grpcpp/|<google/protobuf/|"hurray/descriptor_codec\.h"|hurrayctl uses only the client'"'"'s public API: no client-internal header, no wire code'
  'daemon/src/registry/|"session/|"hurray/ipc/(session_protocol|frame[a-z_]*)\.h"|"hurray/v1/session\.pb\.h"|<grpcpp/|"exchange_service\.h"|the registry knows no transport'
  'daemon/src/journal/|"registry/|the journal is told by the registry, through registry/version_journal.h'
  'daemon/src/pool/|"(registry|session|journal)/|pools know nothing of what they hold'
)

check_layers() {
  local failed=0 rule pathspec pattern why hits
  for rule in "${layer_rules[@]}"; do
    pathspec="${rule%%|*}"
    why="${rule##*|}"
    pattern="${rule#*|}"
    pattern="${pattern%|*}"
    hits="$(git grep -n -E "^[[:space:]]*#[[:space:]]*include[[:space:]]*(${pattern})" \
      -- "${pathspec}*.h" "${pathspec}*.cc" "${pathspec}*.c" || true)"
    if [[ -n "$hits" ]]; then
      echo "lint: ${why}:" >&2
      echo "$hits" >&2
      failed=1
    fi
  done
  return "$failed"
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
  layers)
    check_layers || {
      echo "lint: the includes above break the dependency rules (docs/architecture.md)" >&2
      exit 1
    }
    echo "lint: layers: ${#layer_rules[@]} dependency rules hold"
    ;;
  stubs)
    build_dir="${2:?usage: scripts/lint.sh stubs BUILD_DIR}"
    compgen -G "$build_dir/python/hurray/_hurray*.so" > /dev/null || {
      echo "lint: $build_dir/python/hurray/ has no extension: build the _hurray target first" >&2
      exit 1
    }
    allowlist="$PWD/python/stubtest-allowlist.txt"
    # From the build directory, where mypy leaves its cache (.mypy_cache).
    (cd "$build_dir" && PYTHONPATH=python /usr/bin/python3 -m mypy.stubtest hurray \
      --allowlist "$allowlist" > stubtest.log 2>&1) || {
      cat "$build_dir/stubtest.log" >&2
      echo "lint: mypy.stubtest: the stubs disagree with the package as shown above" >&2
      exit 1
    }
    echo "lint: mypy.stubtest: the hurray package's stubs match it"
    ;;
  *)
    echo "usage: scripts/lint.sh format [--fix] | tidy BUILD_DIR | layers | stubs BUILD_DIR" >&2
    exit 2
    ;;
esac
