# Sourced by the package tests: stage_install BUILD_DIR WORK_DIR installs the build into the
# staging root WORK_DIR/stage (DESTDIR, as `cmake --install` or the .deb lays it out) and sets
# `root` (the staged prefix) and `libdir` (its library directory). Needs `fail` (message).
stage_install() {
  local build=$1 work=$2 prefix
  DESTDIR="$work/stage" cmake --install "$build" >"$work/install.log"
  prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
  root="$work/stage$prefix"
  libdir=$(dirname "$(find "$root" -name 'libhurray.so' -print -quit)")
  [[ -n $libdir && -d $libdir ]] || fail "no libhurray.so under $root"
}
