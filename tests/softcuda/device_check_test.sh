#!/usr/bin/env bash
# Runs the GPU device check (tests/cuda/device_check.cc) on softcuda and holds it to what
# softcuda must give: exit 0, no FAIL or SKIP line, and a line starting with each EXPECTED.
#   device_check_test.sh CHECK_PROGRAM [EXPECTED...]
set -uo pipefail
check="${1:?usage: device_check_test.sh CHECK_PROGRAM [EXPECTED...]}"
shift
output="$("$check" 2>&1)"
status=$?
echo "$output"
failed=0
if (( status != 0 )); then
  echo "device_check_test: the check exited $status" >&2
  failed=1
fi
if grep -Eq '^(FAIL|SKIP) ' <<< "$output"; then
  echo "device_check_test: FAIL or SKIP lines:" >&2
  grep -E '^(FAIL|SKIP) ' <<< "$output" >&2
  failed=1
fi
for expected in "$@"; do
  if ! grep -Fxq -- "$expected" <<< "$(grep -E '^(PASS|FAIL|INFO|SKIP) ' <<< "$output" \
                                       | cut -d' ' -f1-2)"; then
    echo "device_check_test: no line \"$expected\"" >&2
    failed=1
  fi
done
exit "$failed"
