"""hurray.save / hurray.load: .hrry files in this process, no daemon."""

import numpy as np
import pytest

import hurray


def _tensors():
    rng = np.random.default_rng(11)
    return {
        "w/dense": hurray.from_numpy(rng.random((3, 5)).astype(np.float32)),
        "w/quantized": hurray.Tensor.per_channel_affine(
            rng.integers(-128, 127, size=(4, 6), dtype=np.int8),
            rng.random(4).astype(np.float32), rng.integers(-3, 3, size=4, dtype=np.int8)),
        "w/coo": hurray.Tensor.coo(np.array([1.0, -2.0, 3.5], dtype=np.float64),
                                   [[0, 1], [2, 3], [4, 0]], (5, 4)),
        "w/csr": hurray.Tensor.csr(np.array([1, 2, 3], dtype=np.int32), [0, 1, 1, 3],
                                   [2, 0, 3], (3, 4)),
        "w/paged": hurray.Tensor.block_paged(
            np.arange(2 * 4 * 3, dtype=np.float16).reshape(2, 4, 3), [1, 0], (8, 3), 4),
        "w/empty": hurray.from_numpy(np.zeros((0, 7), dtype=np.int64)),
    }


def test_every_buffer_round_trips_byte_for_byte_in_descriptor_order(tmp_path):
    path = tmp_path / "model.hrry"
    saved = _tensors()
    hurray.save(path, saved)
    loaded = hurray.load(path)
    assert list(loaded) == list(saved)
    for name, tensor in saved.items():
        assert loaded[name].descriptor == tensor.descriptor, name
        assert len(loaded[name].buffers) == len(tensor.buffers), name
        for got, want in zip(loaded[name].buffers, tensor.buffers):
            assert bytes(got) == bytes(want), name
    np.testing.assert_array_equal(loaded["w/quantized"].scales, saved["w/quantized"].scales)
    np.testing.assert_array_equal(loaded["w/coo"].indices, [[0, 1], [2, 3], [4, 0]])


def test_loaded_buffers_are_aligned_as_their_descriptor_declares(tmp_path):
    hurray.save(tmp_path / "a.hrry", _tensors())
    for tensor in hurray.load(tmp_path / "a.hrry").values():
        for handle, declared in zip(tensor.buffer_handles, tensor.descriptor.buffer_handles):
            if declared.byte_size:
                assert handle.alignment >= declared.alignment


def test_a_single_tensor_an_array_and_a_view_are_saved(tmp_path):
    array = np.arange(10, dtype=np.uint16)
    hurray.save(str(tmp_path / "one.hrry"), hurray.from_numpy(array))
    assert list(hurray.load(tmp_path / "one.hrry")) == ["tensor"]
    np.testing.assert_array_equal(hurray.load(tmp_path / "one.hrry")["tensor"].numpy(), array)
    hurray.save(tmp_path / "array.hrry", {"a": array, "b": hurray.from_numpy(array)})
    loaded = hurray.load(tmp_path / "array.hrry")
    np.testing.assert_array_equal(loaded["a"].numpy(), array)
    np.testing.assert_array_equal(loaded["b"].numpy(), array)


class _WrongBufferCount:
    """A tensor whose buffers disagree with its descriptor (seed 000)."""

    def __init__(self):
        quantized = hurray.Tensor.per_channel_affine(
            np.zeros((2, 2), dtype=np.int8), np.ones(2, dtype=np.float32))
        self.descriptor = quantized.descriptor
        self.buffers = quantized.buffers[:1]


def test_a_tensor_whose_buffer_count_disagrees_is_refused_and_no_file_appears(tmp_path):
    path = tmp_path / "bad.hrry"
    with pytest.raises(hurray.InvalidArgumentError, match="w/bad.*1 buffers given.*has 2"):
        hurray.save(path, {"w/ok": np.zeros(3, np.float32), "w/bad": _WrongBufferCount()})
    assert list(tmp_path.iterdir()) == []


def test_a_non_contiguous_buffer_and_a_non_tensor_are_refused(tmp_path):
    class Strided:
        descriptor = hurray.Descriptor.dense((4,), hurray.uint8)
        buffers = [memoryview(bytes(8))[::2]]

    with pytest.raises(hurray.InvalidArgumentError, match="tensor s: buffers\\[0\\]"):
        hurray.save(tmp_path / "s.hrry", {"s": Strided()})
    with pytest.raises(TypeError, match="'x' is a list"):
        hurray.save(tmp_path / "x.hrry", {"x": [1, 2]})
    with pytest.raises(TypeError, match="names are str"):
        hurray.save(tmp_path / "x.hrry", {3: np.zeros(1)})


def test_a_missing_file_is_not_found(tmp_path):
    with pytest.raises(hurray.NotFoundError, match="missing.hrry"):
        hurray.load(tmp_path / "missing.hrry")


def test_a_truncated_file_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "t.hrry"
    hurray.save(path, _tensors())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(hurray.InvalidArgumentError, match="t.hrry"):
        hurray.load(path)
    path.write_bytes(b"NOTHRRY!" + data[8:])
    with pytest.raises(hurray.InvalidArgumentError, match="t.hrry"):
        hurray.load(path)


def test_a_corrupted_buffer_is_data_loss(tmp_path):
    path = tmp_path / "c.hrry"
    hurray.save(path, {"w/x": np.full(1000, 7, dtype=np.int32)})
    data = bytearray(path.read_bytes())
    offset = 4096  # The first buffer starts at the first aligned offset past the header.
    assert data[offset:offset + 4] == np.int32(7).tobytes()
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(hurray.DataLossError, match="w/x"):
        hurray.load(path)
