"""Multi-buffer tensors between processes, and the hand-over of a leased view in-process."""

import textwrap

import numpy as np

import hurray
from conftest import mapped_file_page, wait_for

PRODUCE = textwrap.dedent("""
    import numpy as np, hurray
    rng = np.random.default_rng(3)
    data = rng.integers(-128, 127, size=(8, 16), dtype=np.int8)
    scales = rng.random(8).astype(np.float32)
    zero_points = rng.integers(-4, 4, size=8, dtype=np.int8)
    with hurray.connect(name="producer") as client:
        client.publish("mb/quantized",
                       hurray.Tensor.per_channel_affine(data, scales, zero_points, axis=0))
        client.publish("mb/csr", hurray.Tensor.csr(
            np.array([1.5, 2.5, 3.5], dtype=np.float32), [0, 1, 1, 3], [2, 0, 3], (3, 4)))
""")


def test_quantized_and_sparse_tensors_travel_byte_for_byte(daemon, client):
    result = daemon.run_python(PRODUCE)
    assert result.returncode == 0, result.stderr
    rng = np.random.default_rng(3)
    data = rng.integers(-128, 127, size=(8, 16), dtype=np.int8)
    scales = rng.random(8).astype(np.float32)
    zero_points = rng.integers(-4, 4, size=8, dtype=np.int8)
    with client.acquire("mb/quantized", wait=5) as view:
        assert view.descriptor.quantization.kind == "per_channel_affine"
        assert len(view.buffer_handles) == 3
        assert bytes(view.buffer(0)) == data.tobytes()
        np.testing.assert_array_equal(view.scales, scales)
        np.testing.assert_array_equal(view.zero_points, zero_points)
    with client.acquire("mb/csr", wait=5) as view:
        assert view.descriptor.layout == "csr"
        np.testing.assert_array_equal(view.values, [1.5, 2.5, 3.5])
        np.testing.assert_array_equal(view.indptr, [0, 1, 1, 3])
        np.testing.assert_array_equal(view.indices, [2, 0, 3])


def test_a_leased_view_hands_over_through_the_capsule_zero_copy(client):
    client.publish("mb/dense", np.arange(64, dtype=np.float32))
    view = client.acquire("mb/dense")
    tensor = hurray.from_hurray(view)
    assert tensor.descriptor == view.descriptor
    assert tensor.numpy().ctypes.data == view.numpy().ctypes.data
    # The capsule's owner keeps the lease: releasing the view leaves the tensor readable.
    view.release()
    assert client.stats().lease_count == 1
    np.testing.assert_array_equal(tensor.numpy(), np.arange(64, dtype=np.float32))
    del tensor
    assert wait_for(lambda: client.stats().lease_count == 0)


def test_numpy_reads_a_view_through_dlpack(client):
    client.publish("mb/dlpack", np.arange(12, dtype=np.int32).reshape(3, 4))
    with client.acquire("mb/dlpack") as view:
        array = np.from_dlpack(view)
        assert mapped_file_page(array.ctypes.data) == mapped_file_page(view.numpy().ctypes.data)
        np.testing.assert_array_equal(array, np.arange(12, dtype=np.int32).reshape(3, 4))
