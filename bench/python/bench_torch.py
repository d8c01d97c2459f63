#!/usr/bin/python3
"""The torch part of `make bench`: a model's weights for N worker processes, hurray.torch
against what PyTorch users do today, side by side in one run.

  acquire -> torch   a warm `torch.from_dlpack(client.acquire(name))` of a 4 KiB tensor
                     (acquired once before: the fast path) and its release, in one process;
                     beside it `torch.from_numpy` of an array the process holds (the floor),
                     and a torch.multiprocessing Queue's get of a tensor already in shared
                     memory, put by another process (what a second tensor costs there).
  state dict         handing 1,000 tensors (4 KiB each) to a fresh process: hurray's from
                     the consumer's connect to holding hurray.torch.state_dict() (the
                     producer published them before, with publish_state_dict); the Queue's
                     from the producer's put of the dict of shared tensors to the consumer's
                     get returning.
  exec -> output     a worker process from exec to its first output of the test suite's small
                     transformer (tests/python/tiny_transformer.py, about 20 MiB of float32):
                     built on the "meta" device and attached to the weights imported in hurray,
                     against torch.load of the same weights from a file in the page cache; and
                     the summed PSS of N such workers alive at once (smaps_rollup).

Run: PYTHONPATH=build-bench/python /usr/bin/python3 bench/python/bench_torch.py \
       --hurrayd build-bench/daemon/hurrayd --json build-bench/bench_torch.json [--quick]
"""

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from bench_python import Daemon, now_ns, summary, write_report

TESTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                         "python")
STATE_DICT_TENSORS = 1000
TENSOR_ELEMENTS = 1024  # float32: 4 KiB each.


# ---------------------------------------------------------------------------------------
# acquire -> torch
# ---------------------------------------------------------------------------------------

def acquire_to_torch(socket, count):
    """Samples (ns) of a warm acquire + torch.from_dlpack + release, and of torch.from_numpy."""
    import hurray
    import numpy as np
    import torch
    samples = {"hurray": [], "from_numpy": []}
    with hurray.connect(socket=socket, name="bench-torch-acquire") as client:
        client.publish("bench/torch/one", np.zeros(TENSOR_ELEMENTS, dtype=np.float32))
        array = np.zeros(TENSOR_ELEMENTS, dtype=np.float32)
        for index in range(100 + count):
            start = now_ns()
            tensor = torch.from_dlpack(client.acquire("bench/torch/one"))
            del tensor  # Ends the lease (the view went with the expression).
            took = now_ns() - start
            start = now_ns()
            floor = torch.from_numpy(array)
            del floor
            floor_took = now_ns() - start
            if index >= 100:
                samples["hurray"].append(took)
                samples["from_numpy"].append(floor_took)
        client.delete("bench/torch/one")
    return samples


def queue_producer(queue, ready, count):
    import torch
    tensor = torch.zeros(TENSOR_ELEMENTS).share_memory_()
    for _ in range(count):
        ready.get()
        queue.put((now_ns(), tensor))
    ready.get()  # The consumer has the last one (its descriptor comes from this process).


def queue_gets(context, count):
    """Samples (ns) of a torch.multiprocessing Queue handing one shared tensor over."""
    import torch.multiprocessing  # noqa: F401 - registers the tensor reductions.
    queue, ready = context.Queue(), context.Queue()
    producer = context.Process(target=queue_producer, args=(queue, ready, count + 20))
    producer.start()
    samples = []
    for index in range(count + 20):
        ready.put(True)
        sent, tensor = queue.get()
        received = now_ns()
        del tensor
        if index >= 20:
            samples.append(received - sent)
    ready.put(True)
    producer.join()
    return samples


# ---------------------------------------------------------------------------------------
# A 1,000-tensor state dict to a fresh process
# ---------------------------------------------------------------------------------------

def hurray_state_dict_consumer(socket, result):
    import hurray
    import hurray.torch
    start = now_ns()
    with hurray.connect(socket=socket, name="bench-torch-state-dict") as client:
        tensors = hurray.torch.state_dict(client, "bench/sd/")
        took = now_ns() - start
        assert len(tensors) == STATE_DICT_TENSORS
        checksum = sum(float(tensor[0]) for tensor in tensors.values())
    result.send((took, checksum))


def queue_state_dict_producer(queue, ready):
    import torch
    tensors = {f"layer{i}.weight": torch.full((TENSOR_ELEMENTS,), float(i)).share_memory_()
               for i in range(STATE_DICT_TENSORS)}
    ready.get()
    queue.put((now_ns(), tensors))
    ready.get()  # Keep the tensors until the consumer has them.


def queue_state_dict_consumer(queue, ready, result):
    import torch.multiprocessing  # noqa: F401
    ready.put(True)
    sent, tensors = queue.get()
    took = now_ns() - sent
    checksum = sum(float(tensor[0]) for tensor in tensors.values())
    ready.put(True)
    result.send((took, checksum))


def state_dict_handoffs(context, socket, rounds):
    """Samples (ns) of handing 1,000 tensors to a fresh process, each way."""
    import hurray
    import hurray.torch
    import torch
    expected = float(sum(range(STATE_DICT_TENSORS)))
    samples = {"hurray": [], "torch_mp": []}
    with hurray.connect(socket=socket, name="bench-torch-publisher") as client:
        state = {f"layer{i}.weight": torch.full((TENSOR_ELEMENTS,), float(i))
                 for i in range(STATE_DICT_TENSORS)}
        hurray.torch.publish_state_dict(client, "bench/sd/", state)
        for _ in range(rounds):
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=hurray_state_dict_consumer, args=(socket, send))
            process.start()
            took, checksum = receive.recv()
            process.join()
            assert checksum == expected
            samples["hurray"].append(took)
        for name in state:
            client.delete(f"bench/sd/{name}")
    for _ in range(rounds):
        queue, ready = context.Queue(), context.Queue()
        receive, send = context.Pipe(duplex=False)
        producer = context.Process(target=queue_state_dict_producer, args=(queue, ready))
        consumer = context.Process(target=queue_state_dict_consumer, args=(queue, ready, send))
        producer.start()
        consumer.start()
        took, checksum = receive.recv()
        consumer.join()
        producer.join()
        assert checksum == expected
        samples["torch_mp"].append(took)
    return samples


# ---------------------------------------------------------------------------------------
# exec -> first output, and the workers' memory
# ---------------------------------------------------------------------------------------

WORKER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import torch, tiny_transformer
    if sys.argv[2] == "hurray":
        import hurray, hurray.torch
        client = hurray.connect(name="bench-torch-worker")
        model = hurray.torch.attach(tiny_transformer.TinyTransformer(device="meta"), client,
                                    "bench/model/")
    else:  # What a worker does without hurray: build the model, load the checkpoint into it.
        model = tiny_transformer.TinyTransformer()
        model.load_state_dict(torch.load(sys.argv[3]))
    logits = tiny_transformer.run(model.eval())
    print(time.clock_gettime_ns(time.CLOCK_MONOTONIC), float(logits[0, 0, 0]), flush=True)
    sys.stdin.read()
""")


def whole_pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def run_workers(kind, socket, checkpoint, count):
    """(exec -> first output of each worker in ns, the workers' summed PSS in KiB)."""
    env = dict(os.environ, HURRAY_SOCKET=socket)
    workers, times = [], []
    for _ in range(count):
        start = now_ns()
        process = subprocess.Popen([sys.executable, "-c", WORKER, TESTS_DIR, kind, checkpoint],
                                   env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)
        workers.append((start, process))
    outputs = set()
    for start, process in workers:
        printed, first = process.stdout.readline().split()
        times.append(int(printed) - start)
        outputs.add(first)
    pss = sum(whole_pss_kib(process.pid) for _, process in workers)
    for _, process in workers:
        process.stdin.close()
        process.wait(60)
    assert len(outputs) == 1, outputs
    return times, pss


def model_workers(socket, workers, rounds):
    sys.path.insert(0, TESTS_DIR)
    import hurray
    import hurray.torch
    import torch
    import tiny_transformer
    figures = {"hurray": {"exec_to_output": [], "pss_kib": []},
               "torch_load": {"exec_to_output": [], "pss_kib": []}}
    state = tiny_transformer.seeded_model().state_dict()
    weights = sum(tensor.numel() * tensor.element_size() for tensor in state.values())
    with tempfile.TemporaryDirectory() as directory, \
            hurray.connect(socket=socket, name="bench-torch-model") as client:
        checkpoint = os.path.join(directory, "tiny.pt")
        torch.save(state, checkpoint)
        hurray.torch.publish_state_dict(client, "bench/model/", state)
        for _ in range(rounds):
            for kind in ("hurray", "torch_load"):
                times, pss = run_workers(kind, socket, checkpoint, workers)
                figures[kind]["exec_to_output"] += times
                figures[kind]["pss_kib"].append(pss)
        for key in state:
            client.delete(f"bench/model/{key}")
    return figures, weights


# ---------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hurrayd", required=True, help="the hurrayd binary")
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--workers", type=int, default=4, help="model workers at once")
    arguments, ignored = parser.parse_known_args()
    if ignored:
        print(f"bench_torch: ignoring {' '.join(ignored)}", file=sys.stderr)
    count = 500 if arguments.quick else 5000
    rounds = 3 if arguments.quick else 10
    context = multiprocessing.get_context("spawn")
    daemon = Daemon(arguments.hurrayd, 512 << 20)
    report = {"method": "CLOCK_MONOTONIC across processes; medians and p90 in us; PSS from "
                        "/proc/PID/smaps_rollup of every worker while all are alive"}
    try:
        acquire = acquire_to_torch(daemon.socket, count)
        report["acquire_to_torch"] = {key: summary(values) for key, values in acquire.items()}
        report["acquire_to_torch"]["torch_mp_queue_get"] = summary(queue_gets(context, count // 5))
        handoffs = state_dict_handoffs(context, daemon.socket, rounds)
        report["state_dict_1000"] = {key: summary(values) for key, values in handoffs.items()}
        workers, weights = model_workers(daemon.socket, arguments.workers,
                                         1 if arguments.quick else 3)
        report["model"] = {"weights_kib": weights / 1024, "workers": arguments.workers}
        for kind, figures in workers.items():
            report["model"][kind] = {
                "exec_to_output": summary(figures["exec_to_output"]),
                "summed_pss_kib": statistics.median(figures["pss_kib"])}
    finally:
        daemon.stop()
    ratios = report["ratios"] = {}
    acquire = report["acquire_to_torch"]
    ratios["acquire_to_torch.torch_mp_queue_get/hurray"] = (
        acquire["torch_mp_queue_get"]["median_us"] / acquire["hurray"]["median_us"])
    handoff = report["state_dict_1000"]
    ratios["state_dict_1000.torch_mp/hurray"] = (handoff["torch_mp"]["median_us"]
                                                 / handoff["hurray"]["median_us"])
    model = report["model"]
    ratios["model.exec_to_output.torch_load/hurray"] = (
        model["torch_load"]["exec_to_output"]["median_us"]
        / model["hurray"]["exec_to_output"]["median_us"])
    ratios["model.summed_pss.torch_load/hurray"] = (model["torch_load"]["summed_pss_kib"]
                                                    / model["hurray"]["summed_pss_kib"])
    print("\ntorch: a model's weights for worker processes (median / p90, us)")
    for key, figure in acquire.items():
        print(f"  acquire->torch {key:24} {figure['median_us']:10.2f} {figure['p90_us']:10.2f}"
              f"   n={figure['n']}")
    for key, figure in handoff.items():
        print(f"  1,000-tensor state dict, {key:15} {figure['median_us']:10.1f} "
              f"{figure['p90_us']:10.1f}   n={figure['n']}")
    print(f"  model: {model['weights_kib']:.0f} KiB of weights, {model['workers']} workers")
    for kind in ("hurray", "torch_load"):
        figure = model[kind]
        print(f"  exec->first output, {kind:10} {figure['exec_to_output']['median_us'] / 1e3:10.1f}"
              f" ms  p90 {figure['exec_to_output']['p90_us'] / 1e3:.1f} ms; summed PSS "
              f"{figure['summed_pss_kib'] / 1024:.1f} MiB")
    extra = (model["torch_load"]["summed_pss_kib"] - model["hurray"]["summed_pss_kib"]) / 1024
    print(f"  torch.load's workers take {extra:.1f} MiB more in all "
          f"({extra / model['workers']:.1f} MiB a worker; the weights are "
          f"{model['weights_kib'] / 1024:.1f} MiB)")
    for key, ratio in ratios.items():
        print(f"  ratio {key:50} {ratio:8.2f}x")
    write_report(report, arguments.json)


if __name__ == "__main__":
    main()
