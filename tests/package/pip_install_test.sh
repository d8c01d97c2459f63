#!/usr/bin/env bash
# `pip install ./python` as a user runs it: the build's libraries installed into a staging root
# (as `cmake --install` or the .deb puts them), found through pkg-config; a fresh virtual
# environment made with --system-site-packages (Debian's NumPy, torch and pytest) and Debian's
# pip, offline (--no-build-isolation --no-index); then the whole Python test suite runs against
# the installed package, not the build tree.
#   pip_install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
# The tests' other settings (HURRAY_TEST_HURRAYD, ...) come from the environment.
set -euo pipefail

build=$1
source=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "pip_install_test: FAIL: $*" >&2; exit 1; }

# shellcheck source=stage.sh
source "$(dirname "$0")/stage.sh"
stage_install "$build" "$work"

# The staged .pc files with their prefix moved to the staging root, ahead of the system's.
mkdir "$work/pkgconfig"
for pc in "$libdir"/pkgconfig/hurray*.pc; do
  sed "s|^prefix=.*|prefix=$root|" "$pc" >"$work/pkgconfig/${pc##*/}"
done
export PKG_CONFIG_PATH="$work/pkgconfig"

# A copy of the package's sources, so that the build's files stay out of the tree.
cp -r "$source/python" "$work/source"
rm -rf "$work/source/build" "$work/source"/*.egg-info
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
python="$work/venv/bin/python"
"$python" -m pip install --no-build-isolation --no-index --no-deps "$work/source" \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail "pip install ./python failed"; }
echo "pip_install_test: $(grep -m1 '^Successfully installed' "$work/pip.log")"

# The installed package, with no PYTHONPATH: its files in the environment, its extension
# linked to the staged libraries.
unset PYTHONPATH
installed=$("$python" -c 'import hurray; print(hurray.__file__)')
[[ $installed == "$work/venv/"*/site-packages/hurray/__init__.py ]] ||
  fail "import hurray found $installed, not the environment's package"
version=$("$python" -c 'import hurray; print(hurray.__version__)')
[[ $version == "$(pkg-config --modversion hurray-client++)" ]] ||
  fail "hurray.__version__ is '$version', not the installed library's"
extension=$("$python" -c 'import hurray._hurray as e; print(e.__file__)')
linked=$(ldd "$extension" | sed -n 's/^\s*libhurray-client++\.so\.0 => \(\S*\).*/\1/p')
[[ $linked == "$libdir/"* ]] || fail "$extension loads libhurray-client++ from '$linked', not $libdir"
for file in py.typed __init__.pyi _hurray.pyi; do
  [[ -f $(dirname "$installed")/$file ]] || fail "the installed package has no $file"
done
echo "pip_install_test: hurray $version in $(dirname "$installed"), linked to $linked"

"$python" -m pytest -q -p no:cacheprovider "$source/tests/python" 2>&1 | tee "$work/pytest.log"
echo "pip_install_test: PASS"
