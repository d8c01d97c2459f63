#!/usr/bin/env bash
# The two-process GPU demo against a hurrayd of its own, on a socket in a temporary
# directory: gpu_demo_consumer starts first and waits for the name, gpu_demo_producer fills
# BYTES of cuda:0 with a kernel and publishes with an Event handoff, the consumer's stream
# waits for it and a kernel checks every byte.
#   tests/cuda/gpu_demo.sh HURRAYD PRODUCER CONSUMER [BYTES]
# Prints both programs' output. Exits 77 (ctest's skip) when the producer finds no CUDA
# device, 1 when a step fails.
set -uo pipefail
hurrayd="${1:?usage: gpu_demo.sh HURRAYD PRODUCER CONSUMER [BYTES]}"
producer="${2:?usage}"
consumer="${3:?usage}"
bytes="${4:-1073741824}"

work="$(mktemp -d /tmp/hurray-gpu-demo-XXXXXX)"
daemon_pid=""
cleanup() {
  if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The device check first: no daemon to start on a machine without one.
probe="$("$producer" /nonexistent/socket 2>&1)"
if [[ "$probe" == *"skipped: no CUDA device"* ]]; then
  echo "gpu_demo: skipped: no CUDA device"
  exit 77
fi

socket="$work/d.sock"
"$hurrayd" --socket "$socket" --cpu-pool-capacity 64MiB --log-level warn \
  > "$work/hurrayd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 300); do
  [[ -S "$socket" && -S "$socket.session" ]] && break
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "gpu_demo: hurrayd exited; its log:" >&2
    cat "$work/hurrayd.log" >&2
    exit 1
  fi
  sleep 0.1
done

"$consumer" "$socket" demo/gpu 42 120000 > "$work/consumer.out" 2>&1 &
consumer_pid=$!
"$producer" "$socket" demo/gpu "$bytes" 42
producer_status=$?
wait "$consumer_pid"
consumer_status=$?
cat "$work/consumer.out"
if (( producer_status != 0 || consumer_status != 0 )); then
  echo "gpu_demo: FAILED (producer exit $producer_status, consumer exit $consumer_status);" \
       "hurrayd log:" >&2
  tail -n 50 "$work/hurrayd.log" >&2
  exit 1
fi
exit 0
