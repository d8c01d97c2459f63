#!/usr/bin/python3
"""Where one handoff's time goes: publish -> a waiting consumer has the view, as the kernel
saw it (docs/performance.md, "The handoff, step by step").

Starts a hurrayd of its own (a state directory, so the journal is written as in production)
and section 3's two workers (`hurray_bench worker handoff-producer` / `handoff-consumer`,
4 KiB, a new version of one name every 2 ms), everything pinned to one CPU unless
--unpinned; prints the handoff figures the consumer measured, hurrayd's CPU time and context
switches per handoff, and, with --trace (needs `perf`, Debian's linux-perf, and root), every
context switch and the system calls that matter of one handoff in the middle of the run, from
the producer's wake-up (it then allocates, writes the clock and publishes) to its next sleep.

    bench/handoff_timeline.py --build build-bench [--handoffs 300] [--unpinned] [--trace]
        [--spin-us US]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

TRACED = ("syscalls:sys_enter_sendmsg,syscalls:sys_exit_recvmsg,syscalls:sys_enter_write,"
          "syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_futex,"
          "syscalls:sys_enter_clock_nanosleep,sched:sched_switch")


def daemon_totals(pid):
    """hurrayd's CPU time (clock ticks) and context switches, all threads."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    switches = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status", encoding="ascii") as status:
            switches += sum(int(line.split()[1]) for line in status if "ctxt_switches" in line)
    return int(fields[11]) + int(fields[12]), switches


def print_one_handoff(data, pids):
    """The events of the handoff in the middle of the trace: from the producer's first
    request after a sleep to its next sleep."""
    script = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace"],
                            check=True, capture_output=True, text=True).stdout.splitlines()
    tids = set(pids.values())
    events = [line for line in script if line.split(maxsplit=1)[0] in tids]
    sleeps = [i for i, line in enumerate(events)
              if "clock_nanosleep" in line and line.split()[0] == pids["producer"]]
    if len(sleeps) < 3:
        print("too few handoffs traced")
        return
    middle = len(sleeps) // 2
    window = events[sleeps[middle - 1] + 1:sleeps[middle] + 1]
    # From the producer's first request (its allocate) after it woke.
    first = next(i for i, line in enumerate(window)
                 if line.split()[0] == pids["producer"] and "sendmsg" in line)
    names = {tid: name for name, tid in pids.items()}
    start = float(window[first].split()[1].rstrip(":"))
    for line in window[first:]:
        tid, stamp, rest = line.split(maxsplit=2)
        print(f"  {(float(stamp.rstrip(':')) - start) * 1e6:7.1f} us  {names.get(tid, tid):>14}"
              f"  {rest[:100]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--build", required=True, help="a build with hurrayd and hurray_bench")
    parser.add_argument("--handoffs", type=int, default=300)
    parser.add_argument("--unpinned", action="store_true")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--spin-us", type=int, default=0,
                        help="the consumer's AcquireOptions::spin (it polls its socket that long)")
    args = parser.parse_args()
    # bench/python's hurrayd of its own: a temporary directory, a state directory, a pool.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
    from bench_python import Daemon  # pylint: disable=import-outside-toplevel
    hurrayd = Daemon(os.path.join(args.build, "daemon/hurrayd"), 256 << 20)
    daemon, socket, directory = hurrayd.process, hurrayd.socket, hurrayd.directory
    try:
        time.sleep(1)  # The pool's reservation.
        cpu = [] if args.unpinned else ["taskset", "-c", str(max(os.sched_getaffinity(0)))]
        if cpu:
            for task in os.listdir(f"/proc/{daemon.pid}/task"):
                os.sched_setaffinity(int(task), {int(cpu[-1])})
        bench = os.path.join(args.build, "bench/hurray_bench")
        count = str(args.handoffs)
        consumer = subprocess.Popen(  # pylint: disable=consider-using-with
            cpu + [bench, "worker", "handoff-consumer", socket, "bench/handoff", count,
                   "default", str(args.spin_us)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        producer = subprocess.Popen(  # pylint: disable=consider-using-with
            cpu + [bench, "worker", "handoff-producer", socket, "bench/handoff", count, "2000"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for worker in (consumer, producer):
            if worker.stdout.readline().strip() != "ready":
                sys.exit("a worker did not start")
        perf = None
        data = os.path.join(directory, "perf.data")
        if args.trace:
            perf = subprocess.Popen(  # pylint: disable=consider-using-with
                ["perf", "record", "-a", "-e", TRACED, "-o", data], stderr=subprocess.DEVNULL)
            time.sleep(1)
        cpu_before, switches_before = daemon_totals(daemon.pid)
        for worker in (consumer, producer):
            worker.stdin.write("go\n")
            worker.stdin.flush()
        output = consumer.stdout.read()
        consumer.wait()
        producer.wait()
        cpu_after, switches_after = daemon_totals(daemon.pid)
        if perf:
            perf.send_signal(2)
            perf.wait()
        samples = sorted(int(line.split()[1]) / 1000 for line in output.splitlines()
                         if line.startswith("handoff_ns "))
        per = args.handoffs + 1
        ticks = os.sysconf("SC_CLK_TCK")
        print(f"{'unpinned' if args.unpinned else 'pinned to one CPU'}: handoff median "
              f"{statistics.median(samples):.1f} us, p90 "
              f"{samples[int(len(samples) * 0.9)]:.1f} us (n={len(samples)}); hurrayd per "
              f"handoff: {(cpu_after - cpu_before) / ticks / per * 1e6:.1f} us CPU, "
              f"{(switches_after - switches_before) / per:.2f} context switches")
        if perf:
            threads = sorted(os.listdir(f"/proc/{daemon.pid}/task"), key=int)
            pids = {"producer": str(producer.pid), "consumer": str(consumer.pid)}
            pids.update({f"hurrayd/{tid}": tid for tid in threads})
            print_one_handoff(data, pids)
    finally:
        hurrayd.stop()


if __name__ == "__main__":
    main()
