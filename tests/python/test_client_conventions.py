"""NumPy's and PyTorch's conventions on the client's tensors: shape, dtype, device, nbytes,
__array__(dtype, copy), DLPack both ways, and a write through a consumer's torch tensor that
copies a page into the writer alone instead of killing it."""

import textwrap

import numpy as np
import pytest
import torch

import hurray
from conftest import mapped_file_page


def test_views_and_writable_tensors_have_shape_dtype_device_nbytes(client):
    with client.empty([3, 5], np.float32) as tensor:
        assert tensor.shape == (3, 5)
        assert tensor.dtype == hurray.float32 and tensor.dtype.numpy == np.float32
        assert tensor.device == "cpu"
        assert tensor.nbytes == 60
        tensor.numpy()[:] = 1.5
        tensor.publish("conv/a")
    with client.acquire("conv/a") as view:
        assert view.shape == (3, 5)
        assert view.dtype == hurray.float32
        assert view.device == "cpu"
        assert view.nbytes == 60
        assert torch.device(view.device) == torch.device("cpu")
    view.release()
    with pytest.raises(hurray.BufferError):
        _ = view.shape


def test_nbytes_counts_every_buffer_of_a_quantized_tensor(client):
    values = np.arange(64, dtype=np.int8).reshape(8, 8)
    scales = np.linspace(0.5, 1.0, 8, dtype=np.float32)
    tensor = hurray.Tensor.per_channel_affine(values, scales, axis=0)
    client.publish("conv/q", tensor)
    with client.acquire("conv/q") as view:
        assert view.shape == (8, 8) and view.dtype == hurray.int8
        assert view.nbytes == 64 + 32


def test_array_follows_numpy_2_copy_semantics(client):
    client.publish("conv/arr", np.arange(6, dtype=np.int32))
    with client.acquire("conv/arr") as view:
        shared = view.__array__()
        assert not shared.flags.writeable
        assert view.__array__(copy=False).ctypes.data == shared.ctypes.data
        copied = view.__array__(copy=True)
        assert copied.ctypes.data != shared.ctypes.data and copied.flags.writeable
        copied[0] = 100
        assert view.numpy()[0] == 0
        widened = view.__array__(np.int64)
        assert widened.dtype == np.int64 and list(widened) == list(range(6))
        assert view.__array__(np.int32, copy=False).ctypes.data == shared.ctypes.data
        with pytest.raises(ValueError, match="int32 elements must be copied to become float64"):
            view.__array__(np.float64, copy=False)
    with client.empty([4], np.int16) as tensor:
        array = np.asarray(tensor)
        array[:] = 7
        assert tensor.__array__(copy=True).flags.owndata
        assert list(tensor.numpy()) == [7, 7, 7, 7]
        tensor.cancel()


def test_torch_reads_a_view_without_a_copy(client):
    data = np.arange(300_000, dtype=np.float32)
    client.publish("conv/zc", data)
    with client.acquire("conv/zc") as view:
        array = view.numpy()
        tensor = torch.from_dlpack(view)
        assert torch.equal(tensor, torch.from_numpy(data))
        # Another mapping of the very same pages: same file, same offset.
        assert mapped_file_page(tensor.data_ptr()) == mapped_file_page(array.ctypes.data)
        last = tensor.data_ptr() + tensor.numel() * 4 - 1
        assert mapped_file_page(last) == mapped_file_page(array.ctypes.data + data.nbytes - 1)


def test_a_write_through_a_consumers_torch_tensor_stays_in_the_writer(daemon, client):
    client.publish("conv/w", np.full((256, 1024), 3.0, dtype=np.float32))
    code = textwrap.dedent("""
        import torch, hurray
        with hurray.connect(name="writer") as client:
            view = client.acquire("conv/w")
            weights = torch.from_dlpack(view)
            weights[0, 0] = 5.0            # One page of this process's mapping.
            weights[100:].mul_(2.0)        # Many pages.
            assert weights[0, 0].item() == 5.0 and weights[200, 7].item() == 6.0
            assert weights[1, 0].item() == 3.0
            again = torch.from_dlpack(client.acquire("conv/w"))
            assert again[0, 0].item() == 3.0 and again[200, 7].item() == 3.0
            print("survived")
    """)
    result = daemon.run_python(code)
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.strip() == "survived"
    with client.acquire("conv/w") as view:
        assert (view.numpy() == 3.0).all()
    other = daemon.run_python(textwrap.dedent("""
        import hurray
        with hurray.connect() as client, client.acquire("conv/w") as view:
            print(float(view.numpy().sum()))
    """))
    assert other.returncode == 0, other.stderr
    assert float(other.stdout) == 3.0 * 256 * 1024


def test_a_torch_tensor_of_a_view_keeps_the_lease(client):
    client.publish("conv/life", np.arange(10, dtype=np.int64))
    view = client.acquire("conv/life")
    tensor = torch.from_dlpack(view)
    view.release()
    assert client.stats().lease_count == 1
    tensor[0] = 42  # Private to this tensor's mapping.
    assert tensor.sum().item() == 42 + sum(range(1, 10))
    del tensor
    assert client.stats().lease_count == 0


def test_dlpack_refuses_another_device_and_accepts_versions(client):
    client.publish("conv/dev", np.zeros(4, dtype=np.uint8))
    with client.acquire("conv/dev") as view:
        with pytest.raises(hurray.BufferError, match=r"dl_device=\(2, 0\).*lives on cpu"):
            view.__dlpack__(dl_device=(2, 0))
        capsule = view.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
        assert type(capsule).__name__ == "PyCapsule"


def test_a_writable_tensor_is_filled_in_place_through_torch(client):
    with client.empty([4, 4], np.float32) as tensor:
        assert tensor.__dlpack_device__() == (1, 0)
        weights = torch.from_dlpack(tensor)
        weights.copy_(torch.arange(16, dtype=torch.float32).reshape(4, 4))
        assert weights.data_ptr() == tensor.numpy().ctypes.data
        with pytest.raises(hurray.BufferError, match="written in place"):
            tensor.__dlpack__(copy=True)
        del weights
        tensor.publish("conv/filled")
    with client.acquire("conv/filled") as view:
        np.testing.assert_array_equal(view.numpy(), np.arange(16, dtype=np.float32).reshape(4, 4))
