#!/usr/bin/python3
"""The Python section of `make bench`: handing a tensor from one Python process to another.

Contenders, each a pair of fresh processes (a producer and a consumer, started with the
"spawn" method) that hand the same uint64 tensor over, the way Python users do it today:

  hurray          client.empty() + fill in place + publish(); the consumer acquire()s and
                  reads view.numpy() (zero-copy: the consumer maps the producer's pages).
                  A new name each round: the daemon holds the consumer's wait.
  hurray_stream   the same, each round the next version of one name (the loop "wait for
                  the next weights / KV block"): the daemon holds the consumer's wait on the
                  session socket and answers it from the publishing thread.
  hurray_spin     hurray_stream with a consumer that polls its socket for the answer
                  (acquire(spin=...)) instead of sleeping: for a consumer with a CPU core
                  of its own, so it is compared unpinned only (run it on a host with a
                  core to spare for it).
  torch_mp        torch.multiprocessing: a CPU tensor in shared memory (share_memory_())
                  sent through a torch.multiprocessing Queue; the consumer reads .numpy().
  shared_memory   multiprocessing.shared_memory.SharedMemory + an ndarray over it; the name,
                  shape and dtype pickled through a Pipe; the consumer attaches and reads.
  pickle_pipe     the ndarray itself pickled through a multiprocessing Pipe (a copy).

Each round: the consumer says it is ready and blocks on its channel; the producer fills a
new tensor (untimed), takes t0 and hands it over; the consumer takes t1 once it holds an
ndarray over the data and t2 once it has read every byte (a checksum, verified). t0, t1 and
t2 are CLOCK_MONOTONIC, one clock for every process. "handoff" is t1 - t0, "handoff+read"
t2 - t0. "first" is the first round of a fresh process pair (its first mapping, first
page faults); "steady" every later round of the same pair. Ratios are taken within the run.
For the hurray contenders two more lines split the handoff: "publish returned" (the
producer's publish() call, t0 to its return) and "acquire returned" (t0 to the consumer's
acquire() returning, before view.numpy()).

--idle-ms N makes every producer sleep N ms between filling the tensor and t0, so that every
process of the pair has been idle that long when the handoff starts (a large tensor's fill
does the same): it shows what waking idle CPUs adds to each contender's handoff.

A last part times Python `client.acquire(name).release()` against the C++ client's
acquire+release of the same 4 KiB tensor on the same daemon, in the same run, through
hurray_bench's own measuring process (`hurray_bench worker control-acquire-release`, the
one section 3 of the C++ bench uses).

Run: PYTHONPATH=build-bench/python /usr/bin/python3 bench/python/bench_python.py \
       --hurrayd build-bench/daemon/hurrayd --hurray-bench build-bench/bench/hurray_bench \
       --json build-bench/bench_python.json [--quick]
"""

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KIB = 1024
GIB = 1024 * 1024 * 1024
PATTERN_MULTIPLIER = 0x9E3779B97F4A7C15  # word i holds i * PATTERN_MULTIPLIER (mod 2**64)
FILL_CHUNK_WORDS = 1 << 21
WAIT_SECONDS = 120.0
SIZE_NAMES = {4 * KIB: "4KiB", 64 * 1024 * KIB: "64MiB", GIB: "1GiB"}


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def fill_pattern(array):
    """Fills a flat uint64 ndarray with the position-dependent pattern, chunk by chunk."""
    import numpy as np
    for start in range(0, array.size, FILL_CHUNK_WORDS):
        stop = min(start + FILL_CHUNK_WORDS, array.size)
        np.multiply(np.arange(start, stop, dtype=np.uint64), np.uint64(PATTERN_MULTIPLIER),
                    out=array[start:stop])


def pattern_checksum(words):
    return (PATTERN_MULTIPLIER * (words * (words - 1) // 2)) % (1 << 64)


def read_every_byte(array):
    """The wrapping sum of every uint64 word: reads each byte once."""
    import numpy as np
    return int(np.add.reduce(array, dtype=np.uint64))


# ---------------------------------------------------------------------------------------
# The contenders. Each is a pair of functions run in child processes:
#   producer(setup, control, words, rounds) and consumer(setup, control, words, rounds).
# `setup` is what the coordinator made for the pair (a queue, a pipe, a socket path);
# `control` a Pipe end to the coordinator: "go" per round, timings back.
# ---------------------------------------------------------------------------------------

def hurray_round(setup, round_index):
    """The name and version a hurray round hands over: a new name each round (version
    None: the latest), or with setup["stream"] version round_index + 1 of one name."""
    if setup["stream"]:
        return f"{setup['prefix']}/stream", round_index + 1
    return f"{setup['prefix']}/{round_index}", None


def idle(setup):
    """The pause of --idle-ms between filling and t0 (none by default)."""
    if setup["idle_s"] > 0:
        time.sleep(setup["idle_s"])


def hurray_producer(setup, control, words, rounds):
    import hurray
    import numpy as np
    with hurray.connect(socket=setup["socket"], name="bench-producer") as client:
        control.send("ready")
        for round_index in range(rounds):
            control.recv()
            name, _ = hurray_round(setup, round_index)
            tensor = client.empty((words,), hurray.dtype(np.uint64))
            fill_pattern(tensor.numpy())
            idle(setup)
            t0 = now_ns()
            tensor.publish(name)
            control.send((t0, {"publish_returned": now_ns() - t0}))
            control.recv()  # the consumer is done with it
            if not setup["stream"]:
                client.delete(name)
        if setup["stream"]:
            client.delete(hurray_round(setup, 0)[0])


def hurray_consumer(setup, control, words, rounds):
    import hurray
    with hurray.connect(socket=setup["socket"], name="bench-consumer") as client:
        control.send("ready")
        for round_index in range(rounds):
            control.recv()
            control.send("waiting")
            name, version = hurray_round(setup, round_index)
            # spin= only when set: the same script times builds that predate it.
            spin = {"spin": setup["spin_s"]} if setup["spin_s"] else {}
            with client.acquire(name, wait=WAIT_SECONDS, version=version, **spin) as view:
                answered = now_ns()
                array = view.numpy()
                t1 = now_ns()
                checksum = read_every_byte(array)
                t2 = now_ns()
                del array
            control.send((t1, t2, checksum, {"acquire_returned": answered}))


def torch_mp_producer(setup, control, words, rounds):
    import torch
    import torch.multiprocessing  # noqa: F401 - registers the tensors' shared-memory pickling.
    queue = setup["queue"]
    control.send("ready")
    for _ in range(rounds):
        control.recv()
        tensor = torch.empty((words,), dtype=torch.int64).share_memory_()
        fill_pattern(tensor.numpy().view("uint64"))
        idle(setup)
        t0 = now_ns()
        queue.put(tensor)
        control.send(t0)
        control.recv()
        del tensor


def torch_mp_consumer(setup, control, words, rounds):
    import torch.multiprocessing  # noqa: F401 - registers the tensors' shared-memory pickling.
    queue = setup["queue"]
    control.send("ready")
    for _ in range(rounds):
        control.recv()
        control.send("waiting")
        tensor = queue.get(timeout=WAIT_SECONDS)
        array = tensor.numpy().view("uint64")
        t1 = now_ns()
        checksum = read_every_byte(array)
        t2 = now_ns()
        del array, tensor
        control.send((t1, t2, checksum))


def shared_memory_producer(setup, control, words, rounds):
    import numpy as np
    from multiprocessing import shared_memory
    channel = setup["send"]
    control.send("ready")
    for _ in range(rounds):
        control.recv()
        segment = shared_memory.SharedMemory(create=True, size=words * 8)
        array = np.ndarray((words,), dtype=np.uint64, buffer=segment.buf)
        fill_pattern(array)
        idle(setup)
        t0 = now_ns()
        channel.send({"name": segment.name, "shape": array.shape, "dtype": array.dtype.str})
        control.send(t0)
        control.recv()
        del array
        segment.close()
        segment.unlink()


def shared_memory_consumer(setup, control, words, rounds):
    import numpy as np
    from multiprocessing import shared_memory
    channel = setup["receive"]
    control.send("ready")
    for _ in range(rounds):
        control.recv()
        control.send("waiting")
        metadata = channel.recv()
        # Spawned children share the coordinator's resource tracker: the producer's unlink
        # is the segment's one unregistration.
        segment = shared_memory.SharedMemory(name=metadata["name"])
        array = np.ndarray(metadata["shape"], dtype=metadata["dtype"], buffer=segment.buf)
        t1 = now_ns()
        checksum = read_every_byte(array)
        t2 = now_ns()
        del array
        segment.close()
        control.send((t1, t2, checksum))


def pickle_pipe_producer(setup, control, words, rounds):
    import numpy as np
    channel = setup["send"]
    control.send("ready")
    for _ in range(rounds):
        control.recv()
        array = np.empty((words,), dtype=np.uint64)
        fill_pattern(array)
        idle(setup)
        t0 = now_ns()
        channel.send(array)
        control.send(t0)
        control.recv()
        del array


def pickle_pipe_consumer(setup, control, words, rounds):
    import numpy  # noqa: F401 - imported before round 0, as the other consumers do.
    channel = setup["receive"]
    control.send("ready")
    for _ in range(rounds):
        control.recv()
        control.send("waiting")
        array = channel.recv()
        t1 = now_ns()
        checksum = read_every_byte(array)
        t2 = now_ns()
        del array
        control.send((t1, t2, checksum))


def hurray_setup(context, daemon, pair_index):
    return {"socket": daemon.socket, "prefix": f"bench/python/pair{pair_index}", "stream": False,
            "spin_s": None}


def hurray_stream_setup(context, daemon, pair_index):
    return dict(hurray_setup(context, daemon, pair_index), stream=True)


def hurray_spin_setup(context, daemon, pair_index):
    # Polls for up to a second: longer than a round's fill of the largest tensor.
    return dict(hurray_stream_setup(context, daemon, pair_index), spin_s=1.0)


def queue_setup(context, daemon, pair_index):
    import torch.multiprocessing as torch_mp
    return {"queue": torch_mp.get_context("spawn").Queue()}


def pipe_setup(context, daemon, pair_index):
    receive, send = context.Pipe(duplex=False)
    return {"receive": receive, "send": send}


CONTENDERS = {
    "hurray": (hurray_setup, hurray_producer, hurray_consumer),
    "hurray_stream": (hurray_stream_setup, hurray_producer, hurray_consumer),
    "hurray_spin": (hurray_spin_setup, hurray_producer, hurray_consumer),
    "torch_mp": (queue_setup, torch_mp_producer, torch_mp_consumer),
    "shared_memory": (pipe_setup, shared_memory_producer, shared_memory_consumer),
    "pickle_pipe": (pipe_setup, pickle_pipe_producer, pickle_pipe_consumer),
}
LABELS = {
    "hurray": "hurray publish -> acquire",
    "hurray_stream": "hurray, next version of one name",
    "hurray_spin": "hurray, next version, consumer spins",
    "torch_mp": "torch.multiprocessing Queue",
    "shared_memory": "shared_memory + pickled metadata",
    "pickle_pipe": "pickle through a Pipe",
}


def unavailable_reason(contender, daemon):
    """Why a contender cannot run here, or None."""
    try:
        if contender.startswith("hurray"):
            if daemon is None:
                return "no hurrayd (--hurrayd)"
            import hurray
            if not hasattr(hurray, "connect"):
                return "this hurray module has no client (hurray.connect)"
        elif contender == "torch_mp":
            import torch  # noqa: F401
        else:
            import numpy  # noqa: F401
    except ImportError as error:
        return f"cannot import: {error} (PYTHONPATH=build-bench/python for hurray)"
    return None


# ---------------------------------------------------------------------------------------
# The coordinator.
# ---------------------------------------------------------------------------------------

def run_pair(context, daemon, contender, words, rounds, pair_index, idle_ms):
    """One fresh producer/consumer pair handing `rounds` tensors; [(handoff, read, parts)]
    in ns, parts the contender's own split of the handoff (may be empty)."""
    setup_of, producer, consumer = CONTENDERS[contender]
    setup = dict(setup_of(context, daemon, pair_index), idle_s=idle_ms / 1e3)
    producer_control, producer_end = context.Pipe()
    consumer_control, consumer_end = context.Pipe()
    processes = [context.Process(target=producer, args=(setup, producer_end, words, rounds)),
                 context.Process(target=consumer, args=(setup, consumer_end, words, rounds))]
    for process in processes:
        process.start()
    try:
        for control in (producer_control, consumer_control):
            expect_reply(control, processes, "ready")
        samples = []
        for _ in range(rounds):
            consumer_control.send("go")
            expect_reply(consumer_control, processes, "waiting")
            producer_control.send("go")
            t0, parts = split_parts(expect_reply(producer_control, processes))
            (t1, t2, checksum), consumer_parts = split_parts(
                expect_reply(consumer_control, processes))
            parts.update({key: stamp - t0 for key, stamp in consumer_parts.items()})
            if checksum != pattern_checksum(words):
                raise RuntimeError(f"{contender}: checksum {checksum:#x}, expected "
                                   f"{pattern_checksum(words):#x}: the bytes arrived wrong")
            producer_control.send("done")
            samples.append((t1 - t0, t2 - t0, parts))
    finally:
        for process in processes:
            process.join(timeout=WAIT_SECONDS)
            if process.is_alive():
                process.kill()
    return samples


def split_parts(reply):
    """A child's reply and the dict of parts it may end with (hurray's contenders)."""
    if isinstance(reply, tuple) and reply and isinstance(reply[-1], dict):
        values = reply[:-1]
        return (values[0] if len(values) == 1 else values), dict(reply[-1])
    return reply, {}


def expect_reply(control, processes, expected=None):
    while not control.poll(1.0):
        for process in processes:
            if process.exitcode not in (None, 0):
                raise RuntimeError(f"{process.name} exited with {process.exitcode}")
    reply = control.recv()
    if expected is not None and reply != expected:
        raise RuntimeError(f"expected {expected!r} from a child, got {reply!r}")
    return reply


def measure_handoffs(context, daemon, contender, size, pairs, rounds, idle_ms=0.0):
    first, steady = [], []
    for pair_index in range(pairs):
        samples = run_pair(context, daemon, contender, size // 8, rounds, pair_index, idle_ms)
        first.append(samples[0])
        steady.extend(samples[1:])
    return first, steady


def summary(values_ns):
    values = sorted(values_ns)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return {"median_us": statistics.median(values) / 1e3, "p90_us": p90 / 1e3,
            "n": len(values)}


# ---------------------------------------------------------------------------------------
# Python acquire+release against the C++ client's.
# ---------------------------------------------------------------------------------------

CONTROL_TENSOR = "bench/python/control"


def python_acquire_release(socket, count, result):
    import hurray
    with hurray.connect(socket=socket, name="bench-python-control") as client:
        samples = []
        for index in range(100 + count):
            start = now_ns()
            client.acquire(CONTROL_TENSOR).release()
            if index >= 100:
                samples.append(now_ns() - start)
    result.send(samples)


def measure_control(context, daemon, hurray_bench, count):
    """Medians of Python's and C++'s acquire+release of one 4 KiB tensor, in ns."""
    import hurray
    import numpy as np
    figures = {}
    with hurray.connect(socket=daemon.socket, name="bench-python-publisher") as client:
        client.publish(CONTROL_TENSOR, np.zeros(4 * KIB // 8, dtype=np.uint64))
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=python_acquire_release,
                                  args=(daemon.socket, count, send))
        process.start()
        figures["python"] = receive.recv()
        process.join()
        if hurray_bench:
            output = subprocess.run(
                [hurray_bench, "worker", "control-acquire-release", daemon.socket,
                 CONTROL_TENSOR, str(count), "default"],
                check=True, capture_output=True, text=True, timeout=300).stdout
            figures["cpp"] = [int(line.split()[1]) for line in output.splitlines()
                              if line.startswith("pair_ns ")]
        client.delete(CONTROL_TENSOR)
    return figures


# ---------------------------------------------------------------------------------------
# hurrayd, the table, the JSON.
# ---------------------------------------------------------------------------------------

class Daemon:
    """hurrayd on a socket in a temporary directory, stopped (SIGTERM) on exit."""

    def __init__(self, binary, capacity_bytes):
        self.directory = tempfile.mkdtemp(prefix="hurray-bench-python-")
        self.socket = os.path.join(self.directory, "d.sock")
        config = os.path.join(self.directory, "hurrayd.toml")
        with open(config, "w", encoding="utf-8") as file:
            file.write(f'state_directory = "{os.path.join(self.directory, "state")}"\n'
                       f'[cpu_pool]\nshm_prefix = "bench-python-{os.getpid()}"\n')
        self.log = open(os.path.join(self.directory, "hurrayd.log"), "wb")
        self.process = subprocess.Popen(
            [binary, "--socket", self.socket, "--config", config, "--cpu-pool-capacity",
             str(capacity_bytes), "--log-level", "warn"], stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket + ".session"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"hurrayd did not start; see {self.log.name}")
            time.sleep(0.02)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def write_report(report, path):
    """Writes `report` as JSON to `path` (none: nothing)."""
    if path:
        with open(path, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=2)
        print(f"  wrote {path}")


def print_table(report):
    print("\nPython: handing a uint64 tensor from one Python process to another "
          "(median / p90, us)")
    header = f"  {'contender':36} {'size':>6} {'phase':>7} {'handoff':>21} {'handoff+read':>21}"
    print(header)
    for row in report["handoffs"]:
        for phase in ("first", "steady"):
            if phase not in row:
                continue
            handoff, read = row[phase]["handoff"], row[phase]["handoff_read"]
            print(f"  {LABELS[row['contender']]:36} {row['size']:>6} {phase:>7} "
                  f"{handoff['median_us']:>10.1f} {handoff['p90_us']:>10.1f} "
                  f"{read['median_us']:>10.1f} {read['p90_us']:>10.1f}   n={handoff['n']}")
            for part, figure in row[phase].get("parts", {}).items():
                print(f"    {PART_LABELS[part]:34} {row['size']:>6} {phase:>7} "
                      f"{figure['median_us']:>10.1f} {figure['p90_us']:>10.1f}")
    for key, ratio in report["ratios"].items():
        print(f"  ratio {key:70} {ratio:10.2f}x")
    for line in report["skipped"]:
        print(f"  skipped: {line}")


def add_ratios(report):
    medians = {(row["contender"], row["size"], phase, figure): row[phase][figure]["median_us"]
               for row in report["handoffs"] for phase in ("first", "steady") if phase in row
               for figure in ("handoff", "handoff_read")}
    for (contender, size, phase, figure), value in medians.items():
        ours = medians.get(("hurray", size, phase, figure))
        if contender != "hurray" and ours:
            report["ratios"][f"{contender}/hurray.{figure}.{phase}.{size}"] = value / ours
        for base in ("hurray_stream", "hurray_spin"):
            theirs = medians.get((base, size, phase, figure))
            if not contender.startswith("hurray") and theirs:
                report["ratios"][f"{contender}/{base}.{figure}.{phase}.{size}"] = value / theirs
    control = report.get("acquire_release")
    if control and "cpp" in control:
        report["ratios"]["acquire_release.python/cpp"] = (control["python"]["median_us"]
                                                          / control["cpp"]["median_us"])


PART_LABELS = {"publish_returned": "t0 -> publish() returned",
               "acquire_returned": "t0 -> acquire() returned"}


def phase_figures(samples):
    """Summaries of one phase's samples: the handoff, handoff+read and each part."""
    figures = {"handoff": summary([h for h, _, _ in samples]),
               "handoff_read": summary([r for _, r, _ in samples])}
    parts = {key for _, _, sample_parts in samples for key in sample_parts}
    if parts:
        figures["parts"] = {key: summary([p[key] for _, _, p in samples if key in p])
                            for key in sorted(parts, key=list(PART_LABELS).index)}
    return figures


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hurrayd", help="the hurrayd binary (the hurray contender needs it)")
    parser.add_argument("--hurray-bench", help="hurray_bench, for the C++ acquire+release")
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--quick", action="store_true", help="64 MiB instead of 1 GiB, fewer rounds")
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS),
                        default=list(CONTENDERS))
    parser.add_argument("--idle-ms", type=float, default=0.0,
                        help="producers sleep this long between filling and t0 (default 0)")
    arguments, ignored = parser.parse_known_args()
    if ignored:  # BENCH_FLAGS is shared with the C++ bench: --quick is the one both take.
        print(f"bench_python: ignoring {' '.join(ignored)}", file=sys.stderr)
    return arguments


def main():
    arguments = parse_arguments()
    large = 64 * 1024 * KIB if arguments.quick else GIB
    # (size, process pairs, rounds per pair): round 0 of each pair is "first".
    plan = [(4 * KIB, 3, 50 if arguments.quick else 300), (large, 2 if arguments.quick else 3, 3)]
    control_count = 200 if arguments.quick else 2000
    context = multiprocessing.get_context("spawn")
    daemon = Daemon(arguments.hurrayd, 3 * large) if arguments.hurrayd else None
    report = {"sizes": {SIZE_NAMES[size]: size for size, _, _ in plan}, "handoffs": [],
              "ratios": {}, "skipped": [],
              "idle_ms": arguments.idle_ms,
              "method": "t0 producer before handing, t1 consumer holds an ndarray, t2 it has "
                        "read every byte; CLOCK_MONOTONIC; first = round 0 of a fresh pair"}
    try:
        for contender in arguments.contenders:
            reason = unavailable_reason(contender, daemon)
            if reason:
                print(f"{contender}: skipped: {reason}", file=sys.stderr)
                report["skipped"].append(f"{contender}: {reason}")
                continue
            for size, pairs, rounds in plan:
                first, steady = measure_handoffs(context, daemon, contender, size, pairs, rounds,
                                                 arguments.idle_ms)
                row = {"contender": contender, "size": SIZE_NAMES[size]}
                for phase, samples in (("first", first), ("steady", steady)):
                    row[phase] = phase_figures(samples)
                report["handoffs"].append(row)
                print(f"{contender} {SIZE_NAMES[size]}: done", file=sys.stderr)
        if "hurray" in arguments.contenders and not unavailable_reason("hurray", daemon):
            figures = measure_control(context, daemon, arguments.hurray_bench, control_count)
            report["acquire_release"] = {language: summary(samples)
                                         for language, samples in figures.items()}
            if "cpp" not in figures:
                report["skipped"].append("C++ acquire+release: no --hurray-bench")
    finally:
        if daemon:
            daemon.stop()
    add_ratios(report)
    print_table(report)
    control = report.get("acquire_release")
    if control:
        for language, figure in control.items():
            print(f"  acquire+release, 4 KiB, {language:6}  median {figure['median_us']:.1f} us"
                  f"  p90 {figure['p90_us']:.1f} us  n={figure['n']}")
    write_report(report, arguments.json)


if __name__ == "__main__":
    main()
