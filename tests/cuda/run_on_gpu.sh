#!/usr/bin/env bash
# The prepared GPU check (issue 9): runs on a bare GPU machine from the repository root and
# builds nothing. It takes the programs and libraries from the bundle (tests/cuda/bundle.sh)
# and, in under 5 minutes:
#   1. says which GPU and driver it sees (or, with no driver or no device, prints "no CUDA
#      device", runs nothing and exits 0; a driver the programs' CUDA runtime cannot use is
#      a failure, never a skip);
#   2. checks that hurrayd links no libcuda, starts it on a temporary socket and expects
#      the pool cuda:0 in `hurrayctl stats`;
#   3. runs the GPU tests (cuda_exchange_test: the exchange, a 1,000-tensor set imported
#      once per slab, kill -9 of the producer before and after its fence, kill -9 of a
#      waiting consumer, the daemon stopping mid-wait, a write through the read-only
#      mapping), one line per test;
#   4. runs the two-process demo (1 GiB on device 0: kernel fill, Event publish, the
#      consumer's stream waits and a kernel checks every byte);
#   5. with --bench, the benchmark's GPU section (hurray_bench --sections 7 --quick).
# Then prints ONE summary: PASS/FAIL per step, bytes verified, timings. Exits 1 when any
# step failed.
#
#   tests/cuda/run_on_gpu.sh [--bench] [BUNDLE]          (default: build/gpu-bundle)
set -uo pipefail
cd "$(dirname "$0")/../.."

run_bench=0
if [[ "${1:-}" == "--bench" ]]; then
  run_bench=1
  shift
fi
bundle="${1:-build/gpu-bundle}"
bin="$bundle/bin"
if [[ ! -x "$bin/hurrayd" ]]; then
  echo "run_on_gpu.sh: no bundle at $bundle (run tests/cuda/bundle.sh)" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work="$(mktemp -d /tmp/hurray-gpu-check-XXXXXX)"
started=$SECONDS
summary=()
failures=0
daemon_pid=""

cleanup() {
  [[ -n "$daemon_pid" ]] && kill -KILL "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# record STATUS STEP DETAIL: one line of the summary.
record() {
  summary+=("$(printf '%-4s  %-58s %s' "$1" "$2" "$3")")
  [[ "$1" == FAIL ]] && failures=$((failures + 1))
  echo "== $1 $2 $3"
}

# 1. The device. SKIPPED only when there is no driver or no device; a driver the statically
# linked CUDA runtime cannot use (older than it needs, a mismatch) is a failure, named.
probe="$("$bin/gpu_demo_producer" /nonexistent 2>&1)"
if [[ "$probe" == *"skipped: no CUDA device"* ]]; then
  echo "run_on_gpu.sh: no CUDA device: nothing was run"
  echo "SUMMARY: SKIPPED (no CUDA device)"
  exit 0
fi
gpus="$(nvidia-smi -L 2>/dev/null | head -n 4 | tr '\n' ';')"
record INFO "device" "${gpus:-nvidia-smi not available}"
driver="$(nvidia-smi --query-gpu=driver_version,compute_mode --format=csv,noheader 2>/dev/null \
  | head -n 1)"
record INFO "driver, compute mode" "${driver:-nvidia-smi not available}"
if [[ "$probe" == *"cudaGetDeviceCount"* ]]; then
  record FAIL "CUDA runtime sees the driver" "$(grep -m1 cudaGetDeviceCount <<< "$probe")"
fi

# 2. hurrayd: no libcuda, and the pool cuda:0.
if ldd "$bin/hurrayd" | grep -q 'libcuda\.so'; then
  record FAIL "hurrayd links no libcuda" "$(ldd "$bin/hurrayd" | grep libcuda)"
else
  record PASS "hurrayd links no libcuda" ""
fi
socket="$work/d.sock"
"$bin/hurrayd" --socket "$socket" --cpu-pool-capacity 64MiB --log-level info \
  > "$work/hurrayd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 300); do
  [[ -S "$socket.session" ]] && break
  sleep 0.1
done
stats="$(timeout 30 "$bin/hurrayctl" --socket "$socket" stats 2>&1)"
if grep -q 'cuda:0' <<< "$stats"; then
  record PASS "hurrayd serves the pool cuda:0" "$(grep -m1 'cuda:0' <<< "$stats" | tr -s ' ')"
else
  record FAIL "hurrayd serves the pool cuda:0" "stats: $(head -c 300 <<< "$stats" | tr '\n' ' ')"
  tail -n 20 "$work/hurrayd.log"
fi
kill -TERM "$daemon_pid"
if wait "$daemon_pid"; then
  record PASS "hurrayd stops cleanly (SIGTERM)" ""
else
  record FAIL "hurrayd stops cleanly (SIGTERM)" "exit $?"
fi
daemon_pid=""

# 3. The GPU tests, one line each.
test_start=$SECONDS
HURRAY_TEST_HURRAYD="$PWD/$bin/hurrayd" HURRAY_TEST_CUDA_AGENT="$PWD/$bin/hurray_cuda_agent" \
  timeout 200 "$bin/cuda_exchange_test" --gtest_output="xml:$work/cuda_tests.xml" \
  > "$work/cuda_tests.log" 2>&1
tests_status=$?
test_lines='^\[ +(OK|FAILED|SKIPPED) +\] CudaExchangeTest\.[A-Za-z]+ \('
while read -r line; do
  name="$(awk '{ print $4 }' <<< "$line")"
  took="$(grep -o '([0-9]* ms)' <<< "$line")"
  case "$line" in
    *" OK ]"*) record PASS "$name" "$took" ;;
    *"FAILED"*) record FAIL "$name" "$took" ;;
    *"SKIPPED"*) record SKIP "$name" "" ;;
  esac
done < <(grep -E "$test_lines" "$work/cuda_tests.log")
mapping="$(grep -o 'consumer_mapping="[^"]*"' "$work/cuda_tests.xml" 2>/dev/null | head -n1)"
[[ -n "$mapping" ]] && record INFO "consumer's mapping, as cuMemGetAccess reports it" "$mapping"
if (( tests_status != 0 )); then
  record FAIL "cuda_exchange_test" "exit $tests_status after $((SECONDS - test_start)) s"
  grep -E 'Failure|Expected|Which is|actual|error' "$work/cuda_tests.log" | head -n 30
else
  record PASS "cuda_exchange_test" "$((SECONDS - test_start)) s"
fi

# 4. The two-process demo.
demo_start=$SECONDS
demo="$(timeout 120 tests/cuda/gpu_demo.sh "$bin/hurrayd" "$bin/gpu_demo_producer" \
          "$bin/gpu_demo_consumer" 2>&1)"
demo_status=$?
echo "$demo"
verified="$(grep -m1 '^verified' <<< "$demo")"
if (( demo_status == 0 )) && [[ "$verified" == *" 0 mismatches"* ]]; then
  record PASS "demo: 1 GiB, kernel fill, Event publish, kernel check" "$verified"
else
  record FAIL "demo: 1 GiB, kernel fill, Event publish, kernel check" \
    "exit $demo_status; ${verified:-nothing verified}"
fi
while read -r line; do
  [[ -n "$line" ]] && record INFO "demo timing" "$line"
done < <(grep '^timing' <<< "$demo")
record INFO "demo took" "$((SECONDS - demo_start)) s"

# 5. The benchmark's GPU section.
if (( run_bench )); then
  if [[ -x "$bin/hurray_bench" ]]; then
    timeout 240 "$bin/hurray_bench" --hurrayd "$PWD/$bin/hurrayd" --sections 7 --quick \
      > "$work/bench.txt" 2>&1
    bench_status=$?
    cat "$work/bench.txt"
    if (( bench_status == 0 )); then record PASS "bench section 7" ""; else
      record FAIL "bench section 7" "exit $bench_status"; fi
  else
    record FAIL "bench section 7" "hurray_bench is not in the bundle"
  fi
fi

echo
echo "================ GPU check summary ($((SECONDS - started)) s) ================"
printf '%s\n' "${summary[@]}"
if (( failures > 0 )); then
  echo "SUMMARY: FAIL ($failures step(s) failed)"
  exit 1
fi
echo "SUMMARY: PASS"
