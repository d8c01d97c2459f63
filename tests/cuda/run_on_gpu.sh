#!/usr/bin/env bash
# The prepared GPU check (docs/gpu.md, "Tests and the GPU check"): the first run of the GPU
# path on a real device, to tell whether the driver does what the code assumes and whether
# the exchange works there. Runs on a bare GPU machine from the repository root and builds
# nothing. It takes the programs and libraries from the bundle (tests/cuda/bundle.sh) and,
# in under 5 minutes, one line per step:
#   1. cuda_device_check (tests/cuda/device_check.cc, driver API only): the driver, every
#      device's attributes, the cyclic GEQ, fence registration read-only and read-write, the
#      daemon's VMM path and a write through a read-only import; plus nvidia-smi's driver,
#      CC, MIG and compute mode. With no driver or no device, as the check decides, prints
#      "SUMMARY: SKIPPED", runs nothing else and exits 0;
#   2. daemon_cuda_pool_device_tests (CudaPool over real slabs, driver API only);
#   3. whether the test programs' CUDA runtime can use the driver; hurrayd links no libcuda,
#      serves the pool cuda:0 and stops cleanly;
#   4. cuda_exchange_test, ONE test per run (--gtest_filter), each under its own timeout of
#      45 s with its own XML: the read-only mapping, the exchange, the fresh importer, then
#      the rest in their listed order (the kill tests);
#   5. the two-process demo at 64 MiB, then at 1 GiB;
#   6. with --bench, the benchmark's GPU section (hurray_bench --sections 7 --quick; this
#      one may take the run past 5 minutes).
# Then prints ONE summary. Exits 1 when a step failed, or when any step was skipped although
# the check found a device; 0 only when every step passed, or when the check found no
# driver or no device.
#
#   tests/cuda/run_on_gpu.sh [--bench] [--driver-dir DIR] [BUNDLE]   (default: build/gpu-bundle)
#
# --driver-dir DIR (or HURRAY_GPU_CHECK_DRIVER_DIR=DIR) puts DIR first on LD_LIBRARY_PATH, so
# that every program loads DIR/libcuda.so.1: a dry run of this script's plumbing on softcuda
# (build/tests/softcuda/lib). A software driver is never a GPU result; the summary says so.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

usage="usage: run_on_gpu.sh [--bench] [--driver-dir DIR] [BUNDLE]"
run_bench=0
driver_dir="${HURRAY_GPU_CHECK_DRIVER_DIR:-}"
while (( $# > 0 )); do
  case "$1" in
    --bench) run_bench=1; shift ;;
    --driver-dir) driver_dir="${2:?$usage}"; shift 2 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
bundle="${1:-build/gpu-bundle}"
bin="$bundle/bin"
if [[ ! -x "$bin/hurrayd" || ! -x "$bin/cuda_device_check" ]]; then
  echo "run_on_gpu.sh: no bundle at $bundle (run tests/cuda/bundle.sh)" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -n "$driver_dir" ]]; then
  driver_dir="$(cd "$driver_dir" && pwd)" || exit 2
  [[ -e "$driver_dir/libcuda.so.1" ]] || { echo "run_on_gpu.sh: no $driver_dir/libcuda.so.1" >&2; exit 2; }
  export LD_LIBRARY_PATH="$driver_dir:$LD_LIBRARY_PATH"
fi
work="$(mktemp -d /tmp/hurray-gpu-check-XXXXXX)"
started=$SECONDS
# The whole run stays under 5 minutes: the tests' timeouts shrink to what is left of this,
# keeping enough for the demo.
budget_s=290
demo_reserve_s=75
summary=()
failures=0
skipped=0
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
  [[ "$1" == SKIP ]] && skipped=$((skipped + 1))
  echo "== $1 $2 $3"
}

# seconds_left RESERVE: what is left of the budget once RESERVE seconds are kept back.
seconds_left() {
  echo $((budget_s - (SECONDS - started) - $1))
}

# gtest_lines LOG SUITE: one summary line per test result in a gtest log.
gtest_lines() {
  local line name took
  while read -r line; do
    name="$(awk '{ print $4 }' <<< "$line")"
    took="$(grep -o '([0-9]* ms)' <<< "$line")"
    case "$line" in
      *" OK ]"*) record PASS "$name" "$took" ;;
      *"FAILED"*) record FAIL "$name" "$took" ;;
      *"SKIPPED"*) record SKIP "$name" "$(grep -m1 -o 'skipped: .*\|Skipped' "$1" | head -n1)" ;;
    esac
  done < <(grep -E "^\[ +(OK|FAILED|SKIPPED) +\] $2\.[A-Za-z0-9_]+ \(" "$1")
}

# 1. The device check. It alone decides "no driver or no device": then one SKIP line, exit 0.
timeout 120 "$bin/cuda_device_check" > "$work/device_check.txt" 2> "$work/device_check.err"
check_status=$?
check_lines="$(grep -cE '^(PASS|FAIL|INFO|SKIP) ' "$work/device_check.txt")"
if (( check_status == 0 && check_lines == 1 )) \
    && grep -qE '^SKIP no CUDA (driver|device)' "$work/device_check.txt"; then
  echo "run_on_gpu.sh: $(cat "$work/device_check.txt"): nothing was run"
  echo "SUMMARY: SKIPPED ($(cut -d' ' -f2-4 "$work/device_check.txt"))"
  exit 0
fi
if [[ -n "$driver_dir" ]]; then
  record INFO "driver directory (dry run)" \
    "$driver_dir/libcuda.so.1 first on LD_LIBRARY_PATH: not a GPU result unless it is NVIDIA's"
fi
if command -v nvidia-smi > /dev/null; then
  record INFO "nvidia-smi -L" "$(timeout 20 nvidia-smi -L 2>&1 | head -n 4 | tr '\n' ';')"
  record INFO "nvidia-smi driver, compute mode, MIG mode" "$(timeout 20 nvidia-smi \
    --query-gpu=driver_version,compute_mode,mig.mode.current --format=csv,noheader 2>&1 \
    | head -n 4 | tr '\n' ';')"
  record INFO "nvidia-smi CC mode" \
    "$(timeout 20 nvidia-smi conf-compute -f 2>&1 | head -n 2 | tr '\n' ';')"
else
  record INFO "nvidia-smi" "not available: no driver version, CC, MIG or compute mode from it"
fi
while read -r status step detail; do
  record "$status" "device check: $step" "$detail"
done < <(grep -E '^(PASS|FAIL|INFO|SKIP) ' "$work/device_check.txt")
if (( check_status != 0 )) && ! grep -q '^FAIL ' "$work/device_check.txt"; then
  record FAIL "device check" "exit $check_status with no FAIL line (124: timed out); stderr:\
 $(tail -n 3 "$work/device_check.err" | tr '\n' ' ')"
fi

# 2. CudaPool over real slabs.
timeout 60 "$bin/daemon_cuda_pool_device_tests" \
  --gtest_output="xml:$work/daemon_cuda_pool_device_tests.xml" > "$work/pool_tests.log" 2>&1
pool_status=$?
gtest_lines "$work/pool_tests.log" CudaPoolDeviceTest
if (( pool_status != 0 )); then
  record FAIL "daemon_cuda_pool_device_tests" "exit $pool_status"
  grep -E 'Failure|Expected|Which is|actual|error' "$work/pool_tests.log" | head -n 20
fi

# 3. The test programs' CUDA runtime (statically linked; CUDA 13 needs an R580+ driver),
# then hurrayd: no libcuda, and the pool cuda:0.
probe="$(timeout 30 "$bin/gpu_demo_producer" /nonexistent 2>&1 | head -n 3 | tr '\n' ' ')"
if [[ "$probe" == *"cudaGetDeviceCount"* || "$probe" == *"skipped: no CUDA device"* ]]; then
  record FAIL "the test programs' CUDA runtime sees the device" "$probe"
else
  record PASS "the test programs' CUDA runtime sees the device" "${probe:0:200}"
fi
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

# 4. The GPU tests: one process each, so that a test that hangs loses only its own result.
first_tests=(ConsumerWriteThroughReadOnlyMappingIsRefused ProducerKernelDataReachesConsumerStream
             FreshProcessImportsEachSlabOnce)
listed=()
while read -r name; do
  listed+=("$name")
done < <(timeout 30 "$bin/cuda_exchange_test" --gtest_list_tests 2>/dev/null \
           | awk '/^CudaExchangeTest\./ { suite = 1; next } /^[^ ]/ { suite = 0 }
                  suite && /^  [A-Za-z0-9_]+/ { print $1 }')
if (( ${#listed[@]} == 0 )); then
  record FAIL "cuda_exchange_test --gtest_list_tests" "listed no CudaExchangeTest test"
fi
ordered=()
for name in "${first_tests[@]}"; do
  if printf '%s\n' "${listed[@]}" | grep -qx "$name"; then
    ordered+=("$name")
  else
    record FAIL "CudaExchangeTest.$name" "not in cuda_exchange_test --gtest_list_tests"
  fi
done
for name in "${listed[@]}"; do
  printf '%s\n' "${first_tests[@]}" | grep -qx "$name" || ordered+=("$name")
done
for name in "${ordered[@]}"; do
  limit=$(seconds_left "$demo_reserve_s")
  (( limit > 45 )) && limit=45
  if (( limit < 10 )); then
    record FAIL "CudaExchangeTest.$name" "not run: the 5-minute budget is spent"
    continue
  fi
  log="$work/cuda_$name.log"
  HURRAY_TEST_HURRAYD="$PWD/$bin/hurrayd" HURRAY_TEST_CUDA_AGENT="$PWD/$bin/hurray_cuda_agent" \
    timeout "$limit" "$bin/cuda_exchange_test" --gtest_filter="CudaExchangeTest.$name" \
    --gtest_output="xml:$work/cuda_$name.xml" > "$log" 2>&1
  test_status=$?
  before=${#summary[@]}
  gtest_lines "$log" CudaExchangeTest
  if (( ${#summary[@]} == before )); then
    if (( test_status == 124 )); then
      record FAIL "CudaExchangeTest.$name" "no result: killed after $limit s"
    elif (( test_status > 128 )); then
      record FAIL "CudaExchangeTest.$name" "no result: killed by signal $((test_status - 128))"
    else
      record FAIL "CudaExchangeTest.$name" "no result: exit $test_status"
    fi
  elif (( test_status != 0 )) && [[ "${summary[-1]}" != FAIL* ]]; then
    record FAIL "CudaExchangeTest.$name" "exit $test_status"
  fi
  if (( test_status != 0 )); then
    grep -A 5 -E 'Failure$' "$log" | grep -vE '^(--|Expected: true)$' | head -n 20
  fi
done
mapping="$(cat "$work"/cuda_*.xml 2>/dev/null | grep -o 'consumer_mapping="[^"]*"' | head -n1)"
[[ -n "$mapping" ]] && record INFO "consumer's mapping, as cuMemGetAccess reports it" "$mapping"

# 5. The two-process demo, 64 MiB then 1 GiB.
for size in 67108864:64MiB 1073741824:1GiB; do
  bytes="${size%%:*}"
  label="demo: ${size##*:}, kernel fill, Event publish, kernel check"
  limit=$(seconds_left 0)
  (( limit > 60 )) && limit=60
  if (( limit < 10 )); then
    record FAIL "$label" "not run: the 5-minute budget is spent"
    continue
  fi
  demo_start=$SECONDS
  demo="$(timeout "$limit" tests/cuda/gpu_demo.sh "$bin/hurrayd" "$bin/gpu_demo_producer" \
            "$bin/gpu_demo_consumer" "$bytes" 2>&1)"
  demo_status=$?
  echo "$demo"
  verified="$(grep -m1 '^verified' <<< "$demo")"
  if (( demo_status == 0 )) && [[ "$verified" == *" 0 mismatches"* ]]; then
    record PASS "$label" "$verified"
  elif (( demo_status == 77 )); then
    record SKIP "$label" "$(head -n1 <<< "$demo")"
  else
    record FAIL "$label" "exit $demo_status; ${verified:-nothing verified}"
  fi
  while read -r line; do
    [[ -n "$line" ]] && record INFO "demo ${size##*:} timing" "$line"
  done < <(grep '^timing' <<< "$demo")
  record INFO "demo ${size##*:} took" "$((SECONDS - demo_start)) s"
done

# 6. The benchmark's GPU section.
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
[[ -n "$driver_dir" ]] && echo "(driver from $driver_dir: a dry run, not a GPU result)"
if (( failures > 0 )); then
  echo "SUMMARY: FAIL ($failures step(s) failed, $skipped skipped)"
  exit 1
fi
if (( skipped > 0 )); then
  echo "SUMMARY: INCOMPLETE ($skipped step(s) skipped although the device check found a device)"
  exit 1
fi
echo "SUMMARY: PASS"
