"""Bad inputs to the client: clear exceptions, never a crash."""

import numpy as np
import pytest
import torch

import hurray


def test_unknown_dtype(client):
    with pytest.raises(hurray.InvalidArgumentError, match="float3"):
        client.empty([4], "float3")


def test_negative_and_huge_shapes(client):
    with pytest.raises(hurray.InvalidArgumentError, match="negative"):
        client.empty([4, -1], "float32")
    with pytest.raises(hurray.Error):
        client.empty([2**40, 2**40], "float32")
    with pytest.raises(hurray.ResourceExhaustedError):
        client.empty([2**36], "float32")  # Well above the 64 MiB pool.


def test_bad_names_carry_the_daemons_message(client):
    with pytest.raises(hurray.InvalidArgumentError) as raised:
        client.publish("no-namespace", np.zeros(2))
    assert "no-namespace" in str(raised.value)
    with pytest.raises(hurray.InvalidArgumentError):
        client.acquire("bad name/with space")


def test_missing_tensor_and_wait(client):
    with pytest.raises(hurray.NotFoundError):
        client.acquire("missing/tensor")
    with pytest.raises(hurray.DeadlineExceededError):
        client.acquire("missing/tensor", wait=0.05)
    with pytest.raises(hurray.InvalidArgumentError, match="wait"):
        client.acquire("missing/tensor", wait=-1)
    with pytest.raises(hurray.DeadlineExceededError):
        client.acquire("missing/tensor", wait=0.05, spin=5.0)  # The wait's end ends the spin.
    for spin in (-1, float("nan"), 1e9):
        with pytest.raises(hurray.InvalidArgumentError, match="spin"):
            client.acquire("missing/tensor", wait=0.05, spin=spin)


def test_non_contiguous_arrays_are_copied_contiguous(client):
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    client.publish("copy/strided", base[:, ::2].T)
    with client.acquire("copy/strided") as view:
        np.testing.assert_array_equal(view.numpy(), base[:, ::2].T)
        assert view.numpy().flags.c_contiguous


def test_torch_tensors_and_buffers_publish(client):
    client.publish("copy/torch", torch.arange(6, dtype=torch.float16).reshape(2, 3))
    with client.acquire("copy/torch") as view:
        assert view.numpy().dtype == np.float16 and view.numpy().shape == (2, 3)
    client.publish("copy/bytes", bytearray(b"hurray"))
    with client.acquire("copy/bytes") as view:
        assert bytes(view.buffer(0)) == b"hurray"


def test_non_numeric_objects_are_type_errors(client):
    for bad in (object(), "text", np.array(["a", "b"]), np.array([object()])):
        with pytest.raises(TypeError):
            client.publish("bad/object", bad)
    assert client.list("bad/") == []


def test_closed_client_and_cancelled_tensor(daemon):
    client = daemon.connect()
    tensor = client.empty([2], "uint8")
    tensor.cancel()
    with pytest.raises(hurray.BufferError):
        tensor.publish("closed/a")
    client.close()
    with pytest.raises(hurray.FailedPreconditionError, match="closed"):
        client.stats()


def test_out_of_range_buffer(client):
    client.publish("range/a", np.zeros(2))
    with client.acquire("range/a") as view:
        with pytest.raises(IndexError):
            view.buffer(1)


def test_no_daemon():
    with pytest.raises(hurray.UnavailableError):
        hurray.connect("/nonexistent/hurrayd.sock")
