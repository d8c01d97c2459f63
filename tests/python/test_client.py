"""The client against a real hurrayd: round trips, zero copy, lifetimes, errors."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import hurray
from conftest import mapped_file_page, wait_for


def lease_count(client):
    return client.stats().lease_count


def test_round_trip_between_processes_byte_for_byte(daemon, client):
    data = np.random.default_rng(7).standard_normal((64, 33)).astype(np.float32)
    assert client.publish("rt/weights", data) == 1
    code = textwrap.dedent("""
        import sys, hurray
        with hurray.connect(name="consumer") as client, client.acquire("rt/weights") as view:
            sys.stdout.write(view.numpy().tobytes().hex())
    """)
    result = daemon.run_python(code)
    assert result.returncode == 0, result.stderr
    assert bytes.fromhex(result.stdout) == data.tobytes()


def test_a_spinning_wait_gets_the_version_another_process_publishes(daemon, client):
    code = textwrap.dedent("""
        import time, numpy, hurray
        time.sleep(0.2)
        with hurray.connect() as client:
            print(client.publish("rt/spun", numpy.arange(8, dtype=numpy.int64)))
    """)
    producer = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, "-c", code], env=dict(os.environ, HURRAY_SOCKET=daemon.socket),
        stdout=subprocess.PIPE, text=True)
    with client.acquire("rt/spun", wait=10, spin=10) as view:
        assert view.numpy().tolist() == list(range(8))
    assert producer.wait(timeout=30) == 0
    assert producer.stdout.read().strip() == "1"


def test_producer_in_another_process_fills_pool_memory(daemon, client):
    code = textwrap.dedent("""
        import numpy, hurray
        with hurray.connect() as client, client.empty([3, 5], "int16") as tensor:
            tensor.numpy()[...] = numpy.arange(15, dtype=numpy.int16).reshape(3, 5)
            print(tensor.publish("rt/made"))
    """)
    result = daemon.run_python(code)
    assert result.returncode == 0, result.stderr
    with client.acquire("rt/made", wait=5) as view:
        assert view.version == int(result.stdout)
        np.testing.assert_array_equal(view.numpy(), np.arange(15, dtype=np.int16).reshape(3, 5))


def test_numpy_and_torch_are_zero_copy(client):
    client.publish("zc/a", np.arange(1000, dtype=np.int64))
    with client.acquire("zc/a") as view:
        array = view.numpy()
        memory = view.buffer(0)
        assert array.ctypes.data == np.frombuffer(memory, np.uint8).ctypes.data
        assert np.asarray(view).ctypes.data == array.ctypes.data
        # DLPack consumers get another mapping of the very same pages (copy-on-write:
        # test_client_conventions.py): same file, same offset.
        tensor = torch.from_dlpack(view)
        assert mapped_file_page(tensor.data_ptr()) == mapped_file_page(array.ctypes.data)
        assert (mapped_file_page(np.from_dlpack(view).ctypes.data)
                == mapped_file_page(array.ctypes.data))
        assert view.__dlpack_device__() == (1, 0)
        assert tensor.dtype == torch.int64 and tensor[999].item() == 999


def test_writable_tensor_is_pool_memory(client):
    with client.empty([8], np.float64) as tensor:
        array = tensor.numpy()
        array[:] = 2.5
        assert np.frombuffer(tensor.buffer(0), np.float64).ctypes.data == array.ctypes.data
        version = tensor.publish("zc/written")
    with client.acquire("zc/written") as view:
        assert view.version == version
        assert (view.numpy() == 2.5).all()
    with pytest.raises(hurray.BufferError):
        tensor.numpy()


def test_views_are_read_only(client):
    client.publish("ro/a", np.zeros(16, dtype=np.uint8))
    with client.acquire("ro/a") as view:
        array = view.numpy()
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array[0] = 1
        with pytest.raises(ValueError):
            array.setflags(write=True)
        memory = view.buffer(0)
        assert memory.readonly
        with pytest.raises(TypeError):
            memory[0] = 1


def test_an_array_keeps_the_lease_after_del_view(client):
    client.publish("life/a", np.arange(4096, dtype=np.int32))
    view = client.acquire("life/a")
    array = view.numpy()
    del view
    assert lease_count(client) == 1
    assert array[4095] == 4095 and array.sum() == np.arange(4096).sum()
    del array
    assert lease_count(client) == 0


def test_release_refuses_access_but_arrays_stay_valid(client):
    client.publish("life/b", np.full(100, 3, dtype=np.int16))
    view = client.acquire("life/b")
    array = view.numpy()
    tensor = torch.from_dlpack(view)
    view.release()
    assert view.released
    for access in (view.numpy, lambda: view.buffer(0), lambda: view.name, lambda: view.values,
                   view.__dlpack__):
        with pytest.raises(hurray.BufferError):
            access()
    assert lease_count(client) == 1
    assert (array == 3).all()
    del array
    assert lease_count(client) == 1  # The torch tensor still holds it.
    assert tensor.sum().item() == 300
    del tensor
    assert lease_count(client) == 0
    view.release()  # Releasing twice is fine.


def test_release_without_arrays_ends_the_lease_at_once(client):
    client.publish("life/c", np.ones(3))
    with client.acquire("life/c"):
        assert lease_count(client) == 1
    assert lease_count(client) == 0


def test_killed_consumer_returns_every_lease(daemon, client):
    client.publish("kill/a", np.ones(1000))
    client.publish("kill/b", np.ones(10))
    code = textwrap.dedent("""
        import sys, time, hurray
        client = hurray.connect()
        views = [client.acquire("kill/a"), client.acquire("kill/b")]
        arrays = [view.numpy() for view in views]
        print("ready", flush=True)
        time.sleep(60)
    """)
    env = dict(__import__("os").environ, HURRAY_SOCKET=daemon.socket)
    consumer = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                text=True)
    try:
        assert consumer.stdout.readline().strip() == "ready"
        assert lease_count(client) == 2
        consumer.send_signal(signal.SIGKILL)
        consumer.wait(10)
    finally:
        consumer.kill()
        consumer.stdout.close()
    assert wait_for(lambda: lease_count(client) == 0)


def test_batch_acquire_and_release_together(client):
    for i in range(3):
        client.publish(f"batch/t{i}", np.full(4, i, dtype=np.int8))
    with client.batch_acquire(prefix="batch/") as batch:
        assert [view.name for view in batch] == ["batch/t0", "batch/t1", "batch/t2"]
        kept = batch[2].numpy()
        assert lease_count(client) == 3
    assert batch[0].released
    assert lease_count(client) == 3  # `kept` holds the batch, whose leases end together.
    assert (kept == 2).all()
    del kept
    assert lease_count(client) == 0


def test_parts_of_a_coo_tensor(client):
    descriptor = hurray.Descriptor.coo([4, 4], "float32", 3)
    with client.allocate(descriptor) as tensor:
        tensor.buffer_array(0)[:] = [1.0, 2.0, 3.0]
        tensor.buffer_array(1)[:] = [[0, 0], [1, 2], [3, 3]]
        tensor.publish("parts/coo")
    with client.acquire("parts/coo") as view:
        assert view.descriptor == descriptor
        np.testing.assert_array_equal(view.values, [1.0, 2.0, 3.0])
        assert view.indices.dtype == np.uint64 and view.indices.shape == (3, 2)
        assert view.indptr is None and view.scales is None and view.page_table is None
        with pytest.raises(hurray.UnsupportedError):
            view.numpy()


def test_second_acquire_of_a_version_takes_the_fast_path(client):
    client.publish("fast/kv", np.arange(256, dtype=np.float32))
    with client.acquire("fast/kv") as first:
        assert first.numpy()[255] == 255
    held = client.acquire("fast/kv")  # The same version again: a pin, not a lease.
    assert lease_count(client) == 0
    client.publish("fast/kv", np.zeros(256, dtype=np.float32))
    stats = client.stats().fast_path
    assert (stats.lease_pages, stats.pinned_versions, stats.pinned_bytes) == (1, 1, 1024)
    assert held.numpy()[255] == 255  # Superseded, and still its own bytes.
    held.release()
    assert wait_for(lambda: client.stats().fast_path.pinned_versions == 0)
    with client.acquire("fast/kv") as latest:
        assert latest.version == 2 and latest.numpy()[255] == 0


def test_list_describe_stats_delete(client):
    client.publish("inspect/a", np.zeros((2, 3), dtype=np.float32))
    client.publish("inspect/a", np.ones((2, 3), dtype=np.float32))
    [summary] = client.list("inspect/")
    assert (summary.name, summary.latest_version, summary.dtype, summary.shape) == (
        "inspect/a", 2, "float32", (2, 3))
    details = client.describe("inspect/a")
    assert details.version == 2 and details.pool == "cpu"
    assert details.buffers[0].byte_size == 24 and details.descriptor.shape == (2, 3)
    # The namespace belongs to its first publisher: this process's uid.
    assert summary.owner_uid == details.owner_uid == os.getuid()
    stats = client.stats()
    [usage] = [entry for entry in stats.uids if entry.uid == os.getuid()]
    assert usage.published_bytes >= 24 and usage.sessions >= 1
    assert (stats.refused_connection_count, stats.lost_tensor_count) == (0, 0)
    assert stats.pools[0].name == "cpu" and stats.tensor_count >= 1
    # A 64 MiB pool is reserved whole before the daemon serves.
    assert stats.pools[0].reserved_bytes == stats.pools[0].capacity_bytes == 64 << 20
    # Two float32 (2, 3) versions published so far, at least.
    assert stats.published_bytes_total >= 2 * 24
    assert client.delete("inspect/a") == 1
    assert client.list("inspect/") == []


def test_evictable_tensors_make_room_least_recently_used_first(client):
    chunk = np.ones(4 << 20, dtype=np.float32)  # 16 MiB: four fill the test daemon's pool.
    with client.watch("evict/") as watch:
        for i in range(8):
            client.publish(f"evict/{i}", chunk, evictable=True)
        evicted = []
        while (event := watch.get(timeout=1)) is not None:
            if event.kind == "evicted":
                evicted.append(event.name)
    assert evicted[0] == "evict/0"
    assert client.stats().evicted_tensor_count >= len(evicted) >= 4
    with pytest.raises(hurray.NotFoundError):
        client.acquire("evict/0")
    with client.acquire("evict/7") as view:
        assert view.numpy()[0] == 1
    for summary in client.list("evict/"):
        client.delete(summary.name)


def test_watch_reports_publishes_and_deletes(client):
    with client.watch("watch/") as watch:
        client.publish("watch/a", np.zeros(1))
        client.delete("watch/a")
        client.publish("other/a", np.zeros(1))
        events = [watch.get(timeout=10), watch.get(timeout=10)]
        assert [(e.kind, e.name, e.version) for e in events] == [
            ("published", "watch/a", 1), ("deleted", "watch/a", 1)]
        assert watch.get(timeout=0.1) is None
    with pytest.raises(StopIteration):
        next(watch)
