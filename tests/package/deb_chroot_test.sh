#!/usr/bin/env bash
# The .deb in a fresh Debian 12 root: makes the package (cpack in a build for the prefix /usr,
# or packaging/build-deb.sh in a build of its own), checks its
# contents and control files, installs it with apt-get into a copy of a debootstrap minbase
# root (its Depends come from the mirror), checks the installed files and the user, runs
# `hurrayd --print-config`, starts hurrayd as user hurray the way the unit does, puts and gets
# a tensor with hurrayctl and calls it from the Python module as a member of group hurray,
# stops the daemon and purges the package.
# Everything mounted is unmounted on any exit. Needs root (exit 77 without it).
#   deb_chroot_test.sh SOURCE_DIR WORK_DIR --cpack BUILD_DIR   packages BUILD_DIR (prefix /usr)
#   deb_chroot_test.sh SOURCE_DIR WORK_DIR [CMAKE_ARG...]      builds WORK_DIR/build-package
# WORK_DIR keeps the debootstrap root and apt's downloads between runs (debian12-base/,
# apt-archives/); HURRAY_DEBIAN_MIRROR overrides the mirror.
set -euo pipefail

source=$1
mkdir -p "$2"
work=$(cd "$2" && pwd)
shift 2
mirror=${HURRAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [[ $(id -u) -ne 0 ]]; then
  echo "deb_chroot_test: SKIP: needs root (debootstrap, chroot, mount)"
  exit 77
fi
command -v debootstrap >/dev/null || { echo "deb_chroot_test: FAIL: no debootstrap" >&2; exit 1; }
fail() { echo "deb_chroot_test: FAIL: $*" >&2; exit 1; }
step() { echo "deb_chroot_test: [$(date +%T)] $*"; }
root="$work/root"
mounts=()
daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -KILL "$daemon_pid"
    wait "$daemon_pid" 2>/dev/null || true
  fi
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}"
  done
}
trap cleanup EXIT
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

if [[ ${1:-} == --cpack ]]; then
  step "cpack in $2"
  rm -rf "$work/cpack"
  (cd "$2" && cpack -G DEB -B "$work/cpack" >"$work/cpack.log" 2>&1) ||
    { cat "$work/cpack.log"; fail "cpack"; }
  deb=$(ls "$work"/cpack/hurray_*.deb)
else
  step "building the package in $work/build-package"
  deb=$("$source/packaging/build-deb.sh" "$work/build-package" "$@" | tail -n 1)
fi
[[ -f $deb ]] || fail "packaging/build-deb.sh made no .deb"
step "package: $deb"

# Contents and control files, before anything is installed.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
listing=$(dpkg-deb --contents "$deb")
contents=$(awk '{print $6}' <<<"$listing")
expected=(./usr/bin/hurrayd ./usr/bin/hurrayctl
  ./usr/lib/$multiarch/libhurray.so.0.1.0 ./usr/lib/$multiarch/libhurray-client.so.0.1.0
  ./usr/lib/$multiarch/libhurray-client++.so.0.1.0
  ./usr/include/hurray.h ./usr/include/hurray_client.h ./usr/include/hurray/client.h
  ./usr/lib/$multiarch/cmake/hurray/hurray-config.cmake
  ./usr/lib/$multiarch/cmake/hurray/hurray-config-version.cmake
  ./usr/lib/$multiarch/cmake/hurray/hurray-targets.cmake
  ./usr/lib/$multiarch/pkgconfig/hurray.pc ./usr/lib/$multiarch/pkgconfig/hurray-client.pc
  ./usr/lib/$multiarch/pkgconfig/hurray-client++.pc
  ./usr/lib/systemd/system/hurrayd.service ./usr/lib/sysusers.d/hurray.conf
  ./etc/hurray/hurrayd.toml ./usr/share/doc/hurray/operations.md)
for path in "${expected[@]}"; do
  grep -qxF "$path" <<<"$contents" || fail "the package lacks $path"
done
for link in libhurray.so libhurray.so.0 libhurray-client.so libhurray-client.so.0 \
            libhurray-client++.so libhurray-client++.so.0; do
  grep -q "$multiarch/$link -> " <<<"$listing" || fail "the package lacks link $link"
done
control=$(dpkg-deb --field "$deb" Package Depends)
step "control: $(tr '\n' ' ' <<<"$control")"
grep -q 'Depends:.*libprotobuf' <<<"$control" || fail "Depends lacks the shared libraries' packages"
grep -q 'systemd' <<<"$control" || fail "Depends lacks systemd-sysusers' package"
[[ $(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) == /etc/hurray/hurrayd.toml ]] ||
  fail "conffiles is not /etc/hurray/hurrayd.toml"
# shlibs: a package built against any of the three libraries depends on this very version.
shlibs=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./shlibs)
for lib in libhurray libhurray-client libhurray-client++; do
  grep -qxF "$lib 0 hurray (= $(dpkg-deb --field "$deb" Version))" <<<"$shlibs" ||
    fail "shlibs lacks $lib 0 hurray (= VERSION): $shlibs"
done
unit=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/hurrayd.service)
grep -q "^ExecStart=/usr/bin/hurrayd " <<<"$unit" || fail "the unit does not run /usr/bin/hurrayd"

# A minbase Debian 12 root, made once and copied for each run.
if [[ ! -e $work/debian12-base/.complete ]]; then
  step "debootstrap bookworm from $mirror (cached in $work/debian12-base)"
  rm -rf "$work/debian12-base.tmp"
  debootstrap --variant=minbase bookworm "$work/debian12-base.tmp" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log"; fail "debootstrap"; }
  touch "$work/debian12-base.tmp/.complete"
  mv "$work/debian12-base.tmp" "$work/debian12-base"
fi
step "a fresh root from the cached base"
rm -rf "$root"
cp -a "$work/debian12-base" "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$work/apt-archives/partial"
mount -t proc proc "$root/proc" && mounts+=("$root/proc")
mount -t tmpfs -o size=256m,mode=1777 shm "$root/dev/shm" && mounts+=("$root/dev/shm")
mount --bind "$work/apt-archives" "$root/var/cache/apt/archives" &&
  mounts+=("$root/var/cache/apt/archives")
cp "$deb" "$root/tmp/"

step "apt-get install ./$(basename "$deb")"
in_root apt-get -q update >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get update"; }
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "/tmp/$(basename "$deb")" >>"$work/apt.log" 2>&1 ||
  { tail -n 40 "$work/apt.log"; fail "apt-get install"; }
status=$(in_root dpkg-query -W -f='${db:Status-Status}' hurray)
[[ $status == installed ]] || fail "hurray is '$status', not installed"
for path in "${expected[@]}"; do
  [[ -e $root/${path#./} ]] || fail "installed root lacks ${path#./}"
done
passwd=$(in_root getent passwd hurray) || fail "postinst made no user hurray"
in_root getent group hurray >/dev/null || fail "postinst made no group hurray"
step "user: $passwd"

step "hurrayd --print-config"
in_root hurrayd --print-config >"$work/print-config.txt" || fail "hurrayd --print-config"
grep -q '^\[cpu_pool\]' "$work/print-config.txt" || fail "--print-config printed no [cpu_pool]"

# As the unit runs it: user and group hurray, /run/hurray as its RuntimeDirectory,
# /var/lib/hurray as its StateDirectory, the installed configuration (with a pool that fits
# this root's /dev/shm).
install -d -m 0750 "$root/run/hurray"
in_root chown hurray:hurray /run/hurray
install -d -m 0700 "$root/var/lib/hurray"
in_root chown hurray:hurray /var/lib/hurray
step "hurrayd as user hurray"
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin RUNTIME_DIRECTORY=/run/hurray \
  STATE_DIRECTORY=/var/lib/hurray \
  setpriv --reuid=hurray --regid=hurray --init-groups --inh-caps=-all \
  /usr/bin/hurrayd --config /etc/hurray/hurrayd.toml --cpu-pool-capacity 64MiB \
  >"$work/hurrayd.log" 2>&1 &
daemon_pid=$!
in_root useradd --create-home --groups hurray alice
as_alice() { in_root setpriv --reuid=alice --regid=alice --init-groups "$@"; }
socket=/run/hurray/hurrayd.sock
for _ in $(seq 300); do
  as_alice hurrayctl --socket "$socket" stats >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/hurrayd.log"; fail "hurrayd exited"; }
  sleep 0.05
done
uid=$(awk '/^Uid:/ {print $2}' "/proc/$daemon_pid/status")
[[ $uid == "$(in_root id -u hurray)" ]] || fail "hurrayd runs as uid $uid, not hurray's"
step "hurrayd serves as $(in_root id -un "$uid") (uid $uid);" \
  "socket $(in_root stat -c '%U:%G %a' "$socket")"

# A tensor in and out as alice, a member of group hurray: 1 KiB of uint8, .npy v1.0.
header="{'descr': '|u1', 'fortran_order': False, 'shape': (1024,), }"
header=$(printf '%-117s' "$header")
{ printf '\x93NUMPY\x01\x00\x76\x00%s\n' "$header"; head -c 1024 /dev/urandom; } >"$root/tmp/in.npy"
chmod 644 "$root/tmp/in.npy"
as_alice hurrayctl --socket "$socket" put package/tensor /tmp/in.npy || fail "hurrayctl put"
as_alice hurrayctl --socket "$socket" get package/tensor /tmp/out.npy || fail "hurrayctl get"
cmp <(tail -c 1024 "$root/tmp/in.npy") <(tail -c 1024 "$root/tmp/out.npy") ||
  fail "get returned other bytes than put"
as_alice hurrayctl --socket "$socket" ls

# The Python module with Debian's python3 and numpy (the package's Recommends).
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  python3-numpy >>"$work/apt.log" 2>&1 ||
  { tail -n 20 "$work/apt.log"; fail "apt-get install python3-numpy"; }
as_alice python3 -c "import hurray
with hurray.connect('$socket', name='package-test') as client:
    client.stats()
print('python3: import hurray, connect and stats OK')" || fail "the Python module"

kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "hurrayd exited with $? on SIGTERM; log: $(cat "$work/hurrayd.log")"
daemon_pid=
step "hurrayd stopped on SIGTERM"

in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q hurray >>"$work/apt.log" 2>&1 ||
  fail "apt-get purge"
[[ ! -e $root/usr/bin/hurrayd && ! -e $root/etc/hurray/hurrayd.toml ]] || fail "purge left files"
# The stopped daemon kept its segments for the tensors its journal held; the removal
# discarded them, and the purge the state directory.
[[ ! -e $root/var/lib/hurray ]] || fail "purge left /var/lib/hurray"
leftover=$(find "$root/dev/shm" -maxdepth 1 -name 'hurray-*' | wc -l)
[[ $leftover -eq 0 ]] || fail "removal left $leftover segments in /dev/shm"
step "PASS"
