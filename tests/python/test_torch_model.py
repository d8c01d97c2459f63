"""A real model, end to end: a small transformer of torch's own modules saved as .safetensors,
imported with `hurrayctl import`, attached by four worker processes that each run the same
batch. Every worker's output equals the output of the model loaded directly, bit for bit,
and the workers share the weights' pages: their summed PSS of the pool's pages is at most
1.1 times the checkpoint (four torch.load's would take four times)."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import hurray
import hurray.torch
import tiny_transformer

_WORKERS = 4
_WORKER_TIMEOUT = 120  # Seconds for a worker to attach, run and report.

_WORKER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import torch, hurray, hurray.torch, tiny_transformer
    with hurray.connect(name="model-worker") as client:
        model = tiny_transformer.TinyTransformer(device="meta")
        hurray.torch.attach(model, client, "tiny/", wait=30)
        model.eval()
        logits = tiny_transformer.run(model)
        with open(sys.argv[2], "wb") as out:
            out.write(logits.numpy().tobytes())
        attached = sum(tensor.device.type == "cpu" for tensor in model.state_dict().values())
        print(json.dumps({"attached": attached}), flush=True)
        sys.stdin.read()  # Hold the weights until the test has measured every worker.
""")


def pool_memory_kib(pid, shm_prefix):
    """{"Pss", "Anonymous", "Rss"}: KiB of process `pid`'s mappings of the pool's segments
    (their file names hold `shm_prefix`), from /proc/PID/smaps. Anonymous counts the pages
    a write copied into the process (copy-on-write): none, when it only read the weights.
    (Private_Dirty would not tell: it counts the pool's pages that one mapping alone maps.)"""
    totals = {"Pss": 0, "Anonymous": 0, "Rss": 0}
    in_pool = False
    with open(f"/proc/{pid}/smaps", encoding="ascii", errors="replace") as smaps:
        for line in smaps:
            fields = line.split()
            if fields and "-" in fields[0] and not fields[0].endswith(":"):
                in_pool = len(fields) >= 6 and shm_prefix in fields[5]
            elif in_pool and fields and fields[0].rstrip(":") in totals:
                totals[fields[0].rstrip(":")] += int(fields[1])
    return totals


def total_pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/smaps_rollup has no Pss line")


@pytest.fixture(scope="module")
def checkpoint(daemon, tmp_path_factory):
    """The seeded model's .safetensors file, imported under tiny/; (path, data bytes)."""
    hurrayctl = os.environ.get("HURRAY_TEST_HURRAYCTL")
    if not hurrayctl:
        pytest.skip("HURRAY_TEST_HURRAYCTL names no hurrayctl binary")
    path = tmp_path_factory.mktemp("model") / "tiny.safetensors"
    data_bytes = tiny_transformer.save_safetensors(tiny_transformer.seeded_model().state_dict(),
                                                   path)
    imported = subprocess.run([hurrayctl, "--socket", daemon.socket, "import", str(path),
                               "--prefix", "tiny/"],
                              capture_output=True, text=True, timeout=120, check=False)
    assert imported.returncode == 0, imported.stderr
    return path, data_bytes


def test_four_workers_run_the_imported_model_on_one_copy_of_its_weights(daemon, checkpoint,
                                                                         tmp_path):
    _, data_bytes = checkpoint
    assert data_bytes > 16 << 20  # Tens of MiB: the page sharing below is measurable.
    expected = tiny_transformer.run(tiny_transformer.seeded_model()).numpy().tobytes()
    tests_dir = os.path.dirname(os.path.abspath(tiny_transformer.__file__))
    env = dict(os.environ, HURRAY_SOCKET=daemon.socket)
    workers = []
    try:
        for index in range(_WORKERS):
            output = tmp_path / f"logits-{index}.bin"
            workers.append((subprocess.Popen(
                [sys.executable, "-c", _WORKER, tests_dir, str(output)], env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True), output))
        deadline = time.monotonic() + _WORKER_TIMEOUT
        for process, _ in workers:
            line = process.stdout.readline()
            assert line, (f"worker {process.pid} ended before reporting: "
                          f"{process.wait(max(1, deadline - time.monotonic()))}, "
                          f"{process.stderr.read()}")
            assert json.loads(line)["attached"] == len(
                tiny_transformer.seeded_model().state_dict())
        # Every worker is alive and holds the weights: measure them all now.
        memory = [pool_memory_kib(process.pid, daemon.shm_prefix) for process, _ in workers]
        whole = [total_pss_kib(process.pid) for process, _ in workers]
    finally:
        for process, _ in workers:
            process.stdin.close()
        for process, _ in workers:
            process.wait(30)
    for process, output in workers:
        assert process.returncode == 0, process.stderr.read()
        assert output.read_bytes() == expected, f"worker {process.pid}'s logits differ"
    checkpoint_kib = data_bytes / 1024
    summed_pss = sum(entry["Pss"] for entry in memory)
    print(f"weights {checkpoint_kib:.0f} KiB; workers' PSS of the pool's pages {summed_pss} "
          f"KiB ({summed_pss / checkpoint_kib:.2f}x); each worker's whole PSS {whole} KiB")
    assert summed_pss <= 1.1 * checkpoint_kib, memory
    for entry in memory:
        # Each worker reads every weight, from the pool's pages, and copied none of them.
        assert entry["Rss"] >= 0.9 * checkpoint_kib, memory
        assert entry["Anonymous"] == 0, memory


def test_a_worker_that_writes_its_weights_changes_no_other(daemon, checkpoint):
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import torch, hurray, hurray.torch, tiny_transformer
        with hurray.connect() as client:
            model = hurray.torch.attach(tiny_transformer.TinyTransformer(device="meta"),
                                        client, "tiny/")
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.zero_()
            assert all(p.abs().sum().item() == 0 for p in model.parameters())
            print("survived")
    """)
    tests_dir = os.path.dirname(os.path.abspath(tiny_transformer.__file__))
    result = subprocess.run([sys.executable, "-c", code, tests_dir],
                            env=dict(os.environ, HURRAY_SOCKET=daemon.socket),
                            capture_output=True, text=True, timeout=_WORKER_TIMEOUT, check=False)
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.strip() == "survived"
    with hurray.connect(daemon.socket) as client:
        model = hurray.torch.attach(tiny_transformer.TinyTransformer(device="meta"), client,
                                    "tiny/")
        assert (tiny_transformer.run(model.eval()).numpy().tobytes()
                == tiny_transformer.run(tiny_transformer.seeded_model()).numpy().tobytes())
