#!/usr/bin/env bash
# Runs the benchmark's GPU section (hurray_bench --sections 7, bench/section_gpu.cc) on
# softcuda, so that its harness cannot rot where there is no GPU. Asserts no timing: passes
# when the section runs to its end (exit 0), is labelled as a software driver's, is not
# skipped, and prints each of its rows for both tensor sets.
#   bench_section_7_test.sh HURRAY_BENCH HURRAYD
set -uo pipefail
bench="${1:?usage: bench_section_7_test.sh HURRAY_BENCH HURRAYD}"
hurrayd="${2:?usage: bench_section_7_test.sh HURRAY_BENCH HURRAYD}"
output="$("$bench" --hurrayd "$hurrayd" --sections 7 --quick --gpu-tensor-mib 64 \
          --software-driver-label 2>&1)"
status=$?
echo "$output"
# Section 7's part of the report: from its title to the next section's.
section="$(sed -n '/^7\. GPU exchange/,/^[0-9A-Z][^ ]*\. \|^Peer reference/p' <<< "$output")"
failed=0
fail() {
  echo "bench_section_7_test: $*" >&2
  failed=1
}
(( status == 0 )) || fail "hurray_bench exited $status"
grep -Fq "note: software driver: no GPU figure" <<< "$section" \
  || fail "section 7 is not labelled \"software driver: no GPU figure\""
grep -Fq "skipped" <<< "$section" && fail "section 7 was skipped"
for set in "64 MiB" "1000 x "; do
  for row in "acquire+map+wait, fresh process, $set" "acquire+map+wait, steady, $set" \
             "cuMemcpyDtoD device to device, $set" "copy through pinned host memory, $set" \
             "slab imports per slab in a fresh process, $set" \
             "ratio: acquire_first / cuMemcpyDtoD, $set" \
             "ratio: acquire_steady / cuMemcpyDtoD, $set"; do
    grep -Fq -- "$row" <<< "$section" || fail "no row \"$row\""
  done
done
exit "$failed"
