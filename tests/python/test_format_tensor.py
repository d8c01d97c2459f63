"""hurray.Tensor in process: buffers, multi-buffer constructors, from_numpy's copy rules and
the hurray_tensor capsule (__hurray__ / from_hurray; docs/python.md, "The in-process protocol")."""

import gc
import sys
import weakref

import numpy as np
import pytest

import hurray
from conftest import aligned


def address(buffer):
    return np.frombuffer(buffer, dtype=np.uint8).ctypes.data


def test_tensor_checks_the_positional_rule():
    descriptor = hurray.Descriptor.per_channel_affine([4, 3], hurray.int8)
    with pytest.raises(hurray.InvalidArgumentError, match="buffer"):
        hurray.Tensor(descriptor, [aligned(12)])
    with pytest.raises(hurray.InvalidArgumentError, match="16"):
        hurray.Tensor(descriptor, [aligned(12), aligned(12)])
    tensor = hurray.Tensor(descriptor, [aligned(12), aligned(16)])
    assert [h.byte_size for h in tensor.buffer_handles] == [12, 16]
    assert all(h.alignment >= hurray.MIN_BUFFER_ALIGNMENT for h in tensor.buffer_handles)
    assert all(h.sync_mode == "producer_synced" for h in tensor.buffer_handles)
    with pytest.raises(TypeError):
        hurray.Tensor("not a descriptor", [aligned(12)])


def test_tensor_copies_misaligned_buffers_and_measures_alignment():
    source = aligned(64, offset=4).view(np.float32)
    source[:] = np.arange(16, dtype=np.float32)
    tensor = hurray.Tensor(hurray.Descriptor.dense([16], hurray.float32), [source])
    assert address(tensor.buffers[0]) != source.ctypes.data
    assert tensor.buffer_handles[0].alignment >= 64
    np.testing.assert_array_equal(tensor.numpy(), source)
    shared = hurray.Tensor(hurray.Descriptor.dense([16], hurray.float32), [aligned(64, 4096)])
    assert shared.buffer_handles[0].alignment == 4096


def test_from_numpy_shares_an_aligned_array():
    array = aligned(4 * 12).view(np.float32).reshape(3, 4)
    array[:] = np.arange(12).reshape(3, 4)
    tensor = hurray.from_numpy(array, copy=False)
    assert address(tensor.buffers[0]) == array.ctypes.data
    assert tensor.descriptor == hurray.Descriptor.dense([3, 4], hurray.float32)
    assert tensor.numpy().ctypes.data == array.ctypes.data
    np.testing.assert_array_equal(np.asarray(tensor), array)
    assert address(hurray.from_numpy(array).buffers[0]) == array.ctypes.data


def test_from_numpy_copy_true_always_copies():
    array = aligned(32).view(np.int32)
    tensor = hurray.from_numpy(array, copy=True)
    assert address(tensor.buffers[0]) != array.ctypes.data
    assert tensor.buffer_handles[0].alignment >= 64


def test_copy_false_refuses_a_misaligned_array():
    under_aligned = aligned(4 * 17).view(np.float32)[1:]
    with pytest.raises(hurray.CopyRequiredError, match="array is 4-byte aligned, below the 64"):
        hurray.from_numpy(under_aligned, copy=False)
    copied = hurray.from_numpy(under_aligned)
    np.testing.assert_array_equal(copied.numpy(), under_aligned)


def test_copy_false_refuses_a_non_contiguous_array():
    strided = aligned(4 * 16).view(np.float32)[::2]
    with pytest.raises(hurray.CopyRequiredError, match="not contiguous"):
        hurray.from_numpy(strided, copy=False)
    np.testing.assert_array_equal(hurray.from_numpy(strided).numpy(), strided)


def test_from_numpy_rejects_what_is_no_array_or_no_dtype():
    with pytest.raises(TypeError):
        hurray.from_numpy([1, 2, 3])
    with pytest.raises(hurray.InvalidArgumentError):
        hurray.from_numpy(np.array(["a"], dtype=object))


def test_multi_buffer_constructors():
    data = np.arange(12, dtype=np.int8).reshape(4, 3)
    scales = np.ones(4, dtype=np.float32)
    zero_points = np.zeros(4, dtype=np.int8)
    q = hurray.Tensor.per_channel_affine(data, scales, zero_points)
    assert q.quantization.kind == "per_channel_affine" and len(q.buffers) == 3
    np.testing.assert_array_equal(q.data, data)
    np.testing.assert_array_equal(q.scales, scales)
    np.testing.assert_array_equal(q.zero_points, zero_points)
    with pytest.raises(hurray.InvalidArgumentError, match="buffer 1: byte_size 12"):
        hurray.Tensor.per_channel_affine(data, np.ones(3, dtype=np.float32))
    with pytest.raises(hurray.InvalidArgumentError, match="axis 2"):
        hurray.Tensor.per_channel_affine(data, scales, axis=2)

    nf4 = hurray.Tensor.nf4(np.zeros(64, np.uint8), np.ones(2, np.float16), [128])
    assert nf4.dtype is hurray.nf4 and nf4.scales.dtype == np.float16
    mx = hurray.Tensor.mxfp(np.zeros(64, np.uint8), np.zeros(4, np.uint8), [2, 64])
    assert mx.quantization.block_size == 32

    coo = hurray.Tensor.coo(np.array([5.0, 7.0], np.float32), [[0, 0], [1, 1]], [2, 2])
    assert coo.layout == "coo" and coo.descriptor.nnz == 2
    np.testing.assert_array_equal(coo.indices, [[0, 0], [1, 1]])
    with pytest.raises(hurray.InvalidArgumentError, match="not \\(nnz, rank\\)"):
        hurray.Tensor.coo(np.ones(3, np.float32), np.zeros((2, 3), np.int64), [4, 4])
    with pytest.raises(AttributeError):
        coo.indptr

    csr = hurray.Tensor.csr(np.ones(3, np.float64), [0, 1, 3], [0, 0, 1], [2, 2])
    np.testing.assert_array_equal(csr.indptr, [0, 1, 3])
    with pytest.raises(hurray.InvalidArgumentError, match="buffer 1: byte_size 16"):
        hurray.Tensor.csr(np.ones(3, np.float64), [0, 3], [0, 0, 1], [2, 2])
    csc = hurray.Tensor.csc(np.ones(3, np.float64), [0, 1, 3], [0, 0, 1], [2, 2])
    assert csc.layout == "csc"
    with pytest.raises(hurray.InvalidArgumentError, match="numpy\\(\\) needs a dense"):
        csc.numpy()
    pages = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    paged = hurray.Tensor.block_paged(pages, [2, 0], [8, 2], 4)
    np.testing.assert_array_equal(paged.page_table, [2, 0])
    np.testing.assert_array_equal(paged.data, pages)  # Its pages, not the tensor's shape.


def round_trip(tensor):
    return hurray.from_hurray(tensor)


def test_hurray_round_trip_is_zero_copy_for_every_buffer():
    data = np.arange(12, dtype=np.int8).reshape(4, 3)
    tensor = hurray.Tensor.per_channel_affine(data, np.ones(4, np.float32), np.zeros(4, np.int8))
    back = round_trip(tensor)
    assert back.descriptor == tensor.descriptor
    assert [address(b) for b in back.buffers] == [address(b) for b in tensor.buffers]
    assert back.buffer_handles == tensor.buffer_handles
    np.testing.assert_array_equal(back.data, data)
    assert not back.numpy().flags.writeable
    coo = hurray.Tensor.coo(np.array([5.0, 7.0], np.float32), [[0, 0], [1, 1]], [2, 2])
    assert round_trip(coo).descriptor == coo.descriptor
    assert round_trip(round_trip(coo)).descriptor == coo.descriptor


def test_capsule_is_named_and_renamed_when_consumed():
    import ctypes
    name_of = ctypes.pythonapi.PyCapsule_GetName
    name_of.restype, name_of.argtypes = ctypes.c_char_p, [ctypes.py_object]
    capsule = hurray.from_numpy(aligned(64)).__hurray__()
    assert name_of(capsule) == b"hurray_tensor"

    class Holder:
        def __hurray__(self):
            return capsule

    hurray.from_hurray(Holder())
    assert name_of(capsule) == b"used_hurray_tensor"
    with pytest.raises(hurray.BufferError, match="already consumed"):
        hurray.from_hurray(Holder())


def test_from_hurray_needs_the_dunder_and_a_capsule():
    with pytest.raises(TypeError):
        hurray.from_hurray(np.zeros(4))

    class NotACapsule:
        def __hurray__(self):
            return object()

    with pytest.raises(TypeError, match="not a capsule"):
        hurray.from_hurray(NotACapsule())


def test_owner_is_released_exactly_once_after_the_last_view():
    tensor = hurray.from_numpy(aligned(64))
    gone = weakref.ref(tensor)
    before = sys.getrefcount(tensor)
    back = hurray.from_hurray(tensor)
    assert sys.getrefcount(tensor) == before + 1  # the consumed capsule's context holds one
    view = back.numpy()
    del tensor, back
    gc.collect()
    assert gone() is not None  # the array made from the view keeps the producer alive
    del view
    gc.collect()
    assert gone() is None


def test_unconsumed_capsule_releases_its_owner():
    tensor = hurray.from_numpy(aligned(64))
    before = sys.getrefcount(tensor)
    capsule = tensor.__hurray__()
    assert sys.getrefcount(tensor) == before + 1
    del capsule
    assert sys.getrefcount(tensor) == before


def test_buffer_count_mismatch_is_rejected_and_leaves_the_capsule_unconsumed():
    owner = hurray.from_numpy(aligned(12))
    before = sys.getrefcount(owner)
    two_buffers = hurray.Descriptor.per_channel_affine([4, 3], hurray.int8)
    one = [(address(owner.buffers[0]), owner.buffer_handles[0])]
    capsule = hurray._hurray._tensor_capsule(two_buffers, one, owner)
    relay = type("Relay", (), {"__hurray__": lambda self: capsule})()
    with pytest.raises(hurray.InvalidArgumentError, match="1|2"):
        hurray.from_hurray(relay)
    del relay, capsule
    gc.collect()
    assert sys.getrefcount(owner) == before


def test_stream_must_be_none_for_cpu_buffers():
    with pytest.raises(hurray.InvalidArgumentError, match="stream"):
        hurray.from_numpy(aligned(64)).__hurray__(stream=1)


def test_a_c_consumer_reads_the_capsule_through_libhurray():
    import ctypes
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetContext.restype = ctypes.c_void_p
    api.PyCapsule_GetContext.argtypes = [ctypes.py_object]
    libhurray = ctypes.CDLL("libhurray.so.0")  # the one the module loaded
    tensor = hurray.Tensor.coo(np.array([5.0, 7.0], np.float32), [[0, 0], [1, 1]], [2, 2])
    capsule = tensor.__hurray__()
    buffer_list = ctypes.c_void_p(api.PyCapsule_GetPointer(capsule, b"hurray_tensor"))
    context = ctypes.c_void_p(api.PyCapsule_GetContext(capsule))
    version, count = ctypes.c_uint32(), ctypes.c_uint64()
    assert libhurray.hurray_tensor_context_abi_version(context, ctypes.byref(version)) == 0
    assert version.value == libhurray.hurray_c_abi_version()
    assert libhurray.hurray_buffer_list_len(buffer_list, ctypes.byref(count)) == 0
    assert count.value == 2
    data, length = ctypes.c_void_p(), ctypes.c_uint64()
    assert libhurray.hurray_tensor_context_descriptor(context, ctypes.byref(data),
                                                      ctypes.byref(length)) == 0
    assert ctypes.string_at(data, length.value) == tensor.descriptor.to_bytes()
