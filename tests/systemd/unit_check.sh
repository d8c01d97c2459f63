#!/usr/bin/env bash
# unit_check.sh UNIT SYSUSERS: `systemd-analyze verify UNIT` prints nothing and succeeds;
# `systemd-analyze security --offline=true UNIT` scores at most 2.0; SYSUSERS makes user and
# group hurray (not root) in an empty root. Exit 77 (skip) without systemd's tools.
set -euo pipefail
unit=$1
sysusers=$2
readonly max_exposure=2.0

for tool in systemd-analyze systemd-sysusers; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (Debian: systemd)"; exit 77; }
done
fail() { echo "FAIL: $*" >&2; exit 1; }

verify_output=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $verify_output"
[[ -z "$verify_output" ]] || fail "systemd-analyze verify $unit is not clean: $verify_output"
echo "systemd-analyze verify $unit: clean"

security_output=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1) ||
  fail "systemd-analyze security: $security_output"
overall=$(grep -E '^→ Overall exposure level for ' <<<"$security_output") ||
  fail "no 'Overall exposure level' line in: $security_output"
echo "$overall"
score=$(sed -E 's/.*: ([0-9]+\.[0-9]+) .*/\1/' <<<"$overall")
[[ "$score" =~ ^[0-9]+\.[0-9]+$ ]] || fail "no score in: $overall"
awk -v score="$score" -v max="$max_exposure" 'BEGIN { exit !(score <= max) }' ||
  fail "exposure $score is above $max_exposure: $security_output"
grep -qE '^User=hurray$' "$unit" || fail "$unit does not run as User=hurray"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc"
systemd-sysusers --root="$root" "$sysusers" ||
  fail "systemd-sysusers --root $root $sysusers failed"
user=$(grep -E '^hurray:' "$root/etc/passwd") || fail "$sysusers made no user hurray"
grep -qE '^hurray:' "$root/etc/group" || fail "$sysusers made no group hurray"
IFS=: read -r _ _ uid gid _ <<<"$user"
[[ "$uid" != 0 && "$gid" != 0 ]] || fail "user hurray is root: $user"
echo "systemd-sysusers: $user"
